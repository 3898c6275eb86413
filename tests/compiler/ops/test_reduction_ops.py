"""Reductions (Sum, Mean, Max, Min, Prod, All, Any) and ArgMax / ArgMin: compiled C against the
numpy interpreter, TensorFlow's defined results on edge cases (empty reductions, wrapping,
NaN), shape inference on partially known shapes, and the errors.

Each test builds one graph and compiles it once; cases are batched as fetches of that graph.
"""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from compiler.ir.op_registry import has_op
from oracle import check_against_interpreter, random_array
from runtime.errors import RuntimeExecutionError

NUMERIC = {"sum": fl.reduce_sum, "mean": fl.reduce_mean, "max": fl.reduce_max,
           "min": fl.reduce_min, "prod": fl.reduce_prod}


def _cases(x, fns, axes_list, prefix="", keep=None):
    """Fetches for every reduction × axes on ``x``; keepdims alternates unless given."""
    fetches = {}
    for name, fn in fns.items():
        for i, axes in enumerate(axes_list):
            k = (i % 2 == 1) if keep is None else keep
            fetches[f"{prefix}{name}/{axes}"] = fn(x, axis=axes, keepdims=k)
    return fetches


def test_float_reductions_all_axes_dynamic_batch(graph, rng):
    x32 = fl.placeholder(fl.float32, [None, 3, 5], name="x32")
    x64 = fl.placeholder(fl.float64, [None, 3, 5], name="x64")
    fetches = _cases(x32, NUMERIC, [None, 0, 1, -1, [0, 2], [2, 1], [], [-3]], prefix="f32/")
    fetches.update(_cases(x64, NUMERIC, [0, [1, 2], -1], prefix="f64/"))
    for batch in (0, 1, 4):
        feed = {x32: random_array(rng, (batch, 3, 5), np.float32, -2, 2),
                x64: random_array(rng, (batch, 3, 5), np.float64, -2, 2)}
        got = check_against_interpreter(graph, fetches, feed)
        np.testing.assert_allclose(got["f32/sum/[0, 2]"], feed[x32].sum(axis=(0, 2)),
                                   rtol=1e-5, atol=1e-5)
        assert got["f32/max/0"].shape == (1, 3, 5)               # keepdims
        assert got["f32/mean/None"].shape == ()
        assert got["f32/min/[]"].shape == (batch, 3, 5)
    # Reducing an empty batch gives the identities; the mean of nothing is NaN.
    feed = {x32: np.zeros((0, 3, 5), np.float32), x64: np.zeros((0, 3, 5), np.float64)}
    got = check_against_interpreter(graph, fetches, feed)
    assert np.all(got["f64/max/0"] == -np.inf) and got["f64/max/0"].shape == (3, 5)
    assert np.all(got["f32/min/[0, 2]"] == np.inf)
    assert np.all(got["f32/prod/0"] == 1) and got["f32/sum/None"] == 0
    assert np.all(np.isnan(got["f32/mean/[-3]"]))


def test_general_axis_patterns_static_shape(graph, rng):
    """Alternating reduced / kept groups (the general loop nest) and size-1 dims."""
    x = fl.placeholder(fl.float32, [2, 3, 4, 5], name="x")
    y = fl.placeholder(fl.int32, [3, 1, 4, 1], name="y")
    fetches = _cases(x, NUMERIC, [[0, 2], [1, 3], [0, 1, 3]], prefix="x/")
    fetches.update(_cases(y, NUMERIC, [[0, 2], [1, 3]], prefix="y/"))
    feed = {x: random_array(rng, (2, 3, 4, 5), np.float32, -1.5, 1.5),
            y: random_array(rng, (3, 1, 4, 1), np.int32, -9, 9)}
    got = check_against_interpreter(graph, fetches, feed)
    assert got["x/sum/[1, 3]"].shape == (2, 1, 4, 1)
    assert got["y/max/[0, 2]"].shape == (1, 1)


def test_float_extremes_inf_nan_and_accuracy(graph):
    x = fl.placeholder(fl.float32, [None, 6], name="x")
    fetches = _cases(x, NUMERIC, [1, None], keep=False)
    big = np.float32(3e38)
    rows = np.array([[1, 2, np.nan, 4, 5, 6],
                     [np.inf, 1, 2, 3, 4, 5],
                     [-np.inf, np.inf, 0, 0, 0, 0],
                     [big, big, -big, 0, 1, 2],
                     [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf],
                     [np.nan, np.inf, -np.inf, 0, 1, np.nan]], np.float32)
    got = check_against_interpreter(graph, fetches, {x: rows})
    assert np.isnan(got["max/1"][0]) and np.isnan(got["min/1"][5]) and np.isnan(got["max/None"])
    assert got["max/1"][1] == np.inf and got["min/1"][2] == -np.inf and got["max/1"][4] == -np.inf
    assert np.isnan(got["sum/1"][2])                            # inf + -inf
    assert got["sum/1"][3] == np.float32(3e38 + 3.0)            # accumulated in double
    # A long float32 sum stays accurate (f64 accumulation), near numpy's float64 result.
    long = fl.placeholder(fl.float32, [None], name="long")
    s = fl.reduce_sum(long)
    values = np.random.default_rng(7).uniform(0, 1, 1_000_003).astype(np.float32)
    got = check_against_interpreter(graph, {"s": s}, {long: values})
    assert abs(float(got["s"]) - values.astype(np.float64).sum()) < 1.0


def test_int_reductions_wrap_truncate_and_identities(graph, rng):
    fetches, xs = {}, {}
    for dt in (np.int32, np.int64, np.int8, np.uint8):
        name = np.dtype(dt).name
        xs[dt] = fl.placeholder(dt, [None, None], name=f"x_{name}")
        axes = [1, 0, None] if dt in (np.int32, np.int64) else [1]
        fetches.update(_cases(xs[dt], NUMERIC, axes, prefix=name + "/", keep=False))
    for shape in ((3, 7), (0, 4), (4, 0), (1, 1)):
        feed = {}
        for dt, x in xs.items():
            info = np.iinfo(dt)
            v = random_array(rng, shape, dt, -50 if info.min < 0 else 0, 50)
            if v.size:
                v.flat[0] = info.max
                v.flat[-1] = info.max if v.size > 1 else v.flat[-1]
            feed[x] = v
        got = check_against_interpreter(graph, fetches, feed)
    # TensorFlow's defined results: wrapping sums, truncating integer means, identities.
    feed = {xs[dt]: np.zeros((2, 0), dt) for dt in xs}
    feed[xs[np.int32]] = np.array([[2**31 - 1, 1], [-3, -4]], np.int32)
    got = check_against_interpreter(graph, fetches, feed)
    np.testing.assert_array_equal(got["int32/sum/1"], [-2**31, -7])
    np.testing.assert_array_equal(got["int32/mean/1"], [2**30, -3])     # mean sums in 64 bits
    np.testing.assert_array_equal(got["int32/prod/1"], [2**31 - 1, 12])
    np.testing.assert_array_equal(got["int32/sum/None"], 2**31 - 7)
    np.testing.assert_array_equal(got["int64/max/1"], [np.iinfo(np.int64).min] * 2)
    np.testing.assert_array_equal(got["int8/min/1"], [127, 127])
    np.testing.assert_array_equal(got["uint8/mean/1"], [0, 0])
    np.testing.assert_array_equal(got["int64/prod/1"], [1, 1])


def test_all_any(graph, rng):
    x = fl.placeholder(fl.bool_, [None, 4], name="x")
    fetches = _cases(x, {"all": fl.reduce_all, "any": fl.reduce_any}, [0, 1, None], keep=False)
    for shape in ((5, 4), (0, 4), (1, 4)):
        got = check_against_interpreter(graph, fetches, {x: random_array(rng, shape, np.bool_)})
    assert got["all/0"].dtype == np.bool_
    got = check_against_interpreter(graph, fetches, {x: np.zeros((0, 4), bool)})
    assert got["all/0"].tolist() == [True] * 4 and not got["any/None"]
    got = check_against_interpreter(graph, fetches, {x: np.array([[1, 0, 1, 1], [1, 1, 1, 1]], bool)})
    assert got["all/1"].tolist() == [False, True] and got["any/0"].tolist() == [True] * 4


def test_argmax_argmin(graph, rng):
    fetches, xs = {}, {}
    for dt in (np.float32, np.float64, np.int32, np.int64, np.bool_):
        name = np.dtype(dt).name
        xs[dt] = fl.placeholder(dt, [None, 3, 4], name=f"x_{name}")
        for axis, out in ((0, fl.int64), (1, fl.int32), (-1, fl.int64)):
            fetches[f"{name}/max/{axis}"] = fl.argmax(xs[dt], axis, output_type=out)
            fetches[f"{name}/min/{axis}"] = fl.argmin(xs[dt], axis=axis, output_type=out)
    for batch in (1, 5):
        feed = {x: random_array(rng, (batch, 3, 4), dt, -3, 3) for dt, x in xs.items()}
        got = check_against_interpreter(graph, fetches, feed)
    assert got["int32/max/0"].dtype == np.int64 and got["int32/max/1"].dtype == np.int32
    # Ties keep the first index; the first NaN wins (as numpy); inf is ordered.
    f = np.array([[[1, 5, 5, 0], [np.nan, 2, np.nan, 9], [-np.inf, np.inf, np.inf, 3]]], np.float32)
    feed[xs[np.float32]] = f
    feed[xs[np.float64]] = f.astype(np.float64).transpose(0, 2, 1).copy().reshape(1, 3, 4)
    got = check_against_interpreter(graph, fetches, feed)
    assert got["float32/max/-1"].tolist() == [[1, 0, 1]]
    assert got["float32/min/-1"].tolist() == [[3, 0, 0]]
    assert got["float32/max/1"].tolist() == [[1, 2, 1, 1]]


def test_argmax_empty_axis_is_a_run_time_error(graph):
    x = fl.placeholder(fl.float32, [None, None], name="x")
    am = fl.argmax(x, 1, name="am")
    got = check_against_interpreter(graph, {"am": am}, {x: np.zeros((0, 3), np.float32)})
    assert got["am"].shape == (0,)
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError), match="am"):
                s.run(am, {x: np.zeros((2, 0), np.float32)})


def test_shape_inference_partial_shapes(graph):
    x = fl.placeholder(fl.float32, [None, 3, None], name="x")
    unknown_rank = fl.placeholder(fl.float32, None, name="u")
    axes = fl.placeholder(fl.int32, [None], name="axes")
    assert fl.reduce_sum(x, [1]).shape == (None, None)
    assert fl.reduce_sum(x, 1, keepdims=True).shape == (None, 1, None)
    assert fl.reduce_max(x, [-1, 0]).shape == (3,)
    assert fl.reduce_mean(x).shape == ()
    assert fl.reduce_sum(x, axes).shape.ndims is None
    assert fl.reduce_sum(x, axes, keep_dims=True).shape == (None, None, None)
    assert fl.reduce_sum(unknown_rank, [0]).shape.ndims is None
    assert fl.argmax(x, 1).shape == (None, None)
    assert fl.argmax(x, fl.placeholder(fl.int32, [], name="d")).shape == (None, None)
    assert fl.argmin(unknown_rank, 0).shape.ndims is None
    assert fl.reduce_sum(x, reduction_indices=[2], keep_dims=True).shape == (None, 3, 1)
    with pytest.raises(ValueError):
        fl.reduce_sum(x, 1, keepdims=True, keep_dims=True)


def test_bad_axes_are_shape_errors(graph):
    x = fl.placeholder(fl.float32, [2, 3], name="x")
    with pytest.raises(ShapeError, match="bad_range"):
        fl.reduce_sum(x, 2, name="bad_range")
    with pytest.raises(ShapeError, match="-3"):
        fl.reduce_max(x, [-3])
    with pytest.raises(ShapeError, match="duplicate"):
        fl.reduce_mean(x, [1, -1])
    with pytest.raises(ShapeError, match="scalar or a vector"):
        fl.reduce_sum(x, [[0]])
    with pytest.raises(ShapeError):
        fl.argmax(x, 2)
    with pytest.raises(ShapeError, match="scalar"):
        fl.argmax(x, [0])


def test_run_time_axes(graph, rng):
    """Axes fed at run time: the interpreter reduces (and checks them); C compiles the step
    for each value of the axes fed (``dsl/rank_specialized.py``)."""
    x = fl.placeholder(fl.float32, [2, 3], name="x")
    axes = fl.placeholder(fl.int32, [None], name="axes")
    s = fl.reduce_sum(x, axes, name="dyn_sum")
    v = random_array(rng, (2, 3), np.float32)
    with fl.Session(graph=graph, backend="interpreter") as sess:
        np.testing.assert_allclose(sess.run(s, {x: v, axes: [1]}), v.sum(1), rtol=1e-6)
        with pytest.raises(ExecutionError, match="dyn_sum"):
            sess.run(s, {x: v, axes: [2]})
    with fl.Session(graph=graph, backend="c") as sess:
        np.testing.assert_allclose(sess.run(s, {x: v, axes: [1]}), v.sum(1), rtol=1e-6)
        np.testing.assert_allclose(sess.run(s, {x: v, axes: [0, 1]}), v.sum(), rtol=1e-5)
        with pytest.raises(fl.errors.InvalidArgumentError, match="dyn_sum"):
            sess.run(s, {x: v, axes: [2]})
    # All axes of a tensor of unknown rank: Range(0, Rank(x)) at run time.
    u = fl.placeholder(fl.float32, None, name="u")
    if not has_op("Range"):
        with pytest.raises(ValueError, match="rank is unknown"):
            fl.reduce_sum(u)
        return
    total, top = fl.reduce_sum(u), fl.reduce_max(u, keepdims=True)
    with fl.Session(graph=graph, backend="interpreter") as sess:
        got = sess.run([total, top], {u: v})
    np.testing.assert_allclose(got[0], v.astype(np.float64).sum(), rtol=1e-6)
    assert got[1].shape == (1, 1) and got[1][0, 0] == v.max()
