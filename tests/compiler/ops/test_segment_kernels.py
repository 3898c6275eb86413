"""The C kernels of the segment reductions (Segment*, UnsortedSegmentMax/Min/Prod,
SparseSegment* and their WithNumSegments forms) against the numpy interpreter (the oracle):
static and fed shapes, empty segments (0, 1, or the type's limits), negative ids dropped by the
unsorted ops, ids of rank 2, integer types, NaN, no rows at all; and every bad id or index is
an error naming the node in both backends, as TF's CPU kernels report it."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import InvalidArgumentError

SORTED = [fl.segment_sum, fl.segment_mean, fl.segment_max, fl.segment_min, fl.segment_prod]
UNSORTED = [fl.unsorted_segment_max, fl.unsorted_segment_min, fl.unsorted_segment_prod]
SPARSE = [fl.sparse_segment_sum, fl.sparse_segment_mean, fl.sparse_segment_sqrt_n]


def test_sorted_segments_match_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [6, 2, 3], name="x")
    ids = fl.placeholder(fl.int32, [6], name="ids")
    dyn = fl.placeholder(fl.float64, [None, 4], name="dyn")
    dyn_ids = fl.placeholder(fl.int64, [None], name="dyn_ids")
    ints = fl.placeholder(fl.int32, [6], name="ints")
    fetches = {}
    for f in SORTED:
        name = f.__name__
        fetches[name] = f(x, ids)
        fetches[name + "_dynamic"] = f(dyn, dyn_ids)
        fetches[name + "_int"] = f(ints, ids)
        fetches[name + "_no_rows"] = f(fl.zeros([0, 3]), fl.zeros([0], fl.int32))
    feed = {x: rng.standard_normal((6, 2, 3)).astype(np.float32),
            ids: np.array([0, 0, 2, 2, 2, 5], np.int32),
            dyn: rng.standard_normal((5, 4)), dyn_ids: np.array([1, 1, 1, 3, 3], np.int64),
            ints: np.array([-7, 4, 9, -3, 2, 11], np.int32)}
    got = check_against_interpreter(graph, fetches, feed)
    assert got["segment_sum"].shape == (6, 2, 3)
    np.testing.assert_array_equal(got["segment_max"][1], 0)      # an empty segment gives 0
    np.testing.assert_array_equal(got["segment_prod"][3], 1)
    np.testing.assert_array_equal(got["segment_mean_int"], [-1, 0, 2, 0, 0, 11])   # truncates


def test_unsorted_segments_match_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [7, 3], name="x")
    ids = fl.placeholder(fl.int32, [7], name="ids")
    grid = fl.placeholder(fl.float64, [2, 3, 2], name="grid")
    grid_ids = fl.placeholder(fl.int64, [2, 3], name="grid_ids")
    n = fl.placeholder(fl.int32, [], name="n")
    ints = fl.placeholder(fl.int64, [7, 3], name="ints")
    nan = fl.constant(np.array([[1.0], [np.nan], [2.0], [3.0]], np.float32))
    fetches = {}
    for f in UNSORTED:
        name = f.__name__
        fetches[name] = f(x, ids, 6)
        fetches[name + "_fed_count"] = f(x, ids, n)
        fetches[name + "_rank_2_ids"] = f(grid, grid_ids, 4)
        fetches[name + "_int"] = f(ints, ids, 6)
        fetches[name + "_nan"] = f(nan, fl.constant([0, 0, 1, 1]), 2)
        fetches[name + "_no_segments"] = f(x, fl.constant([-1] * 7), 0)
    feed = {x: rng.standard_normal((7, 3)).astype(np.float32),
            ids: np.array([3, -1, 0, 3, 5, 3, 0], np.int32),
            grid: rng.standard_normal((2, 3, 2)),
            grid_ids: np.array([[1, 3, 1], [-1, 0, 1]], np.int64), n: np.int32(7),
            ints: rng.integers(-50, 50, (7, 3)).astype(np.int64)}
    got = check_against_interpreter(graph, fetches, feed)
    lowest = np.finfo(np.float32).min
    np.testing.assert_array_equal(got["unsorted_segment_max"][1], [lowest] * 3)
    np.testing.assert_array_equal(got["unsorted_segment_min_int"][4], [np.iinfo(np.int64).max] * 3)
    np.testing.assert_array_equal(got["unsorted_segment_prod"][2], [1, 1, 1])
    nan_max = got["unsorted_segment_max_nan"]
    assert np.isnan(nan_max[0, 0]) and nan_max[1, 0] == 3


def test_sparse_segments_match_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [5, 3], name="x")
    idx = fl.placeholder(fl.int32, [None], name="idx")
    ids = fl.placeholder(fl.int64, [None], name="ids")
    d64 = fl.placeholder(fl.float64, [4, 2, 2], name="d64")
    fetches = {}
    for f in SPARSE:
        name = f.__name__
        fetches[name] = f(x, idx, ids)
        fetches[name + "_num_segments"] = f(x, idx, ids, num_segments=6)
        fetches[name + "_f64"] = f(d64, fl.constant([3, 3, 0, 1], fl.int64),
                                   fl.constant([0, 1, 1, 1]))
        fetches[name + "_none"] = f(x, fl.zeros([0], fl.int32), fl.zeros([0], fl.int32))
    fetches["sum_int"] = fl.sparse_segment_sum(fl.cast(x * 10.0, fl.int32), idx, ids)
    feed = {x: rng.standard_normal((5, 3)).astype(np.float32),
            idx: np.array([4, 0, 4, 2, 1, 1], np.int32),
            ids: np.array([0, 0, 0, 2, 3, 3], np.int64),
            d64: rng.standard_normal((4, 2, 2))}
    got = check_against_interpreter(graph, fetches, feed)
    xv = feed[x]
    np.testing.assert_allclose(got["sparse_segment_sum"][0], xv[4] + xv[0] + xv[4], rtol=1e-6)
    np.testing.assert_allclose(got["sparse_segment_sqrt_n"][3], 2 * xv[1] / np.sqrt(2), rtol=1e-6)
    assert got["sparse_segment_mean_num_segments"].shape == (6, 3)
    np.testing.assert_array_equal(got["sparse_segment_mean_num_segments"][[1, 4, 5]], 0)


BAD = [
    ("sorted_not_increasing", lambda d, i: fl.segment_sum(d, i, name="bad"),
     [0, 2, 1, 2], "segment ids are not increasing"),
    ("sorted_negative", lambda d, i: fl.segment_max(d, i, name="bad"),
     [-1, 0, 0, 1], "segment ids must be >= 0"),
    ("unsorted_too_big", lambda d, i: fl.unsorted_segment_prod(d, i, 3, name="bad"),
     [0, 3, 1, 2], "out of range"),
    ("sparse_index", lambda d, i: fl.sparse_segment_mean(d, i, [0, 0, 1, 1], name="bad"),
     [0, 4, 1, 2], r"indices\[1\] = 4 is out of range \[0, 4\)"),
    ("sparse_negative_index", lambda d, i: fl.sparse_segment_sum(d, i, [0, 0, 1, 1], name="bad"),
     [0, 1, -1, 2], "out of range"),
    ("sparse_unsorted", lambda d, i: fl.sparse_segment_sqrt_n(d, [0, 1, 2, 3], i, name="bad"),
     [1, 0, 1, 1], "not increasing"),
    ("sparse_beyond_num_segments", lambda d, i: fl.sparse_segment_sum(
        d, [0, 1, 2, 3], i, num_segments=2, name="bad"), [0, 0, 1, 2], "< num_segments"),
]


@pytest.mark.parametrize("backend", ["interpreter", "c"])
@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_a_bad_id_or_index_is_an_error_naming_the_node(graph, backend, case):
    _, build, bad_ids, message = case
    data = fl.placeholder(fl.float32, [4, 2], name="data")
    ids = fl.placeholder(fl.int32, [4], name="ids")
    out = build(data, ids)
    with fl.Session(graph=graph, backend=backend) as s:
        with pytest.raises(InvalidArgumentError, match=message) as e:
            s.run(out, {data: np.ones((4, 2), np.float32), ids: np.array(bad_ids, np.int32)})
        assert e.value.node == "bad"


def test_shape_errors_name_the_node(graph):
    with pytest.raises(ShapeError, match="segment_ids must be a vector") as e:
        fl.segment_sum(fl.zeros([2, 3]), fl.zeros([2, 3], fl.int32), name="rank2")
    assert "rank2" in str(e.value)
    with pytest.raises(ShapeError, match="must be a prefix of data"):
        fl.unsorted_segment_max(fl.zeros([2, 3]), fl.zeros([3], fl.int32), 2)
    with pytest.raises(ShapeError, match="one length"):
        fl.sparse_segment_sum(fl.zeros([2, 3]), [0, 1], [0, 0, 1])


FED_SHAPES = [
    ("sorted_ids_longer_than_data", lambda d, i, n: fl.segment_mean(d, i, name="bad"),
     (3, 2), [0, 0, 1, 1], 2, "segment_ids"),
    ("unsorted_ids_longer_than_data", lambda d, i, n: fl.unsorted_segment_max(d, i, n, name="bad"),
     (2, 2), [0, 1, 1], 2, "segment_ids"),
    ("negative_num_segments", lambda d, i, n: fl.unsorted_segment_min(d, i, n, name="bad"),
     (3, 2), [0, 1, 1], -1, "num_segments must be >= 0"),
    ("sparse_lengths_differ", lambda d, i, n: fl.sparse_segment_sum(
        d, fl.constant([0, 1]), i, name="bad"), (3, 2), [0, 0, 1], 2, "one length"),
]


@pytest.mark.parametrize("backend", ["interpreter", "c"])
@pytest.mark.parametrize("case", FED_SHAPES, ids=[c[0] for c in FED_SHAPES])
def test_fed_shapes_that_do_not_fit_are_errors_naming_the_node(graph, backend, case):
    _, build, data_shape, ids_value, n_value, message = case
    data = fl.placeholder(fl.float32, [None, 2], name="data")
    ids = fl.placeholder(fl.int32, [None], name="ids")
    n = fl.placeholder(fl.int32, [], name="n")
    out = build(data, ids, n)
    with fl.Session(graph=graph, backend=backend) as s:
        with pytest.raises(InvalidArgumentError, match=message) as e:
            s.run(out, {data: np.ones(data_shape, np.float32),
                        ids: np.array(ids_value, np.int32), n: np.int32(n_value)})
        assert e.value.node == "bad"


def test_sparse_segment_gradient_ops_match_the_interpreter(graph, rng):
    g = fl.placeholder(fl.float32, [None, 3], name="g")
    g64 = fl.placeholder(fl.float64, [4, 2, 2], name="g64")
    idx = fl.placeholder(fl.int64, [None], name="idx")
    ids = fl.placeholder(fl.int32, [None], name="ids")
    n = fl.placeholder(fl.int32, [], name="n")
    fetches = {}
    for kind in ("Sum", "Mean", "SqrtN"):
        op = getattr(fl.raw_ops, f"SparseSegment{kind}Grad")
        fetches[kind] = op(grad=g, indices=idx, segment_ids=ids, output_dim0=n)
        fetches[kind + "_f64"] = op(grad=g64, indices=fl.constant([0, 5, 5]),
                                    segment_ids=fl.constant([3, 3, 1]), output_dim0=6)
    feed = {g: rng.standard_normal((4, 3)).astype(np.float32),
            g64: rng.standard_normal((4, 2, 2)), idx: np.array([2, 0, 2, 6, 1], np.int64),
            ids: np.array([0, 0, 1, 3, 3], np.int32), n: np.int32(7)}
    got = check_against_interpreter(graph, fetches, feed)
    gv = feed[g]
    np.testing.assert_allclose(got["Mean"][2], gv[0] / 2 + gv[1], rtol=1e-6)
    assert got["SqrtN"].shape == (7, 3) and not got["Sum"][[3, 4, 5]].any()


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_sparse_segment_gradient_ops_check_ids_and_indices(graph, backend):
    g = fl.placeholder(fl.float32, [2, 3], name="g")
    idx = fl.placeholder(fl.int32, [3], name="idx")
    ids = fl.placeholder(fl.int32, [3], name="ids")
    out = fl.raw_ops.SparseSegmentMeanGrad(grad=g, indices=idx, segment_ids=ids, output_dim0=4,
                                           name="bad")
    with fl.Session(graph=graph, backend=backend) as s:
        for i, sid, message in (([0, 4, 1], [0, 0, 1], r"indices\[1\] = 4 is out of range"),
                                ([0, 1, 1], [0, 2, 1], r"segment_ids\[1\] = 2 is out of range")):
            with pytest.raises(InvalidArgumentError, match=message) as e:
                s.run(out, {g: np.ones((2, 3), np.float32), idx: np.array(i, np.int32),
                            ids: np.array(sid, np.int32)})
            assert e.value.node == "bad"
