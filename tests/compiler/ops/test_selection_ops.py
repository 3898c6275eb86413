"""Where, TopKV2 and the Unique family: compiled C against the numpy interpreter (one
compile per test), with empty tensors, dims fed at run time, ties, NaN, int/float/bool
dtypes, and the run-time errors of both backends."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op


def _fails_in_both(graph, fetch, feed, *needles):
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError) as info:
                s.run(fetch, feed)
        text = str(info.value)
        assert f"'{fetch.op.name}'" in text, (backend, text)
        for needle in needles:
            assert needle in text, (backend, text)


def test_where_gives_coordinates_of_nonzero_elements(graph, rng):
    f = fl.placeholder(fl.float32, [None, None, 2], name="f")
    b = fl.placeholder(fl.bool_, [None], name="b")
    i = fl.placeholder(fl.int64, [], name="i")
    fetches = {"f": fl.where(f), "b": fl.where(b), "scalar": fl.where(i)}
    assert fetches["f"].shape == (None, 3) and fetches["scalar"].shape == (None, 0)
    for shape in ((2, 3, 2), (0, 4, 2), (1, 1, 2)):
        fv = rng.integers(-1, 2, size=shape).astype(np.float32)
        if fv.size:
            fv.reshape(-1)[0] = np.nan                  # NaN is nonzero
        feed = {f: fv, b: rng.random(5) > 0.5, i: np.int64(shape[0])}
        got = check_against_interpreter(graph, fetches, feed)
        np.testing.assert_array_equal(got["f"], np.argwhere(np.isnan(fv) | (fv != 0)))
        assert got["scalar"].shape == ((1, 0) if shape[0] else (0, 0))


def test_top_k_orders_values_with_ties_by_index_and_nan_first(graph, rng):
    x = fl.placeholder(fl.float32, [None, None], name="x")
    xi = fl.placeholder(fl.int32, [3, None], name="xi")
    k = fl.placeholder(fl.int32, [], name="k")
    values, indices = fl.nn.top_k(x, k, index_type=fl.int64)
    ivalues, iindices = fl.nn.top_k(xi, 2)
    fetches = {"v": values, "i": indices, "iv": ivalues, "ii": iindices}
    assert values.shape == (None, None) and ivalues.shape == (3, 2)
    xv = np.array([[1, 3, 3, np.nan, 0, 3], [2, 2, 2, 2, 2, 2], [-np.inf, 5, np.nan, 1, np.inf, 0]],
                  np.float32)
    xiv = np.array([[5, 5, 1], [np.iinfo(np.int32).min, -1, np.iinfo(np.int32).max], [0, 0, 0]],
                   np.int32)
    got = check_against_interpreter(graph, fetches, {x: xv, xi: xiv, k: np.int32(4)})
    np.testing.assert_array_equal(got["i"], [[3, 1, 2, 5], [0, 1, 2, 3], [2, 4, 1, 3]])
    np.testing.assert_array_equal(got["ii"], [[0, 1], [2, 1], [0, 1]])
    # the heap path (k much smaller than the row) and the sort path, on ties
    for shape, kv in (((3, 200), 5), ((2, 17), 17), ((4, 0), 0), ((0, 5), 3), ((5, 64), 1)):
        xv = rng.integers(0, 6, shape).astype(np.float32)
        got = check_against_interpreter(graph, {"v": values, "i": indices},
                                        {x: xv, xi: xiv, k: np.int32(kv)})
        assert got["i"].shape == (shape[0], kv)


def test_top_k_refuses_k_outside_the_row(graph):
    x = fl.placeholder(fl.float64, [2, None], name="x")
    k = fl.placeholder(fl.int32, [], name="k")
    values, _ = fl.nn.top_k(x, k)
    _fails_in_both(graph, values, {x: np.zeros((2, 3)), k: np.int32(4)}, "at least k=4 columns")
    _fails_in_both(graph, values, {x: np.zeros((2, 3)), k: np.int32(-1)}, "Need k >= 0")
    with pytest.raises(ShapeError, match="at least k=5 columns"):
        fl.nn.top_k(fl.constant(np.zeros((2, 3))), 5)


def test_unique_in_first_occurrence_order_with_counts(graph):
    xi = fl.placeholder(fl.int64, [None], name="xi")
    xf = fl.placeholder(fl.float32, [None], name="xf")
    xb = fl.placeholder(fl.bool_, [None], name="xb")
    y, idx, count = fl.unique_with_counts(xi, out_idx=fl.int64)
    fy, fidx = fl.unique(xf)
    by, bidx = fl.unique(xb)
    fetches = {"y": y, "idx": idx, "count": count, "fy": fy, "fidx": fidx, "by": by, "bidx": bidx}
    feed = {xi: np.array([3, 1, 3, 2, 1, 7, 3], np.int64),
            xf: np.array([0.0, -0.0, np.nan, 1.5, np.nan, 1.5], np.float32),
            xb: np.array([True, True, False], bool)}
    got = check_against_interpreter(graph, fetches, feed)
    np.testing.assert_array_equal(got["y"], [3, 1, 2, 7])
    np.testing.assert_array_equal(got["idx"], [0, 1, 0, 2, 1, 3, 0])
    np.testing.assert_array_equal(got["count"], [3, 2, 1, 1])
    # 0.0 and -0.0 are one value; every NaN is its own
    np.testing.assert_array_equal(got["fidx"], [0, 0, 1, 2, 3, 2])
    assert got["fidx"].dtype == np.int32
    empty = {xi: np.zeros(0, np.int64), xf: np.zeros(0, np.float32), xb: np.zeros(0, bool)}
    got = check_against_interpreter(graph, fetches, empty)
    assert got["y"].shape == (0,) and got["count"].shape == (0,)


def test_unique_v2_along_an_axis_compares_whole_slices(graph, rng):
    x = fl.placeholder(fl.float32, [None, None, 2], name="x")
    y0, i0 = A("UniqueV2", [x, fl.constant(np.array([0], np.int64))])
    y1, i1, c1 = A("UniqueWithCountsV2", [x, fl.constant(np.array([-2], np.int32))],
                   {"out_idx": fl.int64})
    assert y0.shape == (None, None, 2) and i1.shape == (None,)
    fetches = {"y0": y0, "i0": i0, "y1": y1, "i1": i1, "c1": c1}
    xv = rng.integers(0, 2, size=(5, 4, 2)).astype(np.float32)
    xv[3] = xv[1]
    got = check_against_interpreter(graph, fetches, {x: xv})
    assert got["i0"][3] == got["i0"][1]
    np.testing.assert_array_equal(got["y0"][got["i0"]], xv)
    got = check_against_interpreter(graph, fetches, {x: np.zeros((0, 3, 2), np.float32)})
    assert got["y1"].shape == (0, 1, 2)          # three empty slices: one value
    np.testing.assert_array_equal(got["c1"], [3])


def test_unique_refuses_a_matrix_without_axis(graph):
    x = fl.placeholder(fl.int32, None, name="x")
    y, _ = A("UniqueV2", [x, fl.constant(np.zeros([0], np.int64))])
    with fl.Session(graph=graph, backend="interpreter") as s:
        with pytest.raises(FlowcError, match="unique expects a 1D vector"):
            s.run(y, {x: np.zeros((2, 2), np.int32)})
    with pytest.raises(ShapeError, match="unique expects a 1D vector"):
        fl.unique(fl.constant(np.zeros((2, 2), np.int32)))
