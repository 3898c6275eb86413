"""Steps whose ranks only the values fed decide (squeeze of dims unknown until run time, a
reduction over fed axes, a transpose by a fed permutation) run on the C backend: the session
compiles them per concrete feed shapes (and, where needed, per value of the integer feeds
the op reads) at their first run with each, caches the variants, and says so under
log_device_placement (``dsl/rank_specialized.py``, docs/shapes_at_run_time.md)."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import StaticValueNeeded
from compiler.options import PipelineOptions


def _interpreter(graph, fetches, feed):
    with fl.Session(graph=graph, backend="interpreter") as s:
        return s.run(fetches, feed)


def test_squeeze_of_dims_known_at_run_time_compiles_per_shape(graph, rng):
    x = fl.placeholder(fl.float32, [None, None, None], name="x")
    y = fl.squeeze(x) * 2.0
    with fl.Session(graph=graph) as s:
        for shape, want in (((2, 1, 3), (2, 3)), ((1, 4, 1), (4,)), ((2, 1, 3), (2, 3)),
                            ((1, 1, 1), ())):
            v = rng.standard_normal(shape).astype(np.float32)
            got = s.run(y, {x: v})
            assert np.shape(got) == want
            np.testing.assert_allclose(got, _interpreter(graph, y, {x: v}), rtol=1e-6)
        assert s.compile_count == 3                    # (2,1,3) was compiled once


def test_reduction_and_transpose_by_fed_axes_compile_per_value(graph, rng):
    x = fl.placeholder(fl.float32, [None, None, 3], name="x")
    axis = fl.placeholder(fl.int32, [], name="axis")
    axes = fl.placeholder(fl.int32, [None], name="axes")
    perm = fl.placeholder(fl.int32, [3], name="perm")
    fetches = {"sum": fl.reduce_sum(x, axis=axis),
               "max": fl.reduce_max(x, axis=axes, keepdims=True),
               "t": fl.transpose(x, perm) + 1.0}
    v = rng.standard_normal((2, 4, 3)).astype(np.float32)
    with fl.Session(graph=graph) as s:
        for a, al, p in ((1, [0, 2], [2, 0, 1]), (0, [1], [1, 2, 0]), (-1, [], [0, 1, 2]),
                         (1, [0, 2], [2, 0, 1])):
            feed = {x: v, axis: a, axes: np.array(al, np.int32), perm: p}
            got = s.run(fetches, feed)
            np.testing.assert_allclose(got["sum"], v.sum(axis=a), rtol=1e-5)
            np.testing.assert_allclose(got["max"], v.max(axis=tuple(al), keepdims=True)
                                       if al else v)
            np.testing.assert_array_equal(got["t"], v.transpose(p) + 1.0)
            want = _interpreter(graph, fetches, feed)
            for k in fetches:
                np.testing.assert_allclose(got[k], want[k], rtol=1e-5)
        # 1 attempt without values, then one compile per distinct (axis, axes, perm)
        assert s.compile_count == 3


def test_each_variant_is_said_under_log_device_placement(graph, capsys):
    x = fl.placeholder(fl.float32, [None, None], name="x")
    axis = fl.placeholder(fl.int32, [], name="axis")
    y = fl.reduce_sum(fl.squeeze(x), axis=axis)
    config = fl.ConfigProto(log_device_placement=True)
    with fl.Session(graph=graph, config=config) as s:
        assert s.run(y, {x: np.ones((1, 5), np.float32), axis: 0}) == 5
    err = capsys.readouterr().err
    assert "node 'Squeeze' (Squeeze) needs what only the values fed tell" in err
    assert "needs the value of axis" in err
    assert "compiled a variant of the step for feed shapes axis=[], x=[1, 5]; values axis=0" \
        in err
    with fl.Session(graph=graph) as s:                 # quiet otherwise
        s.run(y, {x: np.ones((1, 5), np.float32), axis: 0})
    assert "variant" not in capsys.readouterr().err


def test_flowc_flags_log_device_placement_shows_the_variants_too(graph, capsys, monkeypatch):
    monkeypatch.setenv("FLOWC_FLAGS", "--log-device-placement")
    x = fl.placeholder(fl.float32, [None, None], name="x")
    with fl.Session(graph=graph) as s:
        assert s.run(fl.squeeze(x), {x: np.ones((3, 1), np.float32)}).shape == (3,)
    assert "compiled a variant of the step for feed shapes x=[3, 1]" in capsys.readouterr().err


def test_unknown_rank_make_callable_and_traced_runs(graph, rng):
    x = fl.placeholder(fl.float32, name="x")           # no rank at all
    y = fl.reduce_mean(fl.squeeze(x), axis=0)
    with fl.Session(graph=graph) as s:
        for shape in ((3, 1), (1, 2, 4), (3, 1)):
            v = rng.standard_normal(shape).astype(np.float32)
            np.testing.assert_allclose(s.run(y, {x: v}), np.squeeze(v).mean(axis=0), rtol=1e-5)
        step = s.make_callable(y, [x])
        v = rng.standard_normal((1, 6)).astype(np.float32)
        assert step(v) == pytest.approx(v.mean(), rel=1e-5)
        md = fl.RunMetadata()
        got = s.run(y, {x: v}, options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
                    run_metadata=md)
        assert got == pytest.approx(v.mean(), rel=1e-5) and md.step_stats.kernels


def test_what_no_value_decides_is_still_an_error(graph):
    x = fl.placeholder(fl.float32, [None, None, 3], name="x")
    axis = fl.placeholder(fl.int32, [], name="axis")
    y = fl.reduce_sum(x, axis=axis)
    with fl.Session(graph=graph) as s:
        with pytest.raises(fl.errors.InvalidArgumentError,
                           match="node 'Sum' .Sum.: invalid reduction axis 3 for input of rank 3"):
            s.run(y, {x: np.ones((2, 2, 3), np.float32), axis: 3})
        assert s.run(y, {x: np.ones((2, 2, 3), np.float32), axis: 2}).shape == (2, 2)
    # flowc compile (no values to specialize for) still says what it needs
    from compiler.step import make_step_graph
    from compiler.master import compile_step
    step = make_step_graph(graph, [x.output, axis.output], [y.output])
    with pytest.raises(StaticValueNeeded, match="unknown rank"):
        compile_step(step, PipelineOptions())
