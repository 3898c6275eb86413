"""The C kernels of (Sparse)SoftmaxCrossEntropyWithLogits against the numpy interpreter (the
oracle): rows shorter and longer than the kernel's 8 lanes, a row holding a NaN or an infinity,
large logits, empty batches and broadcast labels."""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import RuntimeExecutionError


def _xent(features, labels):
    return fl.raw_ops.SoftmaxCrossEntropyWithLogits(features=features, labels=labels)


def _sparse(features, labels):
    return fl.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=features, labels=labels)


def test_cross_entropy_matches_the_interpreter(graph, rng):
    fetches, feed = {}, {}
    for rows, n in ((3, 1), (2, 7), (4, 8), (5, 13), (3, 64), (2, 1001), (0, 9)):
        x = fl.placeholder(fl.float32, [rows, n], name=f"x{rows}_{n}")
        ids = fl.placeholder(fl.int32, [rows], name=f"ids{rows}_{n}")
        dense = fl.placeholder(fl.float32, [rows, n], name=f"p{rows}_{n}")
        feed[x] = (rng.standard_normal((rows, n)) * 3).astype(np.float32)
        feed[ids] = rng.integers(0, n, rows).astype(np.int32)
        p = rng.random((rows, n)).astype(np.float32)
        feed[dense] = p / np.maximum(p.sum(axis=1, keepdims=True), 1e-6)
        for k, t in enumerate(_sparse(x, ids)):
            fetches[f"sparse_{rows}x{n}_{k}"] = t
        for k, t in enumerate(_xent(x, dense)):
            fetches[f"dense_{rows}x{n}_{k}"] = t
    special = np.array([[1.0, np.nan, 2.0, 0.5, 3.0, -1.0, 0.0, 4.0, 1.5, 2.5],
                        [80.0, 85.0, -80.0, 88.0, 1.0, 2.0, 3.0, 4.0, 5.0, 87.5],
                        [-np.inf, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]], np.float32)
    fetches["special_loss"], fetches["special_back"] = _sparse(fl.constant(special),
                                                               fl.constant([2, 3, 9]))
    x64 = fl.placeholder(fl.float64, [3, 11], name="x64")
    feed[x64] = rng.standard_normal((3, 11)) * 5
    fetches["f64_loss"], fetches["f64_back"] = _sparse(x64, fl.constant([0, 10, 4]))
    xb = fl.placeholder(fl.float32, [4, 9], name="xb")
    feed[xb] = rng.standard_normal((4, 9)).astype(np.float32)
    one_hot = np.eye(9, dtype=np.float32)[[3]]                 # [1, 9]: broadcast over rows
    fetches["broadcast_loss"], fetches["broadcast_back"] = _xent(xb, fl.constant(one_hot))
    check_against_interpreter(graph, fetches, feed)


def test_a_label_out_of_range_is_an_error(graph):
    x = fl.placeholder(fl.float32, [2, 10], name="x")
    loss, _ = _sparse(x, fl.constant([1, 10]))
    with fl.Session(graph=graph) as s:
        with pytest.raises(RuntimeExecutionError, match="outside the valid range"):
            s.run(loss, {x: np.zeros((2, 10), np.float32)})
