"""float32 matrix products on oneDNN's sgemm (gemm_parallel.c.j2's ``_dnnl`` twin, chosen by
c_ops/gemm_engine.py) where oneDNN is installed: MatMul with every transpose, BatchMatMulV2
with broadcast batch dims, Einsum, the bias-add, accumulate and SGD-update gemms equal the
interpreter (the oracle) on one thread and on two, over several runs with new inputs; a
product whose dims are known only at run time is checked against the threshold then (a tiny
one on OpenBLAS, a large one on oneDNN, the same code); under ``auto`` tiny static products,
float64 and one-row products stay on OpenBLAS; ``blas`` keeps every product there."""
import itertools
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen import onednn
from compiler.codegen.c_ops import gemm_engine
from compiler.codegen.emitter import emit_c
from compiler.errors import CompileError
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter

pytestmark = pytest.mark.skipif(not onednn.available(),
                                reason="oneDNN is not installed (the onednn-cpu-gomp wheels, "
                                "or FLOWC_ONEDNN_ROOT)")
TOL = dict(rtol=1e-4, atol=1e-4)
# (m, n, k): square, tall, wide, the LSTM's recurrent shape, a few rows, odd sizes
SHAPES = [(32, 32, 32), (130, 17, 33), (7, 96, 40), (32, 512, 128), (3, 64, 64), (65, 3, 129)]
TRANSPOSES = list(itertools.product([False, True], repeat=2))


def _source(graph, fetches, feeds=()) -> str:
    step = make_step_graph(graph, [f.output for f in feeds],
                           [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    return emit_c(step.graph, step.feeds, step.retvals).source


def _dnnl_calls(source: str) -> int:
    return len(re.findall(r"\bflowc_gemm_f32_dnnl\(", source)) - (
        1 if "static void flowc_gemm_f32_dnnl(" in source else 0)


def _operands(rng, m, n, k, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


def _products(rng):
    """Fed operands (a new value each run), every kind of float32 gemm."""
    fetches, feed = {}, {}

    def fed(value, name):
        p = fl.placeholder(fl.float32, value.shape, name=name)
        feed[p] = value
        return p
    for (m, n, k), (ta, tb) in itertools.product(SHAPES, TRANSPOSES):
        name = f"{m}x{n}x{k}_{int(ta)}{int(tb)}"
        a, b = _operands(rng, m, n, k, ta, tb)
        a, b = fed(a, "a" + name), fed(b, "b" + name)
        product = fl.matmul(a, b, transpose_a=ta, transpose_b=tb)
        fetches["mm_" + name] = product * 1.0
        fetches["bias_" + name] = product + fl.constant(rng.standard_normal(n).astype(np.float32))
        acc = fl.constant(rng.standard_normal((m, n)).astype(np.float32)) * 2.0
        fetches["acc_" + name] = fl.raw_ops._MatMulAccumulate(acc=acc, a=a, b=b, transpose_a=ta,
                                                             transpose_b=tb)
    # batch dims: both batched; b broadcast (folded into one gemm's rows); a broadcast
    x = fed(rng.standard_normal((3, 4, 20, 24)).astype(np.float32), "x")
    y = fed(rng.standard_normal((3, 4, 24, 36)).astype(np.float32), "y")
    w = fed(rng.standard_normal((24, 36)).astype(np.float32), "w")
    v = fed(rng.standard_normal((1, 4, 36, 24)).astype(np.float32), "v")
    fetches["bmm"] = fl.matmul(x, y)
    fetches["bmm_folded"] = fl.matmul(x, w)
    fetches["bmm_broadcast_adj"] = fl.matmul(y, v, adjoint_a=True, adjoint_b=True)
    fetches["einsum"] = fl.einsum("bhij,bhjk->bhik", x, y)
    fetches["einsum_t"] = fl.einsum("bhij,kj->bhik", x, fl.transpose(w))
    return fetches, feed


@pytest.mark.cpu_only
@pytest.mark.parametrize("threads", [None, "2"], ids=["default", "two_threads"])
def test_products_run_on_onednn_and_match_the_interpreter(graph, rng, monkeypatch, threads):
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "onednn")
    if threads:
        monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
    fetches, feed = _products(rng)
    source = _source(graph, fetches, list(feed))
    assert "dnnl_sgemm(" in source
    # every gemm of the MatMul, bias and accumulate kernels, the batched ones and Einsum's
    assert _dnnl_calls(source) >= len(SHAPES) * len(TRANSPOSES) + 2
    check_against_interpreter(graph, fetches, feed, **TOL)
    with fl.Session(graph=graph) as sess:                 # later runs, new inputs
        for _ in range(2):
            for t in list(feed):
                feed[t] = rng.standard_normal(feed[t].shape).astype(np.float32)
            got = sess.run(fetches, feed)
            with fl.Session(graph=graph, backend="interpreter") as ref:
                want = ref.run(fetches, feed)
            for k in fetches:
                np.testing.assert_allclose(got[k], want[k], err_msg=k, **TOL)


@pytest.mark.cpu_only
def test_an_sgd_update_on_onednn_trains_like_the_interpreter(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "onednn")
    x = fl.placeholder(fl.float32, [None, 48], name="x")
    w = fl.Variable(rng.standard_normal((48, 40)).astype(np.float32) * 0.1, name="w")
    loss = fl.reduce_mean(fl.square(fl.matmul(x, w) - 1.0))
    step = fl.train.GradientDescentOptimizer(0.05).minimize(loss)
    feed = {x: rng.standard_normal((64, 48)).astype(np.float32)}
    results = []
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(fl.global_variables_initializer())
            for _ in range(3):
                s.run(step, feed)
            results.append(s.run([w, loss], feed))
    for want, got in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.cpu_only
def test_dims_known_at_run_time_are_checked_against_the_threshold_then(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "auto")
    x = fl.placeholder(fl.float32, [None, 24], name="x")
    w = fl.constant(rng.standard_normal((24, 40)).astype(np.float32))
    y = fl.matmul(x, w) + 0.5
    assert _dnnl_calls(_source(graph, {"y": y}, [x])) >= 1
    assert f">= {gemm_engine.MIN_WORK}.0" in _source(graph, {"y": y}, [x])
    with fl.Session(graph=graph) as sess:
        for rows in (2, 300, 3):        # 1,920 multiply-adds: OpenBLAS; 288,000: oneDNN
            feed = {x: rng.standard_normal((rows, 24)).astype(np.float32)}
            with fl.Session(graph=graph, backend="interpreter") as ref:
                want = ref.run(y, feed)
            np.testing.assert_allclose(sess.run(y, feed), want, **TOL)


def test_the_engine_is_chosen_per_product(graph, rng, monkeypatch):
    def f32(*shape):
        return fl.constant(rng.standard_normal(shape).astype(np.float32))
    x = fl.placeholder(fl.float32, [64, 64], name="x")
    fetches = {"big": fl.matmul(x, f32(64, 64)),                 # 262,144 multiply-adds
               "tiny": fl.matmul(f32(8, 8), f32(8, 8)) * x[:8, :8],     # 512
               "row": fl.matmul(x[:1], f32(64, 256)),            # one row: gemv
               "f64": fl.cast(fl.matmul(fl.cast(x, fl.float64),
                                        fl.constant(np.eye(64))), fl.float32)}
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "auto")
    source = _source(graph, fetches, [x])
    assert "dnnl_sgemm(" in source
    # tiny's helper on OpenBLAS; big's and row's on the oneDNN twin (16,384 multiply-adds;
    # a one-row product still calls gemv first); f64's on OpenBLAS
    assert set(re.findall(r"static inline void (flowc_matmul_\w+)\(", source)) == {
        "flowc_matmul_f32_nn", "flowc_matmul_f32_nn_dnnl", "flowc_matmul_f64_nn"}
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "blas")
    assert "dnnl" not in _source(graph, fetches, [x])
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "fastest")
    with pytest.raises(CompileError, match="FLOWC_GEMM_ENGINE must be one of"):
        _source(graph, fetches, [x])
    monkeypatch.setenv("FLOWC_GEMM_ENGINE", "onednn")
    monkeypatch.setenv("FLOWC_ONEDNN_ROOT", "0")                 # oneDNN not found: OpenBLAS
    assert "dnnl" not in _source(graph, fetches, [x])
