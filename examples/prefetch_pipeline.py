"""An input pipeline as in the paper: preprocessing steps fill a queue while training steps
drain it, in one session, with backpressure and a clean shutdown.

Two QueueRunner threads run the "preprocessing" step (draw a batch of noisy examples of
y = 3 x0 - 2 x1 + 0.5 and normalize them) and enqueue it; the main thread runs training steps
that dequeue batches of 32 and take an SGD step on a linear model. A Coordinator stops the
producers; closing the queue wakes anything still blocked.

    python3 examples/prefetch_pipeline.py [--steps 300] [--backend c|interpreter]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import dsl as fl  # noqa: E402


def build(batch: int = 32):
    queue = fl.FIFOQueue(capacity=256, dtypes=[fl.float32, fl.float32], shapes=[[2], []],
                         name="examples")
    with fl.name_scope("preprocess"):
        x = fl.random_uniform([64, 2], -1.0, 1.0)
        noise = fl.random_normal([64], stddev=0.01)
        y = 3.0 * x[:, 0] - 2.0 * x[:, 1] + 0.5 + noise
        enqueue = queue.enqueue_many([x, y])
    with fl.name_scope("train"):
        xb, yb = queue.dequeue_many(batch)
        w = fl.Variable(np.zeros([2], np.float32), name="w")
        b = fl.Variable(0.0, name="b")
        pred = fl.reduce_sum(xb * w.value(), axis=1) + b.value()
        loss = fl.reduce_mean(fl.square(pred - yb))
        gw, gb = fl.gradients(loss, [w, b])
        step = fl.group(w.assign_sub(0.3 * gw), b.assign_sub(0.3 * gb))
    return queue, enqueue, loss, step, w, b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--backend", choices=("c", "interpreter"), default="c")
    args = ap.parse_args(argv)
    queue, enqueue, loss, step, w, b = build()
    runner = fl.train.QueueRunner(queue, [enqueue, enqueue])
    coord = fl.train.Coordinator()
    with fl.Session(backend=args.backend) as sess:
        sess.run(fl.global_variables_initializer())
        threads = runner.create_threads(sess, coord=coord, start=True)
        t0 = time.perf_counter()
        for i in range(args.steps):
            value, _ = sess.run([loss, step], options=fl.RunOptions(timeout_in_ms=30000))
            if i % 100 == 0:
                print(f"step {i:4d}  loss {value:.5f}  queue {sess.run(queue.size())}")
        elapsed = time.perf_counter() - t0
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=30)
        print(f"w = {np.round(sess.run(w), 3)}, b = {sess.run(b):.3f} (true: [3, -2], 0.5); "
              f"{args.steps / elapsed:.0f} steps/s while two threads preprocess")
    return 0


if __name__ == "__main__":
    sys.exit(main())
