"""GatherNd, ScatterNd, the TensorScatter family and ReverseSequence: compiled C against the
numpy interpreter (one compile per test), with repeated indices, index depth 0 to rank,
empty index lists, dims fed at run time, integer wrap-around, NaN, and out-of-range indices
refused by both backends before anything is written."""
import numpy as np
import pytest

import dsl as fl
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


def test_gather_nd_at_every_index_depth(graph, rng):
    p = fl.placeholder(fl.float32, [None, 3, 4], name="p")
    i0 = fl.placeholder(fl.int32, [2, 0], name="i0")
    i1 = fl.placeholder(fl.int64, [None, 1], name="i1")
    i2 = fl.placeholder(fl.int32, [2, None, 2], name="i2")
    i3 = fl.placeholder(fl.int64, [None, 3], name="i3")
    b = fl.placeholder(fl.bool_, [3, 2], name="b")
    fetches = {"d0": fl.gather_nd(p, i0), "d1": fl.gather_nd(p, i1), "d2": fl.gather_nd(p, i2),
               "d3": fl.gather_nd(p, i3), "bool": fl.gather_nd(b, [[2, 1], [0, 0]]),
               "batched": fl.gather_nd(p, [[[1], [0]], [[2], [2]]], batch_dims=1)}
    assert fetches["d2"].shape == (2, None, 4) and fetches["batched"].shape == (2, 2, 4)
    pv = rng.normal(size=(2, 3, 4)).astype(np.float32)
    feed = {p: pv, i0: np.zeros((2, 0), np.int32), i1: np.array([[1], [0], [1]]),
            i2: rng.integers(0, 2, (2, 5, 2)).astype(np.int32),
            i3: np.array([[1, 2, 3], [0, 0, 0]]), b: rng.random((3, 2)) > 0.5}
    got = check_against_interpreter(graph, fetches, feed)
    assert got["d0"].shape == (2, 2, 3, 4)
    np.testing.assert_array_equal(got["d3"], [pv[1, 2, 3], pv[0, 0, 0]])
    np.testing.assert_array_equal(got["batched"], [[pv[0, 1], pv[0, 0]], [pv[1, 2], pv[1, 2]]])
    feed[i1] = np.zeros((0, 1), np.int64)
    assert check_against_interpreter(graph, {"d1": fetches["d1"]}, feed)["d1"].shape == (0, 3, 4)
    feed[i3] = np.array([[1, 2, 3], [1, 3, 0]])
    _fails_in_both(graph, fetches["d3"], feed, "indices[1] = [1, 3, 0] does not index into "
                   "shape [2, 3, 4]")
    feed[i3] = np.array([[-1, 0, 0]])
    _fails_in_both(graph, fetches["d3"], feed, "indices[0] = [-1, 0, 0]")


def test_tensor_scatters_apply_updates_in_index_order(graph, rng):
    t = fl.placeholder(fl.float64, [None, 3], name="t")
    idx = fl.placeholder(fl.int32, [None, 1], name="idx")
    upd = fl.placeholder(fl.float64, [None, 3], name="upd")
    ti = fl.placeholder(fl.int32, [4], name="ti")
    ui = fl.placeholder(fl.int32, [3], name="ui")
    at = fl.constant(np.array([[1], [1], [3]], np.int32))
    fetches = {op: A(op, [t, idx, upd]) for op in (
        "TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
        "TensorScatterMin", "_TensorScatterMul")}
    fetches["elements"] = fl.tensor_scatter_nd_add(t, [[0, 2], [0, 2], [1, 0]], [1.0, 2.0, 3.0])
    fetches["scatter_nd"] = fl.scatter_nd(idx, upd, [5, 3])
    for op in ("TensorScatterAdd", "_TensorScatterMul", "TensorScatterMax"):
        fetches["int " + op] = A(op, [ti, at, ui])
    fetches["bool"] = fl.tensor_scatter_nd_update(fl.constant([True, False, True]), [[1], [0]],
                                                  fl.constant([True, False]))
    tv = rng.normal(size=(4, 3))
    uv = rng.normal(size=(5, 3))
    uv[0, 0] = np.nan
    feed = {t: tv, idx: np.array([[2], [0], [2], [3], [2]], np.int32), upd: uv,
            ti: np.array([7, 2**31 - 1, -5, 3], np.int32),
            ui: np.array([2**31 - 1, 5, -2], np.int32)}
    got = check_against_interpreter(graph, fetches, feed)
    np.testing.assert_array_equal(got["TensorScatterUpdate"][2], uv[4])       # the last wins
    np.testing.assert_allclose(got["TensorScatterAdd"][2], tv[2] + uv[0] + uv[2] + uv[4])
    assert np.isnan(got["TensorScatterMax"][2, 0]) and np.isnan(got["TensorScatterMin"][2, 0])
    np.testing.assert_array_equal(got["int TensorScatterAdd"], [7, 3, -5, 1])  # wraps
    np.testing.assert_array_equal(got["bool"], [False, True, True])
    feed[idx] = np.zeros((0, 1), np.int32)
    feed[upd] = np.zeros((0, 3))
    got = check_against_interpreter(graph, fetches, feed)
    np.testing.assert_array_equal(got["_TensorScatterMul"], tv)


def test_scatter_refuses_out_of_range_indices_and_bad_updates(graph):
    t = fl.placeholder(fl.float32, [None, 2], name="t")
    idx = fl.placeholder(fl.int64, [None, 1], name="idx")
    upd = fl.placeholder(fl.float32, [None, None], name="upd")
    shape = fl.placeholder(fl.int64, [2], name="shape")
    update = fl.tensor_scatter_nd_update(t, idx, upd)
    made = fl.scatter_nd(idx, upd, shape)
    good = {t: np.zeros((3, 2), np.float32), idx: np.array([[0], [2]]),
            upd: np.ones((2, 2), np.float32), shape: np.array([3, 2])}
    check_against_interpreter(graph, {"u": update, "m": made}, good)
    _fails_in_both(graph, update, {**good, idx: np.array([[0], [3]])},
                   "indices[1] = [3] does not index into shape [3, 2]")
    _fails_in_both(graph, made, {**good, shape: np.array([2, 2])},
                   "indices[1] = [2] does not index into shape [2, 2]")
    _fails_in_both(graph, update, {**good, upd: np.ones((2, 3), np.float32)}, "updates")


def test_reverse_sequence_per_batch_lengths(graph, rng):
    x = fl.placeholder(fl.int32, [None, None, 2], name="x")
    lengths = fl.placeholder(fl.int64, [None], name="lengths")
    fetches = {"time_major": fl.reverse_sequence(x, lengths, seq_axis=0, batch_axis=1),
               "batch_major": fl.reverse_sequence(fl.transpose(x, [1, 0, 2]), lengths,
                                                  seq_axis=1, batch_axis=0)}
    xv = rng.integers(-9, 9, (4, 3, 2)).astype(np.int32)
    got = check_against_interpreter(graph, fetches, {x: xv, lengths: np.array([4, 0, 2])})
    np.testing.assert_array_equal(got["time_major"][:, 0], xv[::-1, 0])
    np.testing.assert_array_equal(got["time_major"][:, 1], xv[:, 1])
    np.testing.assert_array_equal(got["time_major"][:2, 2], xv[1::-1, 2])
    np.testing.assert_array_equal(got["batch_major"], got["time_major"].transpose(1, 0, 2))
    _fails_in_both(graph, fetches["time_major"], {x: xv, lengths: np.array([5, 0, 2])},
                   "seq_lengths[0] = 5 is not in [0, 4]")
    _fails_in_both(graph, fetches["time_major"], {x: xv, lengths: np.array([1, 1])},
                   "len(seq_lengths) must equal input.dims(batch_dim)")
