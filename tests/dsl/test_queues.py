"""FIFO queues in both backends: order, batching, backpressure between concurrent steps, close
semantics, deadlines, and a QueueRunner/Coordinator input pipeline. Every blocking call has a
deadline or a bounded join, so a bug fails the test instead of hanging it."""
import threading
import time

import numpy as np
import pytest

import dsl as fl
from compiler.errors import CodegenError
from runtime.errors import CancelledError, DeadlineExceededError, OutOfRangeError
from repo_paths import ROOT

BACKENDS = ("interpreter", "c")
SHORT = fl.RunOptions(timeout_in_ms=100)
BOUND = fl.RunOptions(timeout_in_ms=20000)


def _queue():
    q = fl.FIFOQueue(4, [fl.float32, fl.int32], shapes=[[2], []], name="q")
    x = fl.placeholder(fl.float32, [None, 2], name="x")
    y = fl.placeholder(fl.int32, [None], name="y")
    return q, x, y


@pytest.mark.parametrize("backend", BACKENDS)
def test_fifo_order_batching_and_size(graph, backend):
    q, x, y = _queue()
    enq_many = q.enqueue_many([x, y])
    enq_one = q.enqueue([fl.constant([9.0, 9.5]), 9])
    deq, many, size = q.dequeue(), q.dequeue_many(2), q.size()
    with fl.Session(backend=backend) as s:
        s.run(enq_many, {x: np.arange(6, dtype=np.float32).reshape(3, 2), y: [0, 1, 2]},
              options=BOUND)
        s.run(enq_one, options=BOUND)
        assert s.run(size) == 4
        v, i = s.run(deq, options=BOUND)
        np.testing.assert_array_equal(v, [0, 1]) and i == 0
        vs, is_ = s.run(many, options=BOUND)
        np.testing.assert_array_equal(vs, [[2, 3], [4, 5]])
        np.testing.assert_array_equal(is_, [1, 2])
        assert s.run(size) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_close_drains_then_reports_out_of_range(graph, backend):
    q, x, y = _queue()
    enq = q.enqueue_many([x, y])
    deq, upto, close = q.dequeue(), q.dequeue_up_to(3), q.close()
    with fl.Session(backend=backend) as s:
        s.run(enq, {x: np.ones([2, 2], np.float32), y: [5, 6]}, options=BOUND)
        s.run(close)
        with pytest.raises(CancelledError, match="'q' is closed"):
            s.run(enq, {x: np.ones([1, 2], np.float32), y: [7]}, options=BOUND)
        _, ids = s.run(upto, options=BOUND)                  # fewer than asked: closed
        np.testing.assert_array_equal(ids, [5, 6])
        with pytest.raises(OutOfRangeError, match=r"closed and has insufficient elements "
                                                  r"\(requested 1, current size 0\)"):
            s.run(deq, options=BOUND)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deadlines_end_blocked_enqueue_and_dequeue(graph, backend):
    q, x, y = _queue()
    enq = q.enqueue_many([x, y])
    deq = q.dequeue()
    with fl.Session(backend=backend) as s:
        with pytest.raises(DeadlineExceededError, match="waiting for 1 element"):
            s.run(deq, options=SHORT)
        s.run(enq, {x: np.zeros([4, 2], np.float32), y: [0, 1, 2, 3]}, options=BOUND)
        with pytest.raises(DeadlineExceededError, match="'q' is full"):
            s.run(enq, {x: np.zeros([1, 2], np.float32), y: [4]}, options=SHORT)
        assert s.run(deq, options=BOUND)[1] == 0               # still usable


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_full_queue_holds_producers_back_until_consumers_take(graph, backend):
    q = fl.FIFOQueue(2, [fl.int32], shapes=[[]], name="q")
    v = fl.placeholder(fl.int32, [], name="v")
    enq, deq, size = q.enqueue([v]), q.dequeue(), q.size()
    n = 40
    seen, sizes = [], []
    with fl.Session(backend=backend) as s:
        def produce():
            for i in range(n):
                s.run(enq, {v: i}, options=BOUND)

        t = threading.Thread(target=produce)
        t.start()
        for _ in range(n):
            sizes.append(int(s.run(size)))
            seen.append(int(s.run(deq, options=BOUND)))
        t.join(20)
        assert not t.is_alive()
    assert seen == list(range(n))                  # FIFO across threads
    assert max(sizes) <= 2                         # never more than the capacity


def test_dequeue_many_needs_static_shapes_in_c(graph):
    q = fl.FIFOQueue(4, [fl.float32], name="q")
    with fl.Session() as s:
        with pytest.raises(CodegenError, match="q_DequeueMany.*unknown rank"):
            s.run(q.dequeue_many(2))


def test_closing_the_session_wakes_a_blocked_step(graph):
    q = fl.FIFOQueue(1, [fl.int32], shapes=[[]], name="q")
    deq = q.dequeue()
    s = fl.Session()
    s.run(q.size())                                # create the queue
    errors = []

    def consume():
        try:
            s.run(deq)
        except Exception as e:                     # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.2)
    s.close()
    t.join(20)
    assert not t.is_alive() and isinstance(errors[0], OutOfRangeError)


@pytest.mark.parametrize("backend", BACKENDS)
def test_queue_runner_fills_while_training_drains(graph, backend):
    """Two producer threads push batches, the main thread consumes, then a clean shutdown."""
    rng = np.random.default_rng(0)
    data = rng.normal(size=(64, 3)).astype(np.float32)
    q = fl.FIFOQueue(8, [fl.float32], shapes=[[3]], name="examples")
    start = fl.Variable(0, name="cursor", dtype=fl.int32)
    idx = fl.raw_ops.RandomUniformInt(shape=[4], minval=0, maxval=64, seed=1, seed2=2)
    batch = fl.gather(fl.constant(data), idx) * 2.0        # "preprocessing"
    enq = q.enqueue_many([batch])
    runner = fl.train.QueueRunner(q, [enq, enq])
    consumed = q.dequeue_many(4)
    coord = fl.train.Coordinator()
    with fl.Session(backend=backend) as s:
        s.run(start.initializer)
        threads = runner.create_threads(s, coord=coord, start=True)
        got = [s.run(consumed, options=BOUND) for _ in range(10)]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=20)
    assert all(g.shape == (4, 3) for g in got)
    rows = {tuple(r) for r in (data * 2.0).round(5)}
    assert all(tuple(r) in rows for g in got for r in g.round(5))


def test_the_prefetch_pipeline_example_trains_and_shuts_down():
    import os
    import subprocess
    import sys
    root = ROOT
    out = subprocess.run([sys.executable, os.path.join(root, "examples", "prefetch_pipeline.py"),
                          "--steps", "150"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("w = [") and "steps/s" in last
    w = [float(v) for v in last.split("[")[1].split("]")[0].split()]
    assert abs(w[0] - 3) < 0.05 and abs(w[1] + 2) < 0.05
