"""flowc's vectorizable float32 expm1, tanh, erf, log and log1p (``vexpm1f``, ``vtanhf``,
``verff``, ``vlogf``, ``vlog1pf`` in codegen_templates/c/math_helpers.c.j2), which replace the
libm calls of f32 elementwise and fused kernels: each compiled op is within MAX_ULP of the
correctly rounded result (float64 numpy, rounded once) over dense sweeps of its range and
random floats of every exponent, and returns IEEE special values (NaN, +-Inf, +-0, subnormal
inputs, overflow and underflow) as libm does. float64 kernels keep libm."""
import math

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph
from oracle import NO_FOLDING, check_against_interpreter

MAX_ULP = 2
F32 = np.float32


def ordered(x: np.ndarray) -> np.ndarray:
    """float32 values as integers in the order of the floats (+0 and -0 both 0), so the
    difference of two is the number of floats between them."""
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    both_nan = np.isnan(got) & np.isnan(want)
    d = np.abs(ordered(got) - ordered(want))
    return np.where(both_nan, 0, np.where(np.isnan(got) | np.isnan(want), 1 << 40, d))


def erf64(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


# name: (dsl function, float64 reference, the dense range of the sweep)
FUNCTIONS = {
    "expm1": (fl.expm1, np.expm1, (-20.0, 89.0)),
    "tanh": (fl.tanh, np.tanh, (-10.0, 10.0)),
    "erf": (fl.erf, erf64, (-4.5, 4.5)),
    "log": (fl.log, np.log, (0.0, 4.0)),
    "log1p": (fl.log1p, np.log1p, (-1.0, 4.0)),
}


def run(fn, values: np.ndarray) -> np.ndarray:
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        y = fn(x)
    with fl.Session(graph=g, backend="c", options=NO_FOLDING) as sess:
        return sess.run(y, {x: values})


def reference(ref, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return ref(x.astype(np.float64)).astype(F32)


def sweep(lo: float, hi: float) -> np.ndarray:
    """A dense sweep of [lo, hi], random floats of every exponent with both signs, and the
    floats around 0 (subnormals) and around 1."""
    rng = np.random.default_rng(11)
    dense = np.linspace(lo, hi, 2_000_003, dtype=F32)
    bits = rng.integers(0, 0x7F800000, 500_000, dtype=np.int64).astype(np.int32)
    anything = bits.view(F32)
    near = np.concatenate([np.arange(0, 20_000, dtype=np.int32).view(F32),
                           F32(1) + np.arange(-3000, 3000, dtype=F32) * np.spacing(F32(1))])
    return np.concatenate([dense, anything, -anything, near, -near]).astype(F32)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_within_max_ulp_over_the_float_range(name):
    fn, ref, (lo, hi) = FUNCTIONS[name]
    x = sweep(lo, hi)
    got = run(fn, x)
    want = reference(ref, x)
    assert got.dtype == np.float32
    d = ulps(got, want)
    worst = int(np.argmax(d))
    assert d.max() <= MAX_ULP, (f"{name}({x[worst]!r}) = {got[worst]!r}, "
                                f"expected {want[worst]!r} ({d[worst]} ulp)")


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40,
                    1e-30, -1e-30, 1.0, -1.0, 0.5, -0.5, 88.7, 88.75, 89.0, 100.0, -17.0, -18.0,
                    -30.0, -100.0, 3.9, 4.0, -4.0, 9.0, 9.2, -9.2, 15.0, 1e30, -1e30,
                    np.finfo(F32).max, -np.finfo(F32).max], F32)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_special_values_as_libm(name):
    """NaN, infinities, signed zeros, subnormals, overflow and the saturation edges: the
    same class as the correctly rounded result (NaN, Inf, zero), infinities and zeros
    exactly with their signs, and the rest within MAX_ULP."""
    fn, ref, _ = FUNCTIONS[name]
    got = run(fn, SPECIAL)
    want = reference(ref, SPECIAL)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)
    exact = np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(got[exact], want[exact], err_msg=name)
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(want[exact]), err_msg=name)
    assert ulps(got, want).max() <= MAX_ULP, name


def test_exact_cases():
    assert run(fl.tanh, np.array([np.inf, -np.inf, 10.0, -10.0], F32)).tolist() == [1, -1, 1, -1]
    assert run(fl.erf, np.array([np.inf, -np.inf, 4.0, -5.0], F32)).tolist() == [1, -1, 1, -1]
    assert run(fl.log, np.array([1.0, 0.0, -1.0], F32))[:2].tolist() == [0, -np.inf]
    assert np.isnan(run(fl.log, np.array([-1.0], F32))[0])
    assert np.isnan(run(fl.log1p, np.array([-2.0], F32))[0])
    assert run(fl.log1p, np.array([-1.0], F32))[0] == -np.inf
    assert run(fl.expm1, np.array([-np.inf, 89.0], F32)).tolist() == [-1, np.inf]


def _source(build, dtype):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(dtype, [4, 64], name="x")
        y = build(x)
    step = make_step_graph(g, [x.output], [y.output])
    return emit_c(step.graph, step.feeds, step.retvals).source


@pytest.mark.parametrize("build, helper, libm", [
    (fl.tanh, "flowc_vtanhf(", "tanhf("),
    (fl.erf, "flowc_verff(", "erff("),
    (fl.log, "flowc_vlogf(", "logf("),
    (fl.nn.elu, "flowc_vexpm1f(", "expm1f("),
    (fl.nn.softplus, "flowc_vlog1pf(", "log1pf("),
    (fl.nn.softmax, "flowc_vexpf(", "expf("),
])
def test_float32_kernels_call_the_helpers_and_float64_keeps_libm(build, helper, libm):
    f32 = _source(build, fl.float32)
    assert helper in f32 and f" {libm}" not in f32 and f"({libm}" not in f32
    f64 = _source(build, fl.float64)
    assert helper not in f64 and libm[:-2] + "(" in f64


def test_fused_and_activation_kernels_match_the_interpreter(rng):
    """Gelu (erf and tanh forms), Elu, Selu, Softplus, Softmax, LogSoftmax and a fused chain of
    the new functions, with special values, against the reference interpreter."""
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 20.0, -20.0,
                        90.0, -90.0], F32)
    values = np.concatenate([special, rng.uniform(-12, 12, 4096).astype(F32)])
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        fetches = {"gelu": fl.nn.gelu(x), "gelu_tanh": fl.nn.gelu(x, approximate=True),
                   "elu": fl.nn.elu(x), "selu": fl.nn.selu(x), "softplus": fl.nn.softplus(x),
                   "chain": fl.tanh(x * 0.5) * fl.erf(x) + fl.log1p(fl.abs(x)),
                   "log_abs": fl.log(fl.abs(x) + 1e-3)}
        fetches["softmax"] = fl.nn.softmax(fl.reshape(x[11:11 + 64 * 37], [37, 64]))
        fetches["log_softmax"] = fl.nn.log_softmax(fl.reshape(x[11:11 + 13 * 315], [13, 315]))
    got = check_against_interpreter(g, fetches, {x: values})
    assert np.isnan(got["gelu"][0]) and got["gelu"][1] == np.inf   # (-inf: NaN, as TF)
    assert got["elu"][2] == -1 and np.signbit(got["elu"][4])
