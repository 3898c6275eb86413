"""With FLOWC_NUM_THREADS > 1 a large gemm is cut into blocks of rows (or of columns, when it
has more) over flowc's OpenMP threads, OpenBLAS on one thread (``gemm_parallel.c.j2``). Every
split, with every transpose, in MatMul, the bias-add and SGD-update gemms and a convolution,
equals the interpreter; one thread and two give the same results. (FLOWC_GEMM_ENGINE=blas
here: where oneDNN is installed its sgemm takes these products, test_gemm_onednn.py.)"""
import itertools

import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter, train_per_thread_count

# m * n * k at least 2^20 (cut) with more rows, more columns, an odd split; and one below.
SHAPES = [(301, 65, 70), (65, 301, 70), (257, 257, 17), (20, 30, 40)]
TOL = dict(rtol=2e-5, atol=2e-5)


@pytest.fixture(autouse=True)
def _openblas_gemms(monkeypatch):
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "blas")


@pytest.mark.parametrize("threads", ["2", "3"])
def test_cut_gemms_match_the_interpreter(graph, rng, monkeypatch, threads):
    monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
    fetches = {}
    for (m, n, k), (ta, tb) in itertools.product(SHAPES, itertools.product([False, True], repeat=2)):
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        name = f"{m}x{n}x{k}_{int(ta)}{int(tb)}"
        product = fl.matmul(fl.constant(a), fl.constant(b), transpose_a=ta, transpose_b=tb)
        fetches["mm_" + name] = product * 1.0
        fetches["bias_" + name] = product + fl.constant(rng.standard_normal(n).astype(np.float32))
    x = fl.constant(rng.standard_normal((4, 12, 12, 3)).astype(np.float32))
    w = fl.constant(rng.standard_normal((5, 5, 3, 40)).astype(np.float32))
    fetches["conv"] = fl.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
    check_against_interpreter(graph, fetches, {}, **TOL)


def test_a_cut_sgd_update_trains_like_one_thread(graph, rng, monkeypatch):
    x = fl.placeholder(fl.float32, [None, 300], name="x")
    w = fl.Variable(rng.standard_normal((300, 200)).astype(np.float32) * 0.05, name="w")
    loss = fl.reduce_mean(fl.square(fl.matmul(x, w)))
    step = fl.train.GradientDescentOptimizer(0.01).minimize(loss)
    feed = {x: rng.standard_normal((64, 300)).astype(np.float32)}
    results = train_per_thread_count(graph, monkeypatch, loss, step, feed, [w])
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    np.testing.assert_allclose(results[0][1][0], results[1][1][0], rtol=1e-5, atol=1e-6)
