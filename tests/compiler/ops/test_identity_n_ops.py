"""IdentityN (TensorFlow's raw op, what tf.custom_gradient writes): compiled C against the
numpy interpreter for tensors of different dtypes and fed shapes, an empty one, and an
IdentityN whose outputs feed further ops."""
import numpy as np

import dsl as fl
from oracle import check_against_interpreter


def test_identity_n_returns_its_inputs(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    i = fl.placeholder(fl.int64, [None], name="i")
    b = fl.placeholder(fl.bool_, [2], name="b")
    a, j, c = fl.apply_op("IdentityN", [[x, i, b]])
    assert a.shape == (None, 3) and j.dtype == fl.int64 and c.dtype == fl.bool_
    fetches = {"a": a, "j": j, "c": c, "after": a * 2.0 + 1.0, "sum": fl.reduce_sum(j)}
    for rows in (4, 0):
        xv = rng.standard_normal((rows, 3)).astype(np.float32)
        iv = rng.integers(-5, 5, rows).astype(np.int64)
        bv = np.array([True, False])
        got = check_against_interpreter(graph, fetches, {x: xv, i: iv, b: bv})
        np.testing.assert_array_equal(got["a"], xv)
        np.testing.assert_array_equal(got["j"], iv)
        np.testing.assert_array_equal(got["c"], bv)
