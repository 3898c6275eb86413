"""``tf.PaddingFIFOQueue`` (``PaddingFIFOQueueV2``) and ``tf.train.batch(dynamic_pad=True)``:
elements of different sizes in the dims the queue's shapes leave unknown, batched by
``dequeue_many``/``dequeue_up_to`` padded with zeros to each batch's largest, the same on both
backends; elements that do not fit the queue's known dims or rank are refused by name."""
import numpy as np
import pytest

import dsl as tf

BACKENDS = ("interpreter", "c")


def _padded(rows, width, dtype):
    out = np.zeros((len(rows), width), dtype)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_dequeue_many_pads_each_batch_to_its_longest(graph, backend):
    q = tf.PaddingFIFOQueue(10, [tf.int32, tf.float32, tf.int64],
                            shapes=[[None], [None, 2], []])
    seq = tf.placeholder(tf.int32, [None])
    grid = tf.placeholder(tf.float32, [None, 2])
    label = tf.placeholder(tf.int64, [])
    enqueue = q.enqueue([seq, grid, label])
    a, b, c = q.dequeue_many(2)
    assert a.shape.as_list() == [2, None] and b.shape.as_list() == [2, None, 2]
    rows = [[1, 2, 3], [4], [], [5, 6]]
    with tf.Session(backend=backend) as s:
        for k, r in enumerate(rows):
            s.run(enqueue, {seq: r, grid: np.full((len(r) + 1, 2), k + 0.5, np.float32),
                            label: k})
        first = s.run([a, b, c])
        second = s.run([a, b, c])
    np.testing.assert_array_equal(first[0], _padded(rows[:2], 3, np.int32))
    np.testing.assert_array_equal(second[0], _padded(rows[2:], 2, np.int32))
    assert first[0].dtype == np.int32 and second[0].shape == (2, 2)
    want_b = np.zeros((2, 4, 2), np.float32)
    want_b[0, :4] = 0.5
    want_b[1, :2] = 1.5
    np.testing.assert_array_equal(first[1], want_b)
    np.testing.assert_array_equal(first[2], [0, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_dequeue_up_to_pads_the_final_smaller_batch(graph, backend):
    q = tf.PaddingFIFOQueue(10, tf.float32, shapes=[[None, None]])
    x = tf.placeholder(tf.float32, [None, None])
    enqueue = q.enqueue(x)
    close = q.close()
    out = q.dequeue_up_to(2)
    with tf.Session(backend=backend) as s:
        for shape in [(1, 3), (2, 1), (3, 2)]:
            s.run(enqueue, {x: np.ones(shape, np.float32)})
        s.run(close)
        first, last = s.run(out), s.run(out)
        with pytest.raises(tf.errors.OutOfRangeError):
            s.run(out)
    assert first.shape == (2, 2, 3) and last.shape == (1, 3, 2)
    assert first.sum() == 5 and first[0, 0].tolist() == [1, 1, 1] and first[0, 1].sum() == 0
    assert last.sum() == 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_elements_that_do_not_fit_the_known_dims_are_refused(graph, backend):
    q = tf.PaddingFIFOQueue(10, tf.float32, shapes=[[None, 2]])
    x = tf.placeholder(tf.float32, [None, None])
    enqueue = q.enqueue(x)
    with tf.Session(backend=backend) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="component 0"):
            s.run(enqueue, {x: np.ones((3, 3), np.float32)})
        assert s.run(q.size()) == 0


def test_a_padding_queue_needs_shapes_of_known_rank(graph):
    with pytest.raises(ValueError, match="needs shapes"):
        tf.PaddingFIFOQueue(10, tf.float32, shapes=None)
    with pytest.raises(ValueError, match="shape of known rank for each of its 2"):
        tf.PaddingFIFOQueue(10, [tf.float32, tf.int32], shapes=[[None]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_with_dynamic_pad(graph, backend):
    """A TF1 input pipeline of variable-length sequences: each batch padded to its longest."""
    lengths = [3, 1, 4, 2, 5, 1]
    source = tf.FIFOQueue(10, [tf.int32], shapes=[[]])
    fill = source.enqueue_many([np.array(lengths, np.int32)])
    close = source.close()
    n = source.dequeue()
    seq = tf.range(1, n + 1)                       # [1..n]: a sequence of length n
    padded, length = tf.train.batch([seq, n], batch_size=2, dynamic_pad=True,
                                    allow_smaller_final_batch=True)
    assert padded.shape.as_list() == [None, None]
    with tf.Session(backend=backend) as s:
        s.run(fill)
        s.run(close)
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(s, coord=coord)
        got = [s.run([padded, length]) for _ in range(3)]
        with pytest.raises(tf.errors.OutOfRangeError):
            s.run(padded)
        coord.request_stop()
        coord.join(threads)
    for k, (p, l) in enumerate(got):
        want = lengths[2 * k:2 * k + 2]
        assert l.tolist() == want
        np.testing.assert_array_equal(p, _padded([range(1, m + 1) for m in want], max(want),
                                                 np.int32))


def test_batch_without_dynamic_pad_still_needs_full_shapes(graph):
    n = tf.placeholder(tf.int32, [])
    with pytest.raises(ValueError, match="All shapes must be fully defined"):
        tf.train.batch([tf.range(n)], batch_size=2)
