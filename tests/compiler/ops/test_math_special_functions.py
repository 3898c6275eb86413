"""The special functions (Lgamma, Digamma, Polygamma, Zeta, Igamma, Igammac, Betainc, Erfinv,
Ndtri, BesselI0e, BesselI1e) through their TF1 API names: compiled C against the numpy
interpreter, both against TensorFlow's values recorded in ``tests/data/
special_math_reference.npz`` (``special_math_reference.py`` beside it) on edge cases (poles, 0,
negatives, +-inf, NaN, large arguments), in float64 and float32; fusion, broadcasting, halves,
Betainc's shape rule and a GraphDef that uses them."""
import math
import os

import numpy as np
import pytest

import dsl as fl
from compiler.errors import OpError, ShapeError
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "..", "data",
                         "special_math_reference.npz")
FNS = {"Lgamma": fl.lgamma, "Digamma": fl.digamma, "Erfinv": fl.erfinv, "Ndtri": fl.ndtri,
       "BesselI0e": fl.bessel_i0e, "BesselI1e": fl.bessel_i1e, "Igamma": fl.igamma,
       "Igammac": fl.igammac, "Zeta": fl.zeta, "Polygamma": fl.polygamma,
       "Betainc": fl.betainc}
# TensorFlow's double results are Cephes'; ours agree to these relative errors (incomplete
# gamma and beta lose digits in exp(a log x - lgamma(a)) for large a, both ways).
RTOL_F64 = {"Igamma": 1e-12, "Igammac": 1e-12, "Betainc": 1e-12}


def reference():
    data = np.load(REFERENCE)
    for name in FNS:
        ins = [data[f"{name}_in{i}"] for i in range(3) if f"{name}_in{i}" in data]
        yield name, ins, data[f"{name}_f64"], data[f"{name}_f32"]


def _compare(got, want, rtol, atol, what):
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN where TF has NaN"
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{what}: +-inf")
    fin = ~np.isnan(want) & ~inf
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_and_interpreter_match_tensorflow_on_edge_cases(graph, dtype):
    fetches, feeds, cases = {}, {}, {}
    fl_dtype = fl.float64 if dtype == np.float64 else fl.float32
    for name, ins, want64, want32 in reference():
        phs = []
        for i, x in enumerate(ins):
            ph = fl.placeholder(fl_dtype, [None], name=f"{name}_in{i}")
            feeds[ph] = x.astype(dtype)
            phs.append(ph)
        fetches[name] = FNS[name](*phs)
        cases[name] = (ins, want64, want32)
    got = check_against_interpreter(graph, fetches, feeds)
    for name, (ins, want64, want32) in cases.items():
        if name == "Erfinv":           # TF's erfinv(x) near 0 goes through ndtri((x+1)/2)
            keep = np.abs(ins[0]) > 1e-3
            ins, want64, want32 = [ins[0][keep]], want64[keep], want32[keep]
            g = got[name][keep]
        else:
            g = got[name]
        assert g.dtype == dtype
        if dtype == np.float64:
            _compare(g, want64, RTOL_F64.get(name, 1e-13), 1e-300, f"{name} f64")
        else:
            # computed in double and rounded once: within an ulp of the double result where
            # the float inputs are the double ones (they are, but for 0.1-like values that
            # move in rounding; those compare to TF's float32 results)
            exact = np.all([x.astype(np.float32).astype(np.float64) == x for x in ins], 0)
            exact |= np.isnan(np.stack(ins)).any(0)
            with np.errstate(over="ignore"):
                _compare(g[exact], want64[exact].astype(np.float32), 2e-7, 1e-37,
                         f"{name} f32 (exact inputs)")
            _compare(g[~exact], want32[~exact], 2e-4, 1e-6, f"{name} f32 vs TF f32")


def test_values_with_known_closed_forms(graph):
    x = fl.placeholder(fl.float64, [None])
    v = np.array([1e-10, -1e-300, 0.5, 3.0, 0.25])
    fetches = {"lgamma": fl.lgamma(x), "erfinv": fl.erfinv(x), "digamma": fl.digamma(x),
               "zeta2": fl.zeta(2.0 + 0 * x, 1.0 + 0 * x), "ndtri": fl.ndtri(x),
               "igamma1": fl.igamma(1.0, fl.abs(x)), "betainc11": fl.betainc(1.0, 1.0, x * 0 +
                                                                             0.3)}
    got = check_against_interpreter(graph, fetches, {x: v})
    # erfinv(x) = sqrt(pi)/2 (x + pi x^3 / 12 + ...): accurate to the last digits near 0
    assert got["erfinv"][0] == pytest.approx(math.sqrt(math.pi) / 2 * 1e-10, rel=1e-15)
    assert got["erfinv"][1] == pytest.approx(-math.sqrt(math.pi) / 2 * 1e-300, rel=1e-15)
    assert got["lgamma"][2] == pytest.approx(math.log(math.sqrt(math.pi)), rel=1e-15)
    assert got["lgamma"][3] == pytest.approx(math.log(2.0), rel=1e-15)
    assert got["digamma"][3] == pytest.approx(1.5 - 0.5772156649015329, rel=1e-15)
    np.testing.assert_allclose(got["zeta2"], math.pi ** 2 / 6, rtol=1e-15)
    assert got["ndtri"][2] == 0.0
    assert got["ndtri"][4] == pytest.approx(-0.6744897501960817, rel=1e-15)
    np.testing.assert_allclose(got["igamma1"], -np.expm1(-np.abs(v)), rtol=1e-13)
    np.testing.assert_allclose(got["betainc11"], 0.3, rtol=1e-15)


def test_random_values_compiled_equal_interpreter_and_broadcast(graph, rng):
    a = fl.placeholder(fl.float64, [3, 1])
    x = fl.placeholder(fl.float32, [None, 4])
    q = fl.placeholder(fl.float64, [4])
    av = rng.uniform(0.1, 30.0, (3, 1))
    xv = rng.uniform(-6.0, 6.0, (5, 4)).astype(np.float32)
    qv = rng.uniform(0.1, 50.0, 4)
    fetches = {"lgamma": fl.lgamma(x), "digamma": fl.digamma(x), "i0e": fl.bessel_i0e(x),
               "i1e": fl.bessel_i1e(x), "erfinv": fl.erfinv(x / 6.0),
               "ndtri": fl.ndtri(fl.abs(x) / 6.0), "igamma": fl.igamma(a, q),
               "igammac": fl.igammac(a, q), "zeta": fl.zeta(a + 1.0, q),
               "polygamma": fl.polygamma(fl.constant([[0.0], [1.0], [4.0]], fl.float64), q),
               "betainc": fl.betainc(fl.constant(np.full((2, 4), 2.5)), 0.5,
                                     fl.constant(rng.uniform(0, 1, (2, 4))))}
    got = check_against_interpreter(graph, fetches, {a: av, x: xv, q: qv})
    assert got["igamma"].shape == (3, 4) and got["polygamma"].shape == (3, 4)
    np.testing.assert_allclose(got["igamma"] + got["igammac"], 1.0, rtol=1e-14)


def test_special_functions_fuse_into_one_kernel(graph):
    x = fl.placeholder(fl.float32, [None, 8], name="x")
    y = (fl.lgamma(fl.abs(x) + 1.0) * 2.0 + fl.bessel_i0e(x) - fl.digamma(x * x + 0.5)
         + fl.igamma(2.0, fl.abs(x)) + fl.erfinv(x * 0.1))
    step = make_step_graph(fl.get_default_graph(), [x.output], [y.output])
    optimize(step, PipelineOptions())
    ops = [n.op for n in step.graph]
    assert ops.count("Fused") == 1, ops
    assert not {"Lgamma", "BesselI0e", "Digamma", "Igamma", "Erfinv"} & set(ops)
    xv = np.linspace(-5, 5, 64).astype(np.float32).reshape(8, 8)
    got = check_against_interpreter(graph, {"y": y}, {x: xv}, rtol=2e-6, atol=2e-6)["y"]
    v = xv.astype(np.float64)
    want = 2 * np.vectorize(math.lgamma)(np.abs(v) + 1) + np.exp(-np.abs(v)) * np.i0(v)
    assert np.isfinite(got).all() and got.shape == (8, 8)
    assert np.all(np.abs(got - want) < 30)           # the digamma, igamma, erfinv terms


@pytest.mark.parametrize("dtype", [fl.float16, fl.bfloat16])
def test_half_inputs_compute_in_float(graph, dtype):
    x = fl.placeholder(dtype, [4])
    fetches = {"lgamma": fl.lgamma(x), "erfinv": fl.erfinv(x * 0.5), "i1e": fl.bessel_i1e(x)}
    xv = np.array([0.5, 1.5, 3.0, -0.25], np.float32).astype(dtype.np)
    got = check_against_interpreter(graph, fetches, {x: xv})
    assert got["lgamma"].dtype == dtype.np
    np.testing.assert_allclose(got["lgamma"].astype(np.float32),
                               [math.lgamma(v) for v in (0.5, 1.5, 3.0, -0.25)], rtol=1e-2)


def test_betainc_takes_one_shape_or_scalars_as_tensorflow():
    g = fl.Graph()
    with g.as_default():
        with pytest.raises(ShapeError, match=r"betainc_bad.*equal or scalars"):
            fl.betainc(fl.constant(np.ones((2, 3))), fl.constant(np.ones(3)),
                       fl.constant(np.ones((2, 3))) * 0.5, name="betainc_bad")
        with pytest.raises(ShapeError, match="equal or scalars"):
            fl.betainc(fl.constant(np.ones((2, 1))), 1.0, fl.constant(np.ones((2, 3))))
        assert fl.betainc(1.0, fl.constant(np.ones((2, 3))), 0.5).shape.as_list() == [2, 3]


def test_binary_ops_take_float32_and_float64_only():
    g = fl.Graph()
    with g.as_default():
        with pytest.raises(OpError, match="T=f16 is not allowed for Igamma"):
            fl.igamma(fl.constant(np.ones(2, np.float16)), fl.constant(np.ones(2, np.float16)))


def test_zeta_far_below_zero_is_the_sum_of_its_terms_without_a_long_loop(graph):
    x = fl.placeholder(fl.float64, [None])
    q = fl.placeholder(fl.float64, [None])
    fetches = {"zeta": fl.zeta(x, q), "polygamma": fl.polygamma(x - 1.0, q)}
    xv = np.array([2.0, 3.0, 4.0, 2.0, 6.0])
    qv = np.array([-100.5, -100.25, -70.75, -1e15 + 0.5, -2.0 ** 52 + 0.5])
    got = check_against_interpreter(graph, fetches, {x: xv, q: qv})
    for i in range(3):       # the terms (q + k)^-x of negative base, then the zeta beyond
        n = int(-np.floor(qv[i]))
        head = sum((qv[i] + k) ** -xv[i] for k in range(n))
        with fl.Graph().as_default():
            with fl.Session(backend="interpreter") as s:
                tail = s.run(fl.zeta(fl.constant(xv[i]), fl.constant(qv[i] + n)))
        assert got["zeta"][i] == pytest.approx(head + tail, rel=1e-13)
    assert np.isfinite(got["zeta"]).all() and np.isfinite(got["polygamma"]).all()
    # q = 1/2 - 10^15: the bases +-1/2, +-3/2, ... to about 10^15: 2 zeta(2, 1/2) = pi^2
    assert got["zeta"][3] == pytest.approx(math.pi ** 2, rel=1e-13)


def test_empty_inputs_give_empty_results(graph):
    x = fl.placeholder(fl.float32, [None, 2])
    fetches = {name: fn(*[x] * (3 if name == "Betainc" else 2 if name in (
        "Igamma", "Igammac", "Zeta", "Polygamma") else 1)) for name, fn in FNS.items()}
    got = check_against_interpreter(graph, fetches, {x: np.zeros((0, 2), np.float32)})
    assert all(v.shape == (0, 2) and v.dtype == np.float32 for v in got.values())
