"""Bytes moved per training step: full softmax against sampled softmax, on a 40,000-word
vocabulary with the output layer sharded over parameter-server tasks (the paper's section
6.4 / Figure 9 setup: sampled softmax "reduces the data transfer and computation by a factor
of 78").

    python3 examples/benchmarks/bench_softmax_bytes.py [--quick] [--vocab 40000] [--dim 512]
        [--batch 128] [--num-sampled 512] [--ps 2] [--steps 5]

It starts a local cluster on loopback (``--ps`` PS tasks and one worker, each a ``flowc serve``
process), puts the softmax weights [vocab, dim] and biases [vocab] on the PS tasks ("div"
shards), and trains from a fed batch of final-layer activations [batch, dim] with SGD:

- full softmax: the worker's ``MatMul`` reads every shard (logits over the whole vocabulary),
  and the dense gradient of each shard goes back to its PS for the update, as a TensorFlow 1.x
  program written the plain way does;
- full softmax, matmul on the PS tasks: each shard's logits ``x @ w_k.T + b_k`` are computed
  on its own task (``fl.colocate_with``), and so are their gradients
  (``gradients_on_their_devices``): ``x`` goes to each PS, the logits [batch, vocab] come
  back and their gradient goes out again;
- sampled softmax, rows to the worker (``colocate_matmul=False``, as TensorFlow's
  ``sampled_softmax_loss`` does): each shard gathers the true and sampled rows on its own task
  and sends them; their gradient comes back as sparse rows (``IndexedSlices``) applied there;
- sampled softmax, matmul on the PS (the default for shards): each shard gathers its true and
  sampled rows and multiplies them with ``x`` on its own task, so only ``x`` and logits
  [batch, batch + num_sampled] and their gradient travel.

Bytes moved are read from every task's ``Status`` reply (``traffic``: request and response
frame bytes per RPC method it served, counted once at the serving side), summing ``RunStep``
(the client's feeds and fetches) and ``RecvTensor`` (tensors between tasks) over the timed
steps. Not a test: it prints the numbers, the reduction factor and the step times.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Dict, List

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import dsl as fl  # noqa: E402
from dsl.sharded_logits import gradients_on_their_devices  # noqa: E402
from bench_cluster import LocalCluster  # noqa: E402

DATA_METHODS = ("RunStep", "RecvTensor")
LEARNING_RATE = 0.1
KINDS = ("full", "full_colocated", "sampled_rows", "sampled")
LABELS = {"full": "full", "full_colocated": "full, matmul on the PS",
          "sampled_rows": "sampled, rows to the worker", "sampled": "sampled, matmul on the PS"}


# --- a local cluster of task processes ---------------------------------------------------------
def data_bytes(cluster: LocalCluster) -> int:
    """Bytes of RunStep and RecvTensor frames (requests and responses) every task served."""
    total = 0
    for job, k in cluster.tasks():
        traffic = cluster.status(job, k).get("traffic", {})
        for method in DATA_METHODS:
            t = traffic.get(method, {})
            total += t.get("request_bytes", 0) + t.get("response_bytes", 0)
    return total


# --- the two models --------------------------------------------------------------------------
def _div_rows(vocab: int, ps: int) -> List[int]:
    return [vocab // ps + (k < vocab % ps) for k in range(ps)]


def build(kind: str, args):
    """The softmax layer's training step in a new graph: (graph, x, labels, loss, step op,
    initializer). The shards are initialized on their own tasks (seeded uniform numbers)."""
    g = fl.Graph()
    with g.as_default():
        ws, bs = [], []
        for k, rows in enumerate(_div_rows(args.vocab, args.ps)):
            with fl.device(f"/job:ps/task:{k}"):
                ws.append(fl.Variable(fl.random_uniform_initializer(-0.05, 0.05, seed=k),
                                      shape=[rows, args.dim], name=f"softmax_w{k}"))
                bs.append(fl.Variable(fl.zeros_initializer(), shape=[rows],
                                      name=f"softmax_b{k}"))
        with fl.device("/job:worker/task:0"):
            x = fl.placeholder(fl.float32, [args.batch, args.dim], name="x")
            labels = fl.placeholder(fl.int64, [args.batch, 1], name="labels")
            if kind in ("full", "full_colocated"):
                if kind == "full":
                    logits = fl.matmul(x, fl.concat([w.value() for w in ws], 0),
                                       transpose_b=True)
                    logits = logits + fl.concat([b.value() for b in bs], 0)
                else:
                    pieces = []
                    for w, b in zip(ws, bs):
                        with fl.colocate_with(w), gradients_on_their_devices():
                            pieces.append(fl.matmul(x, w, transpose_b=True) + b)
                    logits = fl.concat(pieces, 1)
                loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=fl.reshape(labels, [-1]), logits=logits))
            else:
                loss = fl.reduce_mean(fl.nn.sampled_softmax_loss(
                    ws, bs, labels, x, args.num_sampled, args.vocab, partition_strategy="div",
                    seed=1, colocate_matmul=(kind == "sampled")))
            step = fl.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
        init = fl.global_variables_initializer()
    return g, x, labels, loss, step, init


def measure(kind: str, args, cluster: LocalCluster) -> Dict[str, float]:
    rng = np.random.default_rng(0)
    feed_x = rng.normal(size=(args.batch, args.dim)).astype(np.float32)
    feed_y = np.minimum(rng.zipf(1.2, (args.batch, 1)) - 1, args.vocab - 1).astype(np.int64)
    g, x, labels, loss, step, init = build(kind, args)
    feed = {x: feed_x, labels: feed_y}
    with fl.Session(cluster.target(), graph=g) as sess:
        sess.run(init)
        sess.run(step, feed)                          # compile, register, warm up
        first = sess.run(loss, feed)
        before = data_bytes(cluster)
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            sess.run(step, feed)
            times.append(time.perf_counter() - t0)
        moved = data_bytes(cluster) - before
        last = sess.run(loss, feed)
    return {"bytes": moved / args.steps, "step_s": float(np.median(times)),
            "loss_first": float(first), "loss_last": float(last)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=40000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--num-sampled", type=int, default=512)
    parser.add_argument("--ps", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 timed steps")
    args = parser.parse_args()
    if args.quick:
        args.steps = 2
    with tempfile.TemporaryDirectory() as folder:
        cluster = LocalCluster({"ps": args.ps, "worker": 1}, folder)
        try:
            results = {kind: measure(kind, args, cluster) for kind in KINDS}
        finally:
            cluster.stop()
    print(f"vocabulary {args.vocab:,}, dim {args.dim}, batch {args.batch}, "
          f"{args.ps} PS tasks + 1 worker on loopback, {args.steps} timed steps")
    print(f"{'softmax':<28} {'bytes moved / step':>20} {'step time (median)':>20} "
          f"{'loss before -> after':>24}")
    for kind in KINDS:
        r = results[kind]
        print(f"{LABELS[kind]:<28} {r['bytes']:>20,.0f} {r['step_s'] * 1e3:>17.1f} ms "
              f"{r['loss_first']:>11.4f} -> {r['loss_last']:.4f}")
    print(f"vocab / num_sampled = {args.vocab / args.num_sampled:.1f} (the paper reports a 78x "
          "reduction)")
    for full, sampled in (("full_colocated", "sampled"), ("full", "sampled_rows"),
                          ("full", "sampled")):
        a, b = results[full], results[sampled]
        print(f"{LABELS[sampled]} vs {LABELS[full]}: {a['bytes'] / b['bytes']:.1f}x fewer "
              f"bytes, step time {a['step_s'] / b['step_s']:.1f}x shorter")


if __name__ == "__main__":
    main()
