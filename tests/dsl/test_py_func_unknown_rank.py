"""``tf.py_func`` results of unknown rank (no ``set_shape``) in compiled steps: the session
cuts the step at the ``PyFunc`` (``dsl/py_func_steps.py``), so the C backend gives the
interpreter's results, whatever rank the function returns, runs every stateful op once per
step, and names the node when the function fails."""
import numpy as np
import pytest

import dsl as tf
from compiler.errors import StaticValueNeeded

BACKENDS = ("interpreter", "c")


def _runs(graph, fetches, feeds_list, init=None):
    out = {}
    for backend in BACKENDS:
        with tf.Session(graph=graph, backend=backend) as s:
            if init is not None:
                s.run(init)
            out[backend] = [s.run(fetches, feeds) for feeds in feeds_list]
    return out


def _assert_same(out):
    for want, got in zip(out["interpreter"], out["c"]):
        for w, g in zip(want, got):
            assert np.shape(w) == np.shape(g)
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_results_without_set_shape_feed_compiled_ops(graph):
    x = tf.placeholder(tf.float32, [3], name="x")
    y = tf.py_func(lambda a: np.stack([a, a * 2]), [x * 3.0], tf.float32, name="stack")
    assert y.shape.ndims is None
    z = tf.reduce_sum(y, axis=0) + x
    out = _runs(graph, [z, y, x * 2.0], [{x: np.arange(3, dtype=np.float32)},
                                         {x: np.ones(3, np.float32)}])
    _assert_same(out)
    np.testing.assert_allclose(out["c"][0][0], [0, 10, 20])


def test_each_stateful_op_runs_once_per_step(graph):
    counter = tf.Variable(0, name="counter")
    step = counter.assign_add(1)                    # before the py_func, and used after it
    seen = []
    y = tf.py_func(lambda n: (seen.append(int(n)), np.arange(n, dtype=np.int32))[1], [step],
                   tf.int32, name="upto")
    total = tf.reduce_sum(y) + step
    with tf.Session(backend="c") as s:
        s.run(counter.initializer)
        got = [s.run(total) for _ in range(3)]
        assert s.run(counter) == 3
    assert seen == [1, 2, 3]
    assert got == [0 + 1, 1 + 2, 3 + 3]


def test_the_rank_may_change_from_run_to_run(graph):
    x = tf.placeholder(tf.float32, [None], name="x")
    y = tf.py_func(lambda a: a.reshape(2, -1) if a.size % 2 == 0 else a, [x], tf.float32)
    s2 = tf.reduce_sum(y * 2.0)
    out = _runs(graph, [y, s2], [{x: np.arange(4, dtype=np.float32)},
                                 {x: np.arange(3, dtype=np.float32)},
                                 {x: np.arange(6, dtype=np.float32)}])
    _assert_same(out)
    assert [r[0].shape for r in out["c"]] == [(2, 2), (3,), (2, 3)]


def test_chained_py_funcs_and_no_feeds(graph):
    a = tf.py_func(lambda: np.ones((2, 3), np.float32), [], tf.float32, name="make")
    b = tf.py_func(lambda v: v.T * 2, [a + 1.0], tf.float32, name="twice")
    c = tf.reduce_max(b) + tf.reduce_sum(a)
    out = _runs(graph, [b, c], [{}])
    _assert_same(out)
    assert out["c"][0][0].shape == (3, 2) and out["c"][0][1] == 4 + 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_function_names_its_node(graph, backend):
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.py_func(lambda a: (_ for _ in ()).throw(ValueError("bad input")), [x], tf.float32,
                   name="broken")
    with tf.Session(backend=backend) as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match="bad input") as e:
            s.run(y + 1.0, {x: [1, 2]})
    assert "broken" in str(e.value)


def test_a_step_that_cannot_be_cut_keeps_the_compilers_error(graph):
    x = tf.placeholder(tf.float32, [2], name="x")
    counter = tf.Variable(0, name="counter")
    bump = counter.assign_add(1)
    y = tf.py_func(lambda a, n: a * n, [x, bump], tf.float32, name="scaled")
    with tf.control_dependencies([bump]):          # a control edge alone into the rest
        other = tf.identity(x) * 3.0
    with tf.Session(backend="c") as s:
        s.run(counter.initializer)
        with pytest.raises(StaticValueNeeded, match=r"node .scaled. \(PyFunc\): an output has "
                                                    r"unknown rank.*set_shape"):
            s.run([y + 1.0, other], {x: [1, 2]})
