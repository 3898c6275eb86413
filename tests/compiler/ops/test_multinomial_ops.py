"""Multinomial (compiler/ops/multinomial.py): compiled C draws the same indices as the numpy
reference (f32/f64/int logits, fed shapes, -inf and NaN logits, int32/int64 outputs), each run
draws new indices and a seed gives the same ones in a new session, the frequencies follow
softmax(logits), fl.random.categorical / fl.multinomial, and the errors TF raises.
"""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from oracle import NO_FOLDING
from runtime.errors import RuntimeExecutionError


def run_both(graph, fetches, feed=None, runs=1):
    out = {}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend, options=NO_FOLDING) as s:
            out[backend] = [s.run(fetches, feed or {}) for _ in range(runs)]
    return out["interpreter"], out["c"]


def test_c_draws_the_reference_indices(graph):
    logits = fl.placeholder(fl.float32, [None, None], name="logits")
    n = fl.placeholder(fl.int32, [], name="n")
    ninf = -np.inf
    fetches = [
        fl.apply_op("Multinomial", [logits, n], {"seed": 3, "seed2": 4}),
        fl.apply_op("Multinomial", [fl.cast(logits, fl.float64), n],
                    {"seed": 3, "seed2": 5, "output_dtype": fl.int32}),
        fl.apply_op("Multinomial", [fl.constant([[1, 2, 3, 0]] * 3), fl.constant(9)],
                    {"seed": 1, "seed2": 1}),
        fl.apply_op("Multinomial", [fl.cast(logits, fl.float16), n], {"seed": 8, "seed2": 1}),
    ]
    rng = np.random.default_rng(0)
    for shape, count in (((5, 7), 13), ((1, 3), 1), ((3, 2), 0), ((0, 4), 5)):
        lg = rng.normal(size=shape).astype(np.float32)
        if shape == (5, 7):
            lg[1, 3] = ninf
            lg[2, :] = ninf                        # total 0: TF gives num_classes
            lg[3, 0] = np.nan                      # non-finite logits add nothing
        want, got = run_both(graph, fetches, {logits: lg, n: count}, runs=2)
        for w_run, g_run in zip(want, got):
            for w, g in zip(w_run, g_run):
                assert w.dtype == g.dtype and w.shape == g.shape
                np.testing.assert_array_equal(g, w)
        assert got[0][0].shape == (shape[0], count) and got[0][1].dtype == np.int32
        assert got[0][0].dtype == np.int64
        if shape == (5, 7):
            assert np.all(got[0][0][2] == 7)
            assert not np.any(got[0][0][1] == 3) and not np.any(got[0][0][3] == 0)
            assert not np.array_equal(got[0][0], got[1][0])    # each run draws anew
        assert np.all((got[0][2] >= 0) & (got[0][2] < 4))


def test_seed_gives_the_same_draws_in_a_new_session(graph):
    lg = fl.constant([[0.0, 1.0, 2.0, 3.0]])
    a = fl.random.categorical(lg, 50, seed=11)
    b = fl.random.categorical(lg, 50, seed=12)
    runs = []
    for _ in range(2):
        with fl.Session(graph=graph, backend="c") as s:
            runs.append(s.run([a, b]))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][0], runs[0][1])
    assert a.op.get_attr("seed2") == 11 and a.shape.as_list() == [1, 50]


def test_frequencies_follow_softmax(graph):
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.25, 0.05]])
    with np.errstate(divide="ignore"):
        lg = np.log(probs) + np.array([[3.0], [-40.0]])      # any shift of a row: same softmax
    n = 100_000
    s = fl.multinomial(fl.constant(lg), n, seed=2)
    with fl.Session(graph=graph, backend="c") as sess:
        draws = sess.run(s)
    for row, p in zip(draws, probs):
        freq = np.bincount(row, minlength=4) / n
        # 5 standard errors of a binomial proportion at n draws
        assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-12), (freq, p)


def test_errors(graph):
    lg = fl.placeholder(fl.float32, None, name="lg")
    n = fl.placeholder(fl.int32, [], name="n")
    m = fl.apply_op("Multinomial", [lg, n], name="draw")
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError),
                               match="num_samples should be nonnegative"):
                s.run(m, {lg: np.zeros((2, 3), np.float32), n: -1})
            with pytest.raises((ExecutionError, RuntimeExecutionError),
                               match="num_classes should be positive"):
                s.run(m, {lg: np.zeros((2, 0), np.float32), n: 3})
    with pytest.raises(ShapeError, match="logits should be a matrix"):
        fl.multinomial(fl.constant([1.0, 2.0]), 3)
    with pytest.raises(ShapeError, match="nonnegative"):
        fl.multinomial(fl.constant([[1.0, 2.0]]), -2)
    with pytest.raises(TypeError):
        fl.random.categorical(fl.constant([[1.0, 2.0]]), 2, dtype=fl.float32)
    x = fl.Variable([[1.0, 2.0]])
    assert fl.gradients(fl.cast(fl.multinomial(x, 3), fl.float32), x) == [None]
