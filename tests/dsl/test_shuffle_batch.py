"""RandomShuffleQueue and fl.train.shuffle_batch (TF1's shuffling queue input pipeline), in both
backends: seeded random order (the same in the compiled C queue and the interpreter's),
min_after_dequeue holding dequeues back until the queue closes, and queue runners started by
MonitoredTrainingSession and carried through a meta graph. Every blocking call has a
deadline, so a bug fails the test instead of hanging it."""
import numpy as np
import pytest

import dsl as fl
from runtime.errors import DeadlineExceededError, OutOfRangeError

BACKENDS = ("interpreter", "c")
SHORT = fl.RunOptions(timeout_in_ms=100)
BOUND = fl.RunOptions(timeout_in_ms=20000)


def _shuffle_run(backend, seed=7):
    with fl.Graph().as_default():
        q = fl.RandomShuffleQueue(20, 4, [fl.int32, fl.float32], shapes=[[], [2]], seed=seed,
                                  name="q")
        ids = np.arange(12, dtype=np.int32)
        fill = q.enqueue_many([ids, np.stack([ids, -ids], 1).astype(np.float32)])
        one, many, upto = q.dequeue(), q.dequeue_many(3), q.dequeue_up_to(5)
        close, size = q.close(), q.size()
        out = []
        with fl.Session(backend=backend) as s:
            s.run(fill, options=BOUND)
            i, v = s.run(one, options=BOUND)
            assert v.tolist() == [i, -i]
            out.append(int(i))
            for _ in range(2):
                i3, v3 = s.run(many, options=BOUND)
                np.testing.assert_array_equal(v3[:, 0], i3)
                out += i3.tolist()
            assert s.run(size) == 5
            # 5 left: a dequeue of 3 would leave fewer than min_after_dequeue (4), so it waits
            with pytest.raises(DeadlineExceededError):
                s.run(many, options=SHORT)
            s.run(close)
            i5, _ = s.run(upto, options=BOUND)                 # closed: the rest, in any number
            out += i5.tolist()
            with pytest.raises(OutOfRangeError):
                s.run(one, options=BOUND)
        return out


def test_random_shuffle_queue_order_is_seeded_and_the_same_in_both_backends():
    runs = {b: _shuffle_run(b) for b in BACKENDS}
    ref = runs["interpreter"]
    assert sorted(ref) == list(range(12))                       # every element, once
    assert ref != list(range(12))                               # ... in a shuffled order
    assert runs["c"] == ref
    assert _shuffle_run("interpreter") == ref                   # seeded: every run alike
    assert _shuffle_run("interpreter", seed=8) != ref


def test_random_shuffle_queue_checks_min_after_dequeue(graph):
    with pytest.raises(Exception, match="min_after_dequeue 5 must be < capacity 5"):
        fl.RandomShuffleQueue(5, 5, [fl.int32])


@pytest.mark.parametrize("backend", BACKENDS)
def test_shuffle_batch_from_a_finite_input(graph, backend):
    source = fl.FIFOQueue(40, [fl.int32], shapes=[[]])
    fill, close = source.enqueue_many([np.arange(30, dtype=np.int32)]), source.close()
    x = source.dequeue()
    batch = fl.train.shuffle_batch([x, x * 10], batch_size=4, capacity=16,
                                   min_after_dequeue=8, seed=3, allow_smaller_final_batch=True)
    assert batch[0].shape.as_list() == [None] and len(fl.get_collection("queue_runners")) == 1
    with fl.Session(backend=backend) as s:
        s.run(fill)
        s.run(close)
        coord = fl.train.Coordinator()
        threads = fl.train.start_queue_runners(s, coord=coord)
        got = []
        while True:
            try:
                a, b = s.run(batch, options=BOUND)
            except fl.errors.OutOfRangeError:
                break
            np.testing.assert_array_equal(b, a * 10)
            got += a.tolist()
        coord.request_stop()
        coord.join(threads)
    assert sorted(got) == list(range(30)) and got != list(range(30))


def test_shuffle_batch_refuses_min_after_dequeue_at_capacity(graph):
    with pytest.raises(ValueError, match="must be < capacity"):
        fl.train.shuffle_batch([fl.constant(1)], 2, capacity=4, min_after_dequeue=4)


def _finite_pipeline():
    source = fl.FIFOQueue(40, [fl.int32], shapes=[[]], name="source")
    fill = source.enqueue_many([np.arange(20, dtype=np.int32)])
    close = source.close()
    batch = fl.train.shuffle_batch([source.dequeue()], batch_size=5, capacity=12,
                                   min_after_dequeue=3, seed=1, allow_smaller_final_batch=True)
    return fill, close, batch


def test_monitored_training_session_starts_the_queue_runners(graph):
    fill, close, batch = _finite_pipeline()
    seen = []
    with fl.train.MonitoredTrainingSession() as sess:
        # the runner threads are already running: the first batch comes once input does
        sess.run(fill)
        sess.run(close)
        while not sess.should_stop():
            seen += sess.run(batch[0], options=BOUND).tolist()
    assert sorted(seen) == list(range(20))


def test_queue_runners_survive_a_meta_graph(tmp_path):
    with fl.Graph().as_default():
        _, _, batch = _finite_pipeline()
        fl.add_to_collection("batch", batch[0])
        fl.train.export_meta_graph(str(tmp_path / "p.meta"))
    with fl.Graph().as_default() as g:
        fl.train.import_meta_graph(str(tmp_path / "p.meta"))
        (runner,) = fl.get_collection(fl.GraphKeys.QUEUE_RUNNERS)
        assert runner.queue.queue_ref.op.type == "RandomShuffleQueueV2"
        fill = g.get_operation_by_name("source_EnqueueMany")
        close = g.get_operation_by_name("source_Close")
        out = fl.get_collection("batch")[0]
        with fl.Session(backend="c") as s:
            s.run(fill)
            s.run(close)
            coord = fl.train.Coordinator()
            threads = fl.train.start_queue_runners(s, coord=coord)
            got = []
            while True:
                try:
                    got += s.run(out, options=BOUND).tolist()
                except fl.errors.OutOfRangeError:
                    break
            coord.request_stop()
            coord.join(threads)
    assert sorted(got) == list(range(20))
