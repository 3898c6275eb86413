"""SpaceToBatchND and BatchToSpaceND (TensorFlow's raw ops, compiler/ops/space_batch.py):
compiled C against the numpy interpreter for one, two and three block dims, paddings and
crops, trailing dims, fed batch and spatial dims and a zero batch; the round trip gives the
input back; the documented example of tf.space_to_batch_nd pins the reference; and the errors
TensorFlow gives. (The reference was checked against TensorFlow 2.21's kernels on these
cases, exactly.)"""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op


def _s2b(x, block, pads):
    return A("SpaceToBatchND", [x, block, pads])


def _b2s(x, block, crops):
    return A("BatchToSpaceND", [x, block, crops])


CASES = [([2, 2], [[0, 0], [0, 0]]), ([2, 3], [[1, 1], [2, 0]]), ([1, 3], [[0, 2], [1, 1]])]


def test_space_to_batch_and_back_match_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [None, 6, None, 3], name="x")
    fetches = {}
    for k, (block, pads) in enumerate(CASES):
        y = _s2b(x, block, pads)
        fetches[f"s2b{k}"] = y
        fetches[f"back{k}"] = _b2s(y, block, pads)
        fetches[f"crop{k}"] = _b2s(y, block, [[1, 0], [0, 1]])
    one = fl.placeholder(fl.int32, [2, None], name="one")        # Conv1D's case: M = 1
    fetches["m1"] = _s2b(one, [3], [[2, 1]])
    fetches["m1_back"] = _b2s(fetches["m1"], [3], [[2, 1]])
    assert fetches["s2b1"].shape == (None, 4, None, 3)
    assert fetches["m1"].shape == (6, None)
    for batch, width in ((2, 4), (1, 10), (0, 4)):
        xv = rng.standard_normal((batch, 6, width, 3)).astype(np.float32)
        ov = rng.integers(-9, 9, (2, 3 * width)).astype(np.int32)
        got = check_against_interpreter(graph, fetches, {x: xv, one: ov})
        for k in range(len(CASES)):
            np.testing.assert_array_equal(got[f"back{k}"], xv)
        np.testing.assert_array_equal(got["m1_back"], ov)


def test_three_block_dims_and_int64_shapes(graph, rng):
    x = fl.placeholder(fl.float64, [2, 4, 3, 4, 2], name="x")
    y = _s2b(x, np.array([2, 3, 2], np.int64), np.array([[0, 2], [0, 0], [1, 1]], np.int64))
    fetches = {"s2b": y, "b2s": _b2s(y, [2, 3, 2], [[0, 2], [0, 0], [1, 1]])}
    got = check_against_interpreter(graph, fetches, {x: rng.standard_normal((2, 4, 3, 4, 2))})
    assert got["s2b"].shape == (24, 3, 1, 3, 2)


def test_documented_example(graph):
    # tf.space_to_batch_nd: x = [[[[1], [2]], [[3], [4]]]], block [2, 2] -> [[[[1]]], [[[2]]],
    # [[[3]]], [[[4]]]]; with paddings [[0, 0], [2, 0]]: shape [4, 1, 2, 1], zeros first
    x = fl.constant(np.arange(1, 5, dtype=np.float32).reshape(1, 2, 2, 1))
    got = check_against_interpreter(graph, {"plain": _s2b(x, [2, 2], [[0, 0], [0, 0]]),
                                            "padded": _s2b(x, [2, 2], [[0, 0], [2, 0]])}, {})
    np.testing.assert_array_equal(got["plain"].ravel(), [1, 2, 3, 4])
    np.testing.assert_array_equal(got["padded"].reshape(4, 2), [[0, 1], [0, 2], [0, 3], [0, 4]])


def test_errors():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [2, 5, 4, 1])
        with pytest.raises(FlowcError, match="not divisible by block_shape"):
            _s2b(x, [2, 2], [[0, 0], [0, 0]])
        with pytest.raises(FlowcError, match="must be positive"):
            _s2b(x, [0, 2], [[0, 0], [0, 0]])
        with pytest.raises(FlowcError, match="non-negative"):
            _s2b(x, [1, 2], [[-1, 0], [0, 0]])
        with pytest.raises(FlowcError, match="not divisible by product"):
            _b2s(x, [2, 2], [[0, 0], [0, 0]])
        with pytest.raises(FlowcError, match="overly large crop"):
            _b2s(fl.placeholder(fl.float32, [4, 1, 1, 1]), [2, 2], [[2, 1], [0, 0]])


def test_fed_width_must_divide_in_c(graph):
    x = fl.placeholder(fl.float32, [1, None, 1], name="x")
    y = _s2b(x, [2], [[0, 1]])
    with fl.Session() as sess:
        assert sess.run(y, {x: np.ones((1, 3, 1), np.float32)}).shape == (2, 2, 1)
        with pytest.raises(FlowcError, match="not divisible by block_shape"):
            sess.run(y, {x: np.ones((1, 4, 1), np.float32)})


def test_the_python_api(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4, 6, 1], name="x")
    y = fl.space_to_batch(x, [2, 3], [[0, 0], [0, 3]])
    a, b = fl.identity_n([y, x])
    back = fl.batch_to_space(a, [2, 3], [[0, 0], [0, 3]])
    assert y.shape == (None, 2, 3, 1) and back.shape == (None, 4, 6, 1)
    xv = rng.standard_normal((3, 4, 6, 1)).astype(np.float32)
    got = check_against_interpreter(graph, {"back": back, "b": b}, {x: xv})
    np.testing.assert_array_equal(got["back"], xv)
    np.testing.assert_array_equal(got["b"], xv)
