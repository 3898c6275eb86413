"""The C kernel of UnsortedSegmentSum against the numpy interpreter (the oracle).

f32 sums are rounded once from a double sum, as the reference computes them: a segment that
gets one row is that row, a segment with several sums them in doubles (``1e8 + 1 - 1e8`` is 1,
not 0 as in float), negative ids are dropped, and empty data, empty rows and zero segments work.
"""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import RuntimeExecutionError


def test_segment_sums_match_the_interpreter(graph, rng):
    f32, f64, i32 = fl.float32, fl.float64, fl.int32
    x = fl.placeholder(f32, [7, 3, 5], name="x")
    ids = fl.placeholder(i32, [7], name="ids")
    dyn = fl.placeholder(f32, [None, 4], name="dyn")
    dyn_ids = fl.placeholder(i32, [None], name="dyn_ids")
    cancel = fl.constant(np.array([[1e8], [1.0], [-1e8], [2.5]], np.float32))
    grid = fl.placeholder(f32, [2, 3, 2], name="grid")
    grid_ids = fl.placeholder(i32, [2, 3], name="grid_ids")
    fetches = {
        "duplicates_and_dropped": fl.unsorted_segment_sum(x, ids, 6),
        "one_row_each": fl.unsorted_segment_sum(x, fl.constant([6, 0, 2, 1, 3, 5, 4]), 8),
        "rounded_once": fl.unsorted_segment_sum(cancel, fl.constant([0, 0, 0, 1]), 2),
        "dynamic_rows": fl.unsorted_segment_sum(dyn, dyn_ids, 5),
        "no_rows": fl.unsorted_segment_sum(fl.zeros([0, 3]), fl.zeros([0], i32), 4),
        "empty_rows": fl.unsorted_segment_sum(fl.zeros([3, 0]), fl.constant([0, 2, 2]), 3),
        "no_segments": fl.unsorted_segment_sum(x, fl.constant([-1] * 7), 0),
        "ids_of_rank_2": fl.unsorted_segment_sum(grid, grid_ids, 4),
        "f64": fl.unsorted_segment_sum(fl.cast(x, f64), ids, 6),
        "i32": fl.unsorted_segment_sum(fl.cast(x * 100.0, i32), ids, 6),
    }
    feed = {x: rng.standard_normal((7, 3, 5)).astype(np.float32),
            ids: np.array([3, -1, 0, 3, 5, 3, 0], np.int32),
            dyn: rng.standard_normal((9, 4)).astype(np.float32),
            dyn_ids: np.array([4, 4, 0, -2, 1, 4, 0, 3, 3], np.int32),
            grid: rng.standard_normal((2, 3, 2)).astype(np.float32),
            grid_ids: np.array([[1, 3, 1], [-1, 0, 1]], np.int32)}
    got = check_against_interpreter(graph, fetches, feed)
    np.testing.assert_array_equal(got["rounded_once"], [[1.0], [2.5]])


def test_an_id_out_of_range_is_an_error_naming_the_node(graph):
    data = fl.placeholder(fl.float32, [3, 2], name="data")
    ids = fl.placeholder(fl.int32, [3], name="ids")
    out = fl.unsorted_segment_sum(data, ids, 2, name="sums")
    with fl.Session(graph=graph) as s:
        with pytest.raises(RuntimeExecutionError, match="out of range") as e:
            s.run(out, {data: np.ones((3, 2), np.float32), ids: np.array([0, 2, 1], np.int32)})
        assert e.value.node == "sums"
