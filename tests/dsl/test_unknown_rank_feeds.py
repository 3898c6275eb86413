"""A placeholder without a shape (``fl.placeholder(fl.float32)``) takes a value of any shape on
the C backend, as in TensorFlow: the step is compiled once per combination of ranks fed
(``dsl/rank_specialized.py``), and every rank gives the interpreter's results, through
``run``, ``make_callable`` and a traced run. Values of one rank share one compiled step; an op
that cannot take the rank fed says which node and source line."""
import numpy as np
import pytest

import dsl as fl
from runtime.errors import FeedError


def _both(graph, fetches, feed):
    with fl.Session(graph=graph, backend="interpreter") as s:
        want = s.run(fetches, feed)
    with fl.Session(graph=graph) as s:
        got = s.run(fetches, feed)
    return got, want


def test_any_rank_runs_and_matches_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, name="x")
    y = fl.placeholder(fl.float32, [None], name="y")           # a known rank beside it
    total = fl.reduce_sum(fl.nn.relu(x * 2.0 - 1.0))
    scaled = x * fl.reduce_mean(y)
    for shape in [(), (5,), (3, 4), (2, 3, 4), (0, 3)]:
        feed = {x: rng.standard_normal(shape).astype(np.float32),
                y: rng.standard_normal(7).astype(np.float32)}
        got, want = _both(graph, [total, scaled, x], feed)
        for g, w in zip(got, want):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_one_rank_compiles_once_and_new_ranks_compile_their_own(graph, rng):
    x = fl.placeholder(fl.float32, name="x")
    y = fl.reduce_sum(x)
    with fl.Session(graph=graph) as s:
        for shape in [(3, 4), (5, 6), (2, 2), (7,), (1, 9)]:
            s.run(y, {x: np.ones(shape, np.float32)})
        assert len(s._steps) == 2                      # rank 2 and rank 1


def test_make_callable_and_a_traced_run_take_any_rank(graph, rng):
    x = fl.placeholder(fl.float32, name="x")
    y = fl.reduce_max(x) + 1.0
    with fl.Session(graph=graph) as s:
        step = s.make_callable(y, [x])
        for shape in [(4,), (2, 5)]:
            v = rng.standard_normal(shape).astype(np.float32)
            assert step(v) == pytest.approx(v.max() + 1.0)
        md = fl.RunMetadata()
        v = rng.standard_normal((2, 2, 2)).astype(np.float32)
        got = s.run(y, {x: v}, options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
                    run_metadata=md)
        assert got == pytest.approx(v.max() + 1.0)
        assert md.step_stats.kernels


def test_a_rank_an_op_cannot_take_names_the_op(graph):
    x = fl.placeholder(fl.float32, name="x")
    w = fl.constant(np.ones((3, 2), np.float32))
    y = fl.matmul(x, w, name="product")
    with fl.Session(graph=graph) as s:
        np.testing.assert_allclose(s.run(y, {x: np.ones((4, 3), np.float32)}), np.full((4, 2), 3.0))
        with pytest.raises(Exception, match="product"):
            s.run(y, {x: np.ones(3, np.float32)})


def test_a_wrong_dtype_is_still_a_feed_error(graph):
    x = fl.placeholder(fl.int32, name="x")
    y = x + 1
    with fl.Session(graph=graph) as s:
        with pytest.raises(FeedError, match="x"):
            s.run(y, {x: np.array(["a"])})
