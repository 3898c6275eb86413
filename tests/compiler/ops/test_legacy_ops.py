"""TensorFlow's legacy Select (a vector condition picks rows; no broadcasting) and Gather (axis
0, no axis input): compiled C against the numpy interpreter and against numpy written out,
shapes fed at run time, their run-time errors in both backends, and their gradients."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError


def _fails_in_both(graph, fetch, feed, *needles):
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError) as info:
                s.run(fetch, feed)
        text = str(info.value)
        assert f"'{fetch.op.name}'" in text, (backend, text)
        for needle in needles:
            assert needle in text, (backend, text)


def test_select_picks_rows_elements_or_everything(graph, rng):
    c_rows = fl.placeholder(fl.bool_, [None], name="c_rows")
    c_same = fl.placeholder(fl.bool_, [None, 3], name="c_same")
    c_scalar = fl.placeholder(fl.bool_, [], name="c_scalar")
    t = fl.placeholder(fl.float32, [None, 3], name="t")
    e = fl.placeholder(fl.float32, [None, 3], name="e")
    t3 = fl.placeholder(fl.int32, [None, 2, 2], name="t3")
    e3 = fl.placeholder(fl.int32, [None, 2, 2], name="e3")
    fetches = {"rows": fl.raw_ops.Select(condition=c_rows, t=t, e=e),
               "same": fl.raw_ops.Select(condition=c_same, t=t, e=e),
               "scalar": fl.raw_ops.Select(condition=c_scalar, t=t, e=e),
               "rows3": fl.raw_ops.Select(condition=c_rows, x=t3, y=e3),   # TF's Python names
               "where_v1": fl.where(c_rows, t, e)}
    assert fetches["where_v1"].op.type == "Select"
    for n in (4, 1, 0):
        feed = {c_rows: rng.random(n) > 0.5, c_same: rng.random((n, 3)) > 0.5,
                c_scalar: np.bool_(n % 2), t: rng.standard_normal((n, 3)).astype(np.float32),
                e: rng.standard_normal((n, 3)).astype(np.float32),
                t3: rng.integers(-9, 9, (n, 2, 2)).astype(np.int32),
                e3: rng.integers(-9, 9, (n, 2, 2)).astype(np.int32)}
        got = check_against_interpreter(graph, fetches, feed)
        np.testing.assert_array_equal(got["rows"], np.where(feed[c_rows][:, None], feed[t],
                                                            feed[e]))
        np.testing.assert_array_equal(got["where_v1"], got["rows"])
        np.testing.assert_array_equal(got["rows3"], np.where(feed[c_rows][:, None, None],
                                                             feed[t3], feed[e3]))
        np.testing.assert_array_equal(got["same"], np.where(feed[c_same], feed[t], feed[e]))
        np.testing.assert_array_equal(got["scalar"], feed[t] if n % 2 else feed[e])


def test_a_square_matrix_with_a_vector_condition_takes_rows_not_columns(graph):
    # SelectV2 would broadcast the vector along the last dim and pick columns
    c = fl.constant([True, False])
    x = fl.constant([[1, 2], [3, 4]])
    y = fl.constant([[5, 6], [7, 8]])
    got = check_against_interpreter(graph, {"v1": fl.where(c, x, y),
                                            "v2": fl.where_v2(c, x, y)})
    np.testing.assert_array_equal(got["v1"], [[1, 2], [7, 8]])
    np.testing.assert_array_equal(got["v2"], [[1, 6], [3, 8]])


def test_select_shapes_are_checked_when_built_and_when_run(graph):
    t = fl.placeholder(fl.float32, [2, 3])
    with pytest.raises(ShapeError, match="same shape"):
        fl.raw_ops.Select(condition=fl.placeholder(fl.bool_, [2, 3]), t=t,
                          e=fl.placeholder(fl.float32, [3, 2]))
    with pytest.raises(ShapeError, match="one element per row"):
        fl.raw_ops.Select(condition=fl.placeholder(fl.bool_, [3]), t=t, e=t)
    with pytest.raises(ShapeError, match="scalar, a vector"):
        fl.raw_ops.Select(condition=fl.placeholder(fl.bool_, [2, 3, 1]), t=t, e=t)
    c = fl.placeholder(fl.bool_, [None], name="c")
    x = fl.placeholder(fl.float32, [None, 2], name="x")
    y = fl.placeholder(fl.float32, [None, 2], name="y")
    s = fl.raw_ops.Select(condition=c, t=x, e=y, name="sel")
    ones = np.ones((3, 2), np.float32)
    _fails_in_both(graph, s, {c: np.ones(2, bool), x: ones, y: ones}, "one element per row")
    _fails_in_both(graph, s, {c: np.ones(3, bool), x: ones, y: np.ones((2, 2), np.float32)},
                   "t and e must have the same shape")


def test_gather_takes_rows_of_any_rank_with_both_index_types(graph, rng):
    p = fl.placeholder(fl.float32, [None, 2, 3], name="p")
    pv = fl.placeholder(fl.int64, [None], name="pv")
    i32 = fl.placeholder(fl.int32, [None, 2], name="i32")
    i64 = fl.placeholder(fl.int64, [], name="i64")
    fetches = {"m": fl.raw_ops.Gather(params=p, indices=i32),
               "s": fl.raw_ops.Gather(params=p, indices=i64),
               "v": fl.raw_ops.Gather(params=pv, indices=i32, validate_indices=False)}
    assert fetches["m"].shape == (None, 2, 2, 3) and fetches["s"].shape == (2, 3)
    for rows, count in ((5, 3), (1, 1), (4, 0)):
        feed = {p: rng.standard_normal((rows, 2, 3)).astype(np.float32),
                pv: rng.integers(-100, 100, rows), i32: rng.integers(0, rows, (count, 2)).astype(
                    np.int32), i64: np.int64(rows - 1)}
        got = check_against_interpreter(graph, fetches, feed)
        np.testing.assert_array_equal(got["m"], feed[p][feed[i32]])
        np.testing.assert_array_equal(got["s"], feed[p][rows - 1])
        np.testing.assert_array_equal(got["v"], feed[pv][feed[i32]])


def test_gather_index_out_of_range_is_an_error_naming_it(graph):
    p = fl.placeholder(fl.float32, [None, 2], name="p")
    i = fl.placeholder(fl.int32, [None, 2], name="i")
    g = fl.raw_ops.Gather(params=p, indices=i, name="gather")
    feed = {p: np.zeros((3, 2), np.float32), i: np.array([[0, 1], [3, 0]], np.int32)}
    _fails_in_both(graph, g, feed, "indices[1,0] = 3 is not in [0, 3)")
    feed[i] = np.array([[0, -1]], np.int32)
    _fails_in_both(graph, g, feed, "indices[0,1] = -1 is not in [0, 3)")


def test_gradients_of_select_and_gather(graph, rng):
    c = fl.placeholder(fl.bool_, [4], name="c")
    x = fl.placeholder(fl.float32, [4, 3], name="x")
    y = fl.placeholder(fl.float32, [4, 3], name="y")
    ids = fl.constant([2, 0, 2], dtype=fl.int32)
    w = fl.constant(rng.standard_normal((3, 3)).astype(np.float32))
    picked = fl.raw_ops.Select(condition=c, t=x, e=y)
    rows = fl.raw_ops.Gather(params=picked * picked, indices=ids)
    loss = fl.reduce_sum(rows * w)
    gx, gy = fl.gradients(loss, [x, y])
    cv = np.array([True, False, True, False])
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    yv = rng.standard_normal((4, 3)).astype(np.float32)
    got = check_against_interpreter(graph, {"gx": gx, "gy": gy}, {c: cv, x: xv, y: yv})
    picked_v = np.where(cv[:, None], xv, yv)
    d_picked = np.zeros((4, 3), np.float32)
    for k, r in enumerate([2, 0, 2]):
        d_picked[r] += 2 * picked_v[r] * w.op.node.attrs["value"][k]
    np.testing.assert_allclose(got["gx"], np.where(cv[:, None], d_picked, 0), rtol=1e-5)
    np.testing.assert_allclose(got["gy"], np.where(cv[:, None], 0, d_picked), rtol=1e-5)
