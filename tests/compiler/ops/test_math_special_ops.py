"""Trigonometric, hyperbolic and error functions, Expm1, Atan2 and IsNan/IsInf/IsFinite:
compiled C against the numpy interpreter on ordinary and edge values (NaN, +-inf, +-0, huge,
tiny and subnormal values, the edges of each domain), TensorFlow's (libm's) results at those
edges, and their fusion into one kernel like Tanh and Exp."""
import math

import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter, random_array

FLOAT_TYPES = [(fl.float32, np.float32), (fl.float64, np.float64)]
UNARY = {"sin": fl.sin, "cos": fl.cos, "tan": fl.tan, "asin": fl.asin, "acos": fl.acos,
         "atan": fl.atan, "sinh": fl.sinh, "cosh": fl.cosh, "asinh": fl.asinh,
         "acosh": fl.acosh, "atanh": fl.atanh, "erf": fl.erf, "erfc": fl.erfc,
         "expm1": fl.expm1}
CLASSIFY = {"is_nan": (fl.is_nan, np.isnan), "is_inf": (fl.is_inf, np.isinf),
            "is_finite": (fl.is_finite, np.isfinite)}


def edge_values(np_dtype) -> np.ndarray:
    """Edge cases of every function here, then ordinary values, padded to rows of 4."""
    info = np.finfo(np_dtype)
    one_below = np.nextafter(np_dtype(1), np_dtype(0))
    one_above = np.nextafter(np_dtype(1), np_dtype(2))
    special = [0.0, -0.0, 1.0, -1.0, one_below, -one_below, one_above, -one_above, 0.5, -0.5,
               2.0, -2.0, math.pi / 2, -math.pi / 2, math.pi, 10.0, -10.0, 30.0, -30.0, 88.0,
               -88.0, 710.0, -710.0, 1e-30, -1e-30, info.tiny / 4, info.max, -info.max, 1e30,
               -1e30, np.inf, -np.inf, np.nan]
    ordinary = random_array(np.random.default_rng(7), (20,), np_dtype, -4, 4)
    with np.errstate(over="ignore"):
        values = np.concatenate([np.array(special, np_dtype), ordinary])
    pad = (-len(values)) % 4
    return np.concatenate([values, values[:pad]]).reshape(-1, 4)


def test_unary_functions_on_edge_values(graph):
    fetches, feeds = {}, {}
    for dt, np_dt in FLOAT_TYPES:
        x = fl.placeholder(dt, [None, 4], name=f"x_{dt}")
        feeds[x] = edge_values(np_dt)
        for name, fn in UNARY.items():
            fetches[f"{name}_{dt}"] = fn(x)
        for name, (fn, _) in CLASSIFY.items():
            fetches[f"{name}_{dt}"] = fn(x)
    got = check_against_interpreter(graph, fetches, feeds)
    empty = {x: v[:0] for x, v in feeds.items()}
    assert check_against_interpreter(graph, fetches, empty)["sin_f32"].shape == (0, 4)

    for dt, np_dt in FLOAT_TYPES:
        x = feeds[next(k for k in feeds if k.dtype == dt)]
        for name, (_, np_fn) in CLASSIFY.items():
            assert got[f"{name}_{dt}"].dtype == np.bool_
            np.testing.assert_array_equal(got[f"{name}_{dt}"], np_fn(x), err_msg=name)
        r = {name: got[f"{name}_{dt}"] for name in UNARY}
        at = {v: x == v for v in (1.0, -1.0, 2.0, 0.5, np.inf, -np.inf)}
        nan = np.isnan(x)
        for name in UNARY:
            assert np.isnan(r[name][nan]).all(), f"{name}({dt}) of NaN must be NaN"
        for name in ("sin", "cos", "tan"):
            assert np.isnan(r[name][at[np.inf] | at[-np.inf]]).all(), name
        assert np.isnan(r["asin"][at[2.0]]).all() and np.isnan(r["acos"][at[2.0]]).all()
        assert np.isnan(r["acosh"][at[0.5]]).all() and np.isnan(r["atanh"][at[2.0]]).all()
        assert (r["atanh"][at[1.0]] == np.inf).all() and (r["atanh"][at[-1.0]] == -np.inf).all()
        assert (r["acosh"][at[1.0]] == 0).all() and (r["acos"][at[1.0]] == 0).all()
        assert (r["erf"][at[np.inf]] == 1).all() and (r["erf"][at[-np.inf]] == -1).all()
        assert (r["erfc"][at[np.inf]] == 0).all() and (r["erfc"][at[-np.inf]] == 2).all()
        assert (r["expm1"][at[-np.inf]] == -1).all() and (r["cosh"][at[-np.inf]] == np.inf).all()
        assert (r["atan"][at[np.inf]] == np_dt(math.pi / 2)).all()
        tiny = x == np_dt(1e-30)
        for name in ("sin", "tan", "asin", "atan", "sinh", "asinh", "atanh", "expm1"):
            # f(x) = x + O(x^3): the tiny value survives (exp(x) - 1 would give 0)
            assert (r[name][tiny] == x[tiny]).all(), name
        zero = x == 0
        signed = np.signbit(x[zero])
        for name in ("sin", "tan", "asin", "atan", "sinh", "asinh", "atanh", "expm1", "erf"):
            np.testing.assert_array_equal(np.signbit(r[name][zero]), signed, err_msg=name)


def test_atan2_broadcasts_and_keeps_the_signed_zero_and_infinity_cases(graph):
    fetches, feeds = {}, {}
    corners = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, 1e30])
    for dt, np_dt in FLOAT_TYPES:
        y = fl.placeholder(dt, [None, 1], name=f"y_{dt}")
        x = fl.placeholder(dt, [9], name=f"x_{dt}")
        feeds[y] = corners.astype(np_dt).reshape(-1, 1)
        feeds[x] = corners.astype(np_dt)
        fetches[f"atan2_{dt}"] = fl.atan2(y, x)
        fetches[f"scalar_{dt}"] = fl.atan2(y, 2.0)
    got = check_against_interpreter(graph, fetches, feeds)
    for dt, np_dt in FLOAT_TYPES:
        c = corners.astype(np_dt)
        r = got[f"atan2_{dt}"]
        assert r.shape == (9, 9)
        np.testing.assert_array_equal(np.signbit(r[:2, :2]), [[False, False], [True, True]])
        assert r[0, 1] == np_dt(math.pi) and r[1, 1] == -np_dt(math.pi)     # atan2(+-0, -0)
        assert r[4, 4] == np_dt(math.pi / 4) and r[5, 5] == -np_dt(3 * math.pi / 4)
        assert np.isnan(r[6]).all() and np.isnan(r[:, 6]).all()
        np.testing.assert_allclose(got[f"scalar_{dt}"][:, 0], np.arctan2(c, np_dt(2)),
                                   rtol=1e-6)


def test_functions_fuse_into_one_kernel_like_tanh(graph, rng):
    x = fl.placeholder(fl.float32, [None, 8], name="x")
    y = fl.erf(fl.sin(x) * fl.cosh(x * 0.25)) + fl.atan2(fl.expm1(x), fl.asinh(x) + 2.0)
    mask = fl.is_nan(y)
    step = make_step_graph(fl.get_default_graph(), [x.output], [y.output, mask.output])
    optimize(step, PipelineOptions())
    ops = [n.op for n in step.graph]
    assert ops.count("Fused") == 1, ops
    assert not {"Sin", "Cosh", "Erf", "Expm1", "Asinh", "Atan2"} & set(ops)
    assert "IsNan" in ops                       # a bool result ends the float chain
    feed = {x: np.concatenate([rng.normal(size=(3, 8)), np.full((1, 8), np.nan)]).astype(
        np.float32)}
    got = check_against_interpreter(graph, {"y": y, "mask": mask}, feed,
                                    options=PipelineOptions(disable=("fold-constants",)))
    assert got["mask"][3].all() and not got["mask"][:3].any()


def test_integer_inputs_are_refused_by_name(graph):
    with pytest.raises(Exception, match="Sin"):
        fl.sin(fl.constant([1, 2]))
