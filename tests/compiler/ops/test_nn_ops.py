"""MatMul, BatchMatMulV2, BiasAdd, Softmax and LogSoftmax: compiled C (OpenBLAS for floats)
against the numpy interpreter, including transposes, broadcast batch dims, empty and dynamic
dims, integer wrapping, inf/nan, and the static and run-time shape errors.

Each test builds one graph and compiles it once; cases are batched as fetches of that graph.
"""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from compiler.ir.op_registry import has_op
from oracle import check_against_interpreter, random_array
from runtime.errors import RuntimeExecutionError

TRANSPOSES = [(False, False), (True, False), (False, True), (True, True)]


def _operand(shape_mk, transpose):
    """The stored shape of an operand that is used as (rows, cols) after ``transpose``."""
    r, c = shape_mk
    return (c, r) if transpose else (r, c)


def run_both_fail(graph, fetch, feed, match):
    """Both backends raise an error naming ``match`` (the node)."""
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError), match=match):
                s.run(fetch, feed)


def test_matmul_transposes_dynamic_and_empty_dims(graph, rng):
    dtypes = [np.float32, np.float64, np.int32, np.int64]
    fetches, places = {}, {}
    for dt in dtypes:
        for ta, tb in TRANSPOSES:
            key = f"{np.dtype(dt).name}/{ta:d}{tb:d}"
            a = fl.placeholder(dt, [None, None], name=f"a{key.replace('/', '_')}")
            b = fl.placeholder(dt, [None, None], name=f"b{key.replace('/', '_')}")
            places[key] = (a, b, ta, tb, dt)
            fetches[key] = fl.matmul(a, b, transpose_a=ta, transpose_b=tb)
    for m, k, n in ((3, 4, 5), (1, 7, 1), (0, 3, 2), (2, 0, 3), (2, 3, 0), (0, 0, 0)):
        feed = {}
        for a, b, ta, tb, dt in places.values():
            feed[a] = random_array(rng, _operand((m, k), ta), dt, -3, 3)
            feed[b] = random_array(rng, _operand((k, n), tb), dt, -3, 3)
        got = check_against_interpreter(graph, fetches, feed, rtol=1e-5, atol=1e-5)
        assert got["float32/00"].shape == (m, n)
        if k == 0:                                   # an empty inner dim gives zeros
            assert not np.any(got["float64/11"]) and not np.any(got["int32/10"])
    a, b, _, _, _ = places["float64/00"]
    np.testing.assert_allclose(got["float64/00"], feed[a] @ feed[b])


def test_matmul_static_shapes_extremes_and_int_wrap(graph, rng):
    """Static shapes; inf/nan through BLAS; integer products wrap (fed, so nothing folds)."""
    av = random_array(rng, (6, 9), np.float32, -1, 1)
    bv = random_array(rng, (9, 4), np.float32, -1, 1)
    av[0, 0], av[1, :] = np.nan, 1e30
    bv[2, 1] = np.inf
    a = fl.constant(av)
    b = fl.placeholder(fl.float32, [9, 4], name="b")
    big = np.array([[2**31 - 1, 2], [3, -2**31]], np.int32)
    i32 = fl.placeholder(fl.int32, [2, 2], name="i32")
    i64 = fl.placeholder(fl.int64, [2, 2], name="i64")
    fetches = {"f32": fl.matmul(a, b), "f32_tt": fl.matmul(b, a, transpose_a=True, transpose_b=True),
               "i32_wrap": fl.matmul(i32, i32), "i64_wrap": fl.matmul(i64, i64, adjoint_b=True),
               "list": fl.matmul([[1.0, 2.0]], fl.placeholder_with_default([[3.0], [4.0]], [2, 1])),
               "operator": b @ fl.constant(np.ones((4, 1), np.float32))}
    feed = {b: bv, i32: big, i64: big.astype(np.int64) << 31}
    got = check_against_interpreter(graph, fetches, feed, rtol=1e-5, atol=1e-5)
    assert got["list"].tolist() == [[11.0]]
    assert got["i32_wrap"].tolist() == (big.astype(np.int64) @ big).astype(np.int32).tolist()
    assert np.isnan(got["f32"][0]).all() and np.isinf(got["f32"][1, 1])
    np.testing.assert_allclose(got["operator"][:, 0], bv.sum(axis=1), rtol=1e-5)


def test_matmul_shape_errors(graph):
    x = fl.placeholder(fl.float32, [3, 4], name="x")
    y = fl.placeholder(fl.float32, [5, 2], name="y")
    with pytest.raises(ShapeError, match="bad_mm"):
        fl.matmul(x, y, name="bad_mm")
    with pytest.raises(ShapeError, match="inner dimensions"):
        fl.raw_ops.MatMul(a=x, b=y, transpose_a=True)
    with pytest.raises(ShapeError, match="rank 2"):
        fl.raw_ops.MatMul(a=fl.placeholder(fl.float32, [3], name="v"), b=y)
    with pytest.raises(ShapeError, match="broadcast"):
        fl.matmul(fl.placeholder(fl.float32, [2, 3, 4]), fl.placeholder(fl.float32, [3, 4, 2]))
    with pytest.raises(ValueError):
        fl.matmul(x, x, transpose_a=True, adjoint_a=True)
    # Partially known shapes: unknown dims stay unknown, known ones carry through.
    unknown_rank = fl.placeholder(fl.float32, None)
    assert fl.matmul(fl.placeholder(fl.float32, [None, 4]), unknown_rank).shape.ndims is None
    assert fl.raw_ops.MatMul(a=fl.placeholder(fl.float32, None), b=y).shape == (None, 2)
    assert fl.matmul(fl.placeholder(fl.float32, [None, 3, 2]), y, transpose_b=True).shape == (None, 3, 5)


def test_matmul_dynamic_inner_mismatch_is_a_run_time_error(graph):
    a = fl.placeholder(fl.float32, [None, None], name="a")
    b = fl.placeholder(fl.float32, [None, 3], name="b")
    ai = fl.placeholder(fl.int64, [2, None], name="ai")
    mm = fl.matmul(a, b, name="dyn_mm")
    mmi = fl.matmul(ai, fl.constant(np.ones((4, 2), np.int64)), name="dyn_mm_int")
    run_both_fail(graph, mm, {a: np.ones((2, 4), np.float32), b: np.ones((5, 3), np.float32)},
                  "dyn_mm")
    run_both_fail(graph, mmi, {ai: np.ones((2, 3), np.int64)}, "dyn_mm_int")


def test_batch_matmul_broadcasting_and_adjoints(graph, rng):
    fetches, feeds = {}, {}
    for dt in (np.float32, np.float64, np.int32, np.int64):
        name = np.dtype(dt).name
        x = fl.placeholder(dt, [2, 1, 3, 4], name=f"x_{name}")
        y = fl.constant(random_array(rng, (5, 4, 2), dt, -3, 3))
        fetches[f"{name}/bcast"] = fl.matmul(x, y)
        fetches[f"{name}/adj"] = fl.matmul(y, x, adjoint_a=True, adjoint_b=True)
        feeds[x] = random_array(rng, (2, 1, 3, 4), dt, -3, 3)
    xd = fl.placeholder(fl.float32, [None, 3, None], name="xd")
    yd = fl.placeholder(fl.float32, [None, None, 2], name="yd")
    w = fl.placeholder(fl.float32, [None, 2], name="w")
    fetches["dyn"] = fl.matmul(xd, yd)
    fetches["dyn_adj"] = fl.raw_ops.BatchMatMulV2(x=yd, y=xd, adj_x=True, adj_y=True)
    fetches["folded"] = fl.matmul(xd, w)                           # batch folds into rows
    eye = fl.placeholder_with_default(np.eye(2), [2, 2])
    fetches["rank2"] = fl.raw_ops.BatchMatMulV2(x=eye, y=fl.constant(np.ones((2, 3))))
    got = None
    for bx, by, k in ((3, 3, 4), (1, 4, 4), (4, 1, 4), (0, 1, 4), (2, 2, 0)):
        feed = dict(feeds)
        feed[xd] = random_array(rng, (bx, 3, k), np.float32, -2, 2)
        feed[yd] = random_array(rng, (by, k, 2), np.float32, -2, 2)
        feed[w] = random_array(rng, (k, 2), np.float32, -2, 2)
        got = check_against_interpreter(graph, fetches, feed, rtol=1e-5, atol=1e-5)
        assert got["dyn"].shape == (max(bx, by) if min(bx, by) else 0, 3, 2)
    assert got["float32/bcast"].shape == (2, 5, 3, 2) and got["int64/adj"].shape == (2, 5, 2, 3)
    assert got["rank2"].tolist() == [[1.0] * 3] * 2


def test_batch_matmul_dynamic_batch_mismatch_is_a_run_time_error(graph):
    x = fl.placeholder(fl.float64, [None, 2, 2], name="x")
    y = fl.placeholder(fl.float64, [None, 2, 2], name="y")
    bmm = fl.matmul(x, y, name="bmm")
    run_both_fail(graph, bmm, {x: np.ones((3, 2, 2)), y: np.ones((2, 2, 2))}, "bmm")


def test_bias_add_formats_dtypes_and_wrap(graph, rng):
    fetches, feeds = {}, {}
    for dt in (np.float32, np.float64, np.int32, np.int64):
        name = np.dtype(dt).name
        v = fl.placeholder(dt, [None, 3, None], name=f"v_{name}")
        b3 = fl.constant(random_array(rng, (3,), dt, -5, 5))
        bn = fl.placeholder(dt, [None], name=f"bn_{name}")
        fetches[f"{name}/nhwc"] = fl.nn.bias_add(v, bn)
        fetches[f"{name}/nchw"] = fl.nn.bias_add(v, b3, data_format="NCHW")
        feeds[name] = (v, bn, dt)
    m = fl.placeholder_with_default(np.array([[2**31 - 1, -2**31]], np.int32), [None, 2])
    fetches["wrap"] = fl.nn.bias_add(m, fl.constant(np.array([1, -1], np.int32)))
    inf = fl.placeholder_with_default(np.array([[np.inf, 1.0]], np.float32), [1, 2])
    fetches["inf"] = fl.nn.bias_add(inf, fl.constant([-np.inf, np.nan]))
    for batch, width in ((2, 4), (0, 4), (3, 0)):
        feed = {}
        for v, bn, dt in feeds.values():
            feed[v] = random_array(rng, (batch, 3, width), dt, -5, 5)
            feed[bn] = random_array(rng, (width,), dt, -5, 5)
        got = check_against_interpreter(graph, fetches, feed)
        assert got["int64/nchw"].shape == (batch, 3, width)
    assert got["wrap"].tolist() == [[-2**31, 2**31 - 1]]
    assert np.isnan(got["inf"]).all()


def test_bias_add_errors(graph):
    v = fl.placeholder(fl.float32, [None, 4], name="v")
    with pytest.raises(ShapeError, match="4 channels"):
        fl.nn.bias_add(v, fl.constant([1.0, 2.0]))
    with pytest.raises(ShapeError, match="rank >= 3"):
        fl.nn.bias_add(v, fl.constant([1.0, 2.0]), data_format="NCHW")
    with pytest.raises(ShapeError, match="vector"):
        fl.nn.bias_add(v, fl.constant([[1.0]]))
    one = fl.constant([1.0])
    assert fl.nn.bias_add(fl.placeholder(fl.float32, [None, None]), one).shape == (None, 1)
    assert fl.nn.bias_add(fl.placeholder(fl.float32, None), fl.constant([1.0])).shape.ndims is None
    w = fl.placeholder(fl.float32, [None, None], name="w")
    bias = fl.placeholder(fl.float32, [None], name="bias")
    ba = fl.nn.bias_add(w, bias, name="dyn_bias")
    run_both_fail(graph, ba, {w: np.ones((2, 3), np.float32), bias: np.ones(2, np.float32)},
                  "dyn_bias")


def _np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_softmax_and_log_softmax(graph, rng):
    fetches, xs = {}, {}
    for dt in (np.float32, np.float64):
        name = np.dtype(dt).name
        xs[dt] = fl.placeholder(dt, [None, None], name=f"x_{name}")
        fetches[f"{name}/sm"] = fl.nn.softmax(xs[dt])
        fetches[f"{name}/lsm"] = fl.nn.log_softmax(xs[dt], axis=1)
    x3 = fl.placeholder(fl.float32, [2, None, 3], name="x3")
    fetches["3d"] = fl.nn.softmax(x3)
    special = np.array([[1e30, -1e30, 0, 5], [np.inf, 1, 2, 3], [np.nan, 1, 2, 3],
                        [-np.inf, -np.inf, -np.inf, -np.inf], [-np.inf, 0, 0, 0],
                        [80, 90, 100, 110]])
    for shape in ((5, 7), (0, 3), (3, 0), (1, 1)):
        feed = {x: random_array(rng, shape, dt, -20, 20) for dt, x in xs.items()}
        feed[x3] = random_array(rng, (2, shape[0], 3), np.float32, -5, 5)
        got = check_against_interpreter(graph, fetches, feed)
    feed = {x: special.astype(dt) for dt, x in xs.items()}
    feed[x3] = special[:, :3].reshape(2, 3, 3)
    got = check_against_interpreter(graph, fetches, feed)
    sm = got["float64/sm"]
    np.testing.assert_allclose(sm[[0, 4, 5]], _np_softmax(special[[0, 4, 5]]), rtol=1e-12)
    np.testing.assert_allclose(got["float32/lsm"][5], np.log(_np_softmax(special[5])), rtol=1e-5)
    assert np.isnan(sm[1:4]).all() and not np.isnan(sm[[0, 4, 5]]).any()


@pytest.mark.skipif(not has_op("Transpose"), reason="softmax over a non-last axis needs Transpose")
def test_softmax_non_last_axis(graph, rng):
    x = fl.placeholder(fl.float32, [3, None, 4], name="x")
    fetches = {"sm0": fl.nn.softmax(x, axis=0), "lsm1": fl.nn.log_softmax(x, dim=-2)}
    v = random_array(rng, (3, 5, 4), np.float32, -4, 4)
    got = check_against_interpreter(graph, fetches, {x: v})
    np.testing.assert_allclose(got["sm0"], np.moveaxis(_np_softmax(np.moveaxis(v, 0, -1)), -1, 0),
                               rtol=1e-5)
    np.testing.assert_allclose(np.exp(got["lsm1"]).sum(axis=1), 1.0, rtol=1e-5)


def test_softmax_shape_and_dtype_errors(graph):
    with pytest.raises(ShapeError, match="rank >= 1"):
        fl.nn.softmax(fl.constant(1.0))
    with pytest.raises(Exception, match="not allowed|allowed"):
        fl.nn.softmax(fl.constant([1, 2]))
    assert fl.nn.log_softmax(fl.placeholder(fl.float32, None)).shape.ndims is None
    assert fl.nn.softmax(fl.placeholder(fl.float32, [None, 3])).shape == (None, 3)
