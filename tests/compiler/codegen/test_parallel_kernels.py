"""Large elementwise, fused and reduction kernels are split across cores with OpenMP; small
ones stay on the calling thread. Checked against the interpreter just below and well above
the threshold (static and run-time shapes), with special values, and between 1 and several
threads (FLOWC_NUM_THREADS, read by the kernels at each run).

Elementwise and fused kernels compute each element the same way whatever the number of
threads, so their results are compared bit for bit. Reductions reassociate float additions
compared with the interpreter (numpy's pairwise sums), so those comparisons take a tolerance;
between thread counts they are bit-identical too, because a long row is cut into chunks of a
fixed size (not one per thread) and the partial results are combined in order.
"""
import os

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.parallel import parallel_min_elements, reduction_chunk
from compiler.step import make_step_graph, optimize, write_artifact
from oracle import NO_FOLDING, check_against_interpreter
from runtime.errors import RuntimeExecutionError

THRESHOLD = parallel_min_elements()
SIZES = {"below": THRESHOLD - 1, "above": 3 * THRESHOLD + 7}
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 88.0, -88.0, 100.0,
                    -100.0, np.finfo(np.float32).max], np.float32)


def with_special(rng, n: int) -> np.ndarray:
    values = rng.uniform(-6, 6, n).astype(np.float32)
    values[:len(SPECIAL)] = SPECIAL
    values[-len(SPECIAL):] = SPECIAL
    return values


def elementwise_graph(n: int, static: bool):
    """Flat, broadcast (nested loops), fused and checked-integer kernels over ``n`` elements."""
    cols = 64
    rows = n // cols
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [n if static else None], name="x")
        m = fl.placeholder(fl.float32, [rows if static else None, cols], name="m")
        b = fl.placeholder(fl.float32, [cols], name="b")
        k = fl.placeholder(fl.int32, [n if static else None], name="k")
        fetches = {"mul": x * 1.5, "exp": fl.exp(x), "sigmoid": fl.sigmoid(x),
                   "fused_chain": fl.nn.relu(x * 1.5 + 0.5) * fl.sigmoid(x),
                   "broadcast": m * b - b, "floordiv": fl.floordiv(k, 3)}
    return g, (x, m, b, k), fetches


def elementwise_feed(rng, inputs, n: int):
    x, m, b, k = inputs
    cols = 64
    return {x: with_special(rng, n),
            m: with_special(rng, (n // cols) * cols).reshape(-1, cols),
            b: rng.uniform(-2, 2, cols).astype(np.float32),
            k: rng.integers(-1000, 1000, n).astype(np.int32)}


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_elementwise_and_fused_match_the_interpreter(rng, size, static):
    n = SIZES[size]
    g, inputs, fetches = elementwise_graph(n, static)
    got = check_against_interpreter(g, fetches, elementwise_feed(rng, inputs, n))
    assert np.isnan(got["mul"][0]) and np.isnan(got["fused_chain"][0])
    assert got["sigmoid"][1] == 1.0 and got["sigmoid"][2] == 0.0


def reduction_graph(n: int, static: bool):
    cols = 1024
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [n if static else None], name="x")
        m = fl.placeholder(fl.float32, [(n // cols) if static else None, cols], name="m")
        fetches = {"sum": fl.reduce_sum(x), "mean": fl.reduce_mean(x), "max": fl.reduce_max(x),
                   "min": fl.reduce_min(x), "row_sums": fl.reduce_sum(m, axis=1),
                   "row_max": fl.reduce_max(m, axis=1), "col_sums": fl.reduce_sum(m, axis=0)}
    return g, x, m, fetches


@pytest.mark.parametrize("size", ["below", "above", "chunks"])
@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_reductions_match_the_interpreter(rng, size, static):
    n = {"chunks": 2 * reduction_chunk() + 5, **SIZES}[size]
    n -= n % 1024
    g, x, m, fetches = reduction_graph(n, static)
    xv = rng.uniform(0, 1, n).astype(np.float32)       # no cancellation: a relative tolerance
    mv = rng.uniform(0, 1, n).astype(np.float32).reshape(-1, 1024)
    check_against_interpreter(g, fetches, {x: xv, m: mv}, rtol=1e-5, atol=1e-6)


def test_reductions_propagate_nan_and_inf_above_the_threshold(rng):
    n = SIZES["above"]
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [n], name="x")
        y = fl.placeholder(fl.float32, [n], name="y")
        fetches = {"sum_nan": fl.reduce_sum(x), "max_nan": fl.reduce_max(x),
                   "sum_inf": fl.reduce_sum(y), "max_inf": fl.reduce_max(y)}
    xv = rng.uniform(0, 1, n).astype(np.float32)
    xv[n - 3] = np.nan
    yv = rng.uniform(0, 1, n).astype(np.float32)
    yv[n // 2] = np.inf
    got = check_against_interpreter(g, fetches, {x: xv, y: yv}, rtol=1e-5, atol=1e-6)
    assert np.isnan(got["sum_nan"]) and np.isnan(got["max_nan"])
    assert got["sum_inf"] == np.inf and got["max_inf"] == np.inf


def run_with_threads(monkeypatch, threads: int, sess, fetches, feed):
    monkeypatch.setenv("FLOWC_NUM_THREADS", str(threads))
    return sess.run(fetches, feed)


def test_one_thread_and_many_give_identical_results(rng, monkeypatch):
    n = SIZES["above"]
    g, inputs, fetches = elementwise_graph(n, static=False)
    with g.as_default():
        x, m = inputs[0], inputs[1]
        fetches.update({"sum": fl.reduce_sum(x), "row_sums": fl.reduce_sum(m, axis=1),
                        "mean": fl.reduce_mean(m)})
    feed = elementwise_feed(rng, inputs, n)
    feed[x] = np.abs(feed[x])
    names = list(fetches)
    with fl.Session(graph=g, backend="c") as sess:
        one = run_with_threads(monkeypatch, 1, sess, [fetches[k] for k in names], feed)
        for threads in (2, 3, 8):
            many = run_with_threads(monkeypatch, threads, sess, [fetches[k] for k in names], feed)
            for name, a, b in zip(names, one, many):
                np.testing.assert_array_equal(a, b, err_msg=f"{name}, {threads} threads")


def test_a_data_error_in_a_parallel_loop_is_reported(rng):
    n = SIZES["above"]
    g = fl.Graph()
    with g.as_default():
        k = fl.placeholder(fl.int32, [None], name="k")
        d = fl.placeholder(fl.int32, [None], name="d")
        q = fl.floordiv(k, d)
    kv = rng.integers(-100, 100, n).astype(np.int32)
    dv = np.ones(n, np.int32)
    with fl.Session(graph=g, backend="c", options=NO_FOLDING) as sess:
        np.testing.assert_array_equal(sess.run(q, {k: kv, d: dv}), kv)
        dv[n - 10] = 0
        with pytest.raises(RuntimeExecutionError, match="zero"):
            sess.run(q, {k: kv, d: dv})


def generated_source(g, feeds, fetches, folder) -> str:
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, NO_FOLDING)
    path = write_artifact(step, os.path.join(folder, g.name))
    with open(os.path.join(path, "cpu_0.c")) as f:
        return f.read()


def test_only_loops_that_can_be_large_are_parallel(tmp_path):
    small, large = fl.Graph("small"), fl.Graph("large")
    with small.as_default():
        xs = fl.placeholder(fl.float32, [THRESHOLD - 1], name="x")
        ys = [fl.sigmoid(xs), fl.reduce_sum(xs)]
    with large.as_default():
        xl = fl.placeholder(fl.float32, [None], name="x")
        yl = [fl.sigmoid(xl), fl.reduce_sum(xl)]
    small_src = generated_source(small, [xs], ys, str(tmp_path))
    large_src = generated_source(large, [xl], yl, str(tmp_path))
    assert "#pragma omp" not in small_src
    assert large_src.count("#pragma omp parallel for") == 2
    assert f">= {THRESHOLD})" in large_src                # decided at run time
    for src in (small_src, large_src):                   # the vectorizable sigmoid, not libm
        assert "flowc_math_sigmoid_f32(" in src and "expf(" not in src
