"""fl.train.batch with queue runners (TF1's queue input pipeline): examples batched in order
by one thread, enqueue_many, dicts, the smaller final batch when the input runs out, and
OutOfRangeError after it."""
import numpy as np
import pytest

import dsl as fl


@pytest.mark.parametrize("backend", ("interpreter", "c"))
def test_batch_from_a_finite_input(graph, backend):
    source = fl.FIFOQueue(20, [fl.float32, fl.int32], shapes=[[2], []])
    xs = np.arange(20, dtype=np.float32).reshape(10, 2)
    ys = np.arange(10, dtype=np.int32)
    fill = source.enqueue_many([xs, ys])
    close = source.close()
    x, y = source.dequeue()
    bx, by = fl.train.batch([x, y], batch_size=4, capacity=8, allow_smaller_final_batch=True)
    assert len(fl.get_collection(fl.GraphKeys.QUEUE_RUNNERS)) == 1
    with fl.Session(backend=backend) as s:
        s.run(fill)
        s.run(close)
        coord = fl.train.Coordinator()
        threads = fl.train.start_queue_runners(s, coord=coord)
        got = [s.run([bx, by]) for _ in range(3)]
        with pytest.raises(fl.errors.OutOfRangeError):
            s.run(by)
        coord.request_stop()
        coord.join(threads)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), ys)
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), xs)
    assert [len(g[1]) for g in got] == [4, 4, 2]


def test_batch_shapes_dicts_and_enqueue_many(graph):
    counter = fl.Variable(0, name="counter")
    step = counter.assign_add(1)
    batch = fl.train.batch({"n": step, "sq": step * step}, batch_size=3)
    assert batch["n"].shape.as_list() == [3]
    rows = fl.train.batch([fl.reshape(fl.range(6), [3, 2])], 2, enqueue_many=True)
    assert rows[0].shape.as_list() == [2, 2]
    with fl.Session(backend="c") as s:
        s.run(fl.global_variables_initializer())
        coord = fl.train.Coordinator()
        threads = fl.train.start_queue_runners(s, coord)
        first = s.run(batch)
        np.testing.assert_array_equal(first["n"], [1, 2, 3])
        np.testing.assert_array_equal(first["sq"], [1, 4, 9])
        np.testing.assert_array_equal(s.run(rows)[0], [[0, 1], [2, 3]])
        coord.request_stop()
        coord.join(threads)


def test_batch_needs_static_shapes(graph):
    x = fl.placeholder(fl.float32, [None])
    with pytest.raises(ValueError, match="fully defined"):
        fl.train.batch([x], 2)
