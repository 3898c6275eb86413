"""Matrix products with one output row or column (the gemv path of the MatMul kernel),
compiled against the numpy interpreter: every transpose combination, f32 and f64, static and
dynamic dims, and batched products whose matrices have one row."""
from __future__ import annotations

import itertools

import numpy as np

import dsl as fl
from tests.oracle import check_against_interpreter

SIZES = [(1, 7, 5), (6, 1, 5), (1, 1, 9), (1, 9, 1), (4, 3, 1), (1, 300, 70)]    # (m, n, k)


def _operands(rng, m, n, k, ta, tb, dtype):
    a = rng.uniform(-2, 2, (k, m) if ta else (m, k)).astype(dtype)
    b = rng.uniform(-2, 2, (n, k) if tb else (k, n)).astype(dtype)
    return a, b


def test_one_row_or_column_products_match_the_interpreter():
    rng = np.random.default_rng(0)
    g = fl.Graph()
    fetches, feed = {}, {}
    with g.as_default():
        for dtype, (m, n, k), ta, tb in itertools.product(
                (np.float32, np.float64), SIZES, (False, True), (False, True)):
            a, b = _operands(rng, m, n, k, ta, tb, dtype)
            fl_dtype = fl.float32 if dtype == np.float32 else fl.float64
            static_a = fl.placeholder(fl_dtype, a.shape)
            dynamic_b = fl.placeholder(fl_dtype, [None, None])
            feed[static_a], feed[dynamic_b] = a, b
            name = f"{np.dtype(dtype).name}_{m}x{n}x{k}_{int(ta)}{int(tb)}"
            fetches[name] = fl.matmul(static_a, dynamic_b, transpose_a=ta, transpose_b=tb)
            fetches[name + "_const"] = fl.matmul(fl.constant(a), fl.constant(b),
                                                 transpose_a=ta, transpose_b=tb)
    got = check_against_interpreter(g, fetches, feed)
    assert got["float32_1x300x70_00"].shape == (1, 300)


def test_batched_products_of_single_rows_match_the_interpreter():
    rng = np.random.default_rng(1)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [3, 1, 8])
        y = fl.placeholder(fl.float32, [3, 8, 5])
        col = fl.placeholder(fl.float32, [3, 8, 1])
        fetches = {"rows": fl.matmul(x, y), "cols": fl.matmul(y, col, transpose_a=True),
                   "row_col": fl.matmul(x, col)}
    feed = {x: rng.uniform(-1, 1, (3, 1, 8)).astype(np.float32),
            y: rng.uniform(-1, 1, (3, 8, 5)).astype(np.float32),
            col: rng.uniform(-1, 1, (3, 8, 1)).astype(np.float32)}
    check_against_interpreter(g, fetches, feed)

