"""flowc's vectorizable float32 exp (``vexpf`` in codegen_templates/c/math_helpers.c.j2), used
for f32 Exp and Sigmoid in elementwise and fused kernels: within 2 ulp of the correctly
rounded exp over the whole float range (subnormal results included), and IEEE special values
(NaN, +-Inf, overflow to +Inf, underflow to 0) exactly."""
import numpy as np
import pytest

import dsl as fl
from oracle import NO_FOLDING, check_against_interpreter

MAX_ULP = 2


def exact_exp_f32(x: np.ndarray) -> np.ndarray:
    """exp rounded once to float32 (float64 exp is far more accurate than float32 needs)."""
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(x.astype(np.float64)).astype(np.float32)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Floats between a and b (for non-negative finite or +Inf floats: their bit patterns)."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def sweep_inputs() -> np.ndarray:
    """Every float of exp's interesting range at a fine step, random floats of every
    exponent, the overflow and underflow edges, and inputs whose result is subnormal."""
    rng = np.random.default_rng(7)
    dense = np.linspace(-104.0, 89.0, 2_000_003, dtype=np.float32)
    bits = rng.integers(0, 2**31 - 1, 1_000_000, dtype=np.int64).astype(np.int32)
    anything = bits.view(np.float32)
    anything = anything[np.isfinite(anything)]
    signed = np.concatenate([anything, -anything])
    over = np.float32(88.72283935546875)          # first float whose exp overflows
    edges = [np.nextafter(over, np.float32(0)), over, np.float32(-87.33654),
             np.float32(-103.27893), np.float32(-103.97208), np.float32(-103.972084)]
    edge_steps = np.concatenate([e + np.arange(-200, 200, dtype=np.float32) * np.spacing(e)
                                 for e in map(np.float32, edges)]).astype(np.float32)
    small = np.array([0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 1e-7, -1e-7,
                      np.finfo(np.float32).max, -np.finfo(np.float32).max], np.float32)
    return np.concatenate([dense, signed, edge_steps, small]).astype(np.float32)


def run_exp(values: np.ndarray) -> np.ndarray:
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        y = fl.exp(x)
    with fl.Session(graph=g, backend="c", options=NO_FOLDING) as sess:
        return sess.run(y, {x: values})


def test_exp_is_within_two_ulp_over_the_float_range():
    x = sweep_inputs()
    got = run_exp(x)
    want = exact_exp_f32(x)
    assert got.dtype == np.float32
    assert np.all(np.isfinite(got) == np.isfinite(want)), x[np.isfinite(got) != np.isfinite(want)]
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_ULP, f"exp({x[worst]!r}) = {got[worst]!r}, expected {want[worst]!r}"
    # results that are subnormal floats are among those checked
    tiny = np.finfo(np.float32).tiny
    assert np.count_nonzero((want > 0) & (want < tiny)) > 1000


def test_exp_special_values():
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72283, 88.72283935546875,
                  89.0, 100.0, 1e30, -104.0, -110.0, -1e30, -np.finfo(np.float32).max],
                 np.float32)
    got = run_exp(x)
    assert np.isnan(got[0]) and np.isnan(got[1])
    assert got[2] == np.inf and got[3] == 0.0
    assert got[4] == 1.0 and got[5] == 1.0
    assert np.isfinite(got[6]) and got[6] == exact_exp_f32(x[6:7])[0]
    assert np.all(got[7:11] == np.inf)
    assert np.all(got[11:] == 0.0) and not np.any(np.signbit(got[11:]))


def test_sigmoid_and_fused_exp_match_the_interpreter_with_special_values(rng):
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.0, -88.0, 100.0, -100.0,
                        1e-40, -1e-40, 20.0, -20.0], np.float32)
    values = np.concatenate([special, rng.uniform(-30, 30, 4096).astype(np.float32)])
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        fetches = {"sigmoid": fl.sigmoid(x),
                   "fused": fl.nn.relu(x * 1.5 + 0.5) * fl.sigmoid(x),
                   "exp_chain": fl.exp(x * 0.5) - 1.0}
    got = check_against_interpreter(g, fetches, {x: values})
    assert np.isnan(got["sigmoid"][0])
    assert got["sigmoid"][1] == 1.0 and got["sigmoid"][2] == 0.0


@pytest.mark.cpu_only
def test_sigmoid_is_within_two_ulp_over_the_float_range():
    """f32 Sigmoid has a helper of its own (exp(-|x|), never overflowing): over exp's sweep,
    both signs, every result is within 2 ulp of the correctly rounded sigmoid, tiny results
    (subnormals near x = -100) included."""
    x = sweep_inputs()
    x = np.concatenate([x, -x])
    g = fl.Graph()
    with g.as_default():
        p = fl.placeholder(fl.float32, [None], name="x")
        y = fl.sigmoid(p)
    with fl.Session(graph=g, backend="c", options=NO_FOLDING) as sess:
        got = sess.run(y, {p: x})
    with np.errstate(over="ignore", under="ignore"):
        want = (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_ULP, f"sigmoid({x[worst]!r}) = {got[worst]!r}, expected {want[worst]!r}"
    tiny = np.finfo(np.float32).tiny
    assert np.count_nonzero((want > 0) & (want < tiny)) > 1000
