"""Softsign, Selu, LeakyRelu (and their gradient ops) and ``fl.nn.gelu``: compiled C against
the numpy interpreter on ordinary and edge values, TensorFlow's formulas at the edges, and
fusion with their neighbours."""
import math

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from compiler.ops.activations import SELU_SCALE, SELU_SCALE_ALPHA
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter, random_array
from runtime.errors import RuntimeExecutionError

_IO = ("Placeholder", "_Retval", "Const")
FLOAT_TYPES = [(fl.float32, np.float32), (fl.float64, np.float64)]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 1e-40, -1e-40, 20.0, -20.0, 100.0,
           -100.0, 1e30, -1e30, np.inf, -np.inf, np.nan]


def rows(np_dtype, seed=3) -> np.ndarray:
    values = np.concatenate([np.array(SPECIAL, np_dtype),
                             random_array(np.random.default_rng(seed), (13,), np_dtype, -6, 6)])
    return values.reshape(-1, 4)


def test_activations_on_edge_values(graph):
    fetches, feeds = {}, {}
    for dt, np_dt in FLOAT_TYPES:
        x = fl.placeholder(dt, [None, 4], name=f"x_{dt}")
        feeds[x] = rows(np_dt)
        fetches[f"softsign_{dt}"] = fl.nn.softsign(x)
        fetches[f"selu_{dt}"] = fl.nn.selu(x)
        fetches[f"leaky_{dt}"] = fl.nn.leaky_relu(x)
        for alpha in (0.01, 1.5, -0.5, 0.0):
            fetches[f"leaky{alpha}_{dt}"] = fl.nn.leaky_relu(x, alpha=alpha)
    got = check_against_interpreter(graph, fetches, feeds)
    assert check_against_interpreter(graph, fetches, {k: v[:0] for k, v in feeds.items()})[
        "selu_f32"].shape == (0, 4)

    for dt, np_dt in FLOAT_TYPES:
        x = feeds[next(k for k in feeds if k.dtype == dt)]
        nan, inf, ninf = np.isnan(x), x == np.inf, x == -np.inf
        for name in ("softsign", "selu", "leaky", "leaky1.5_", "leaky-0.5_"):
            key = f"{name}{'' if name.endswith('_') else '_'}{dt}"
            assert np.isnan(got[key][nan]).all(), key
        softsign, selu, leaky = got[f"softsign_{dt}"], got[f"selu_{dt}"], got[f"leaky_{dt}"]
        assert np.isnan(softsign[inf | ninf]).all()          # inf / (inf + 1), as in TF
        assert (np.abs(softsign[~(nan | inf | ninf)]) <= 1).all()
        assert (selu[inf] == np.inf).all() and (selu[ninf] == np_dt(-SELU_SCALE_ALPHA)).all()
        one = x == 1
        assert (selu[one] == np_dt(SELU_SCALE)).all()
        tiny = x == np_dt(-1e-30)                           # expm1: no cancellation
        np.testing.assert_allclose(selu[tiny], np_dt(SELU_SCALE_ALPHA) * x[tiny], rtol=1e-6)
        assert (leaky[ninf] == -np.inf).all() and (leaky[x == -20] == np_dt(-20 * np_dt(0.2))).all()
        assert (got[f"leaky-0.5_{dt}"][x == -20] == 10).all()
        zero = x == 0
        np.testing.assert_array_equal(np.signbit(selu[zero]), np.signbit(x[zero]))


def test_gradient_ops_match_and_check_shapes(graph):
    fetches, feeds = {}, {}
    for dt, np_dt in FLOAT_TYPES:
        g = fl.placeholder(dt, [None, 4], name=f"g_{dt}")
        f = fl.placeholder(dt, [None, 4], name=f"f_{dt}")
        feeds[g] = rows(np_dt, seed=4)
        feeds[f] = rows(np_dt, seed=5)[::-1].copy()
        fetches[f"softsign_{dt}"] = fl.raw_ops.SoftsignGrad(gradients=g, features=f)
        fetches[f"selu_{dt}"] = fl.raw_ops.SeluGrad(gradients=g, outputs=f)
        fetches[f"leaky_{dt}"] = fl.raw_ops.LeakyReluGrad(gradients=g, features=f, alpha=0.3)
    got = check_against_interpreter(graph, fetches, feeds)
    g32, f32 = feeds[next(iter(feeds))], feeds[list(feeds)[1]]
    negative = f32 < 0
    np.testing.assert_allclose(got["selu_f32"][negative],
                               g32[negative] * (f32[negative] + np.float32(SELU_SCALE_ALPHA)),
                               rtol=1e-6)
    positive = f32 > 0
    np.testing.assert_array_equal(got["leaky_f32"][positive], g32[positive])

    with pytest.raises(ShapeError, match="same shape"):
        fl.raw_ops.LeakyReluGrad(gradients=fl.constant([[1.0, 2.0]]), features=fl.constant([1.0]))
    a = fl.placeholder(fl.float32, [None], name="a")
    b = fl.placeholder(fl.float32, [None], name="b")
    mismatched = fl.raw_ops.LeakyReluGrad(gradients=a, features=b)
    for backend in ("interpreter", "c"):
        with fl.Session(backend=backend) as s:
            with pytest.raises((ExecutionError, RuntimeExecutionError), match="same shape"):
                s.run(mismatched, {a: np.ones(3, np.float32), b: np.ones(2, np.float32)})


def test_gelu_is_tensorflows_formula_and_one_fused_kernel(graph):
    x = fl.placeholder(fl.float32, [None], name="x")
    exact, approx = fl.nn.gelu(x), fl.nn.gelu(x, approximate=True)
    values = np.array([-1.0, 0.0, 1.0, -3.0, 2.5, np.inf, -np.inf, np.nan], np.float32)
    got = check_against_interpreter(graph, {"exact": exact, "approx": approx}, {x: values})
    want = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in values[:5].astype(float)]
    np.testing.assert_allclose(got["exact"][:5], want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got["approx"][:3], [-0.15880799, 0.0, 0.84119201], rtol=1e-6)
    assert got["exact"][5] == np.inf and np.isnan(got["exact"][6:]).all()
    for y in (exact, approx):        # each alone (together, CSE shares their x * 0.5)
        step = make_step_graph(fl.get_default_graph(), [x.output], [y.output])
        optimize(step, PipelineOptions())
        assert [n.op for n in step.graph if n.op not in _IO] == ["Fused"]


def test_selu_and_softsign_fuse_with_their_neighbours(graph):
    x = fl.placeholder(fl.float64, [None, 3], name="x")
    y = fl.nn.selu(fl.nn.softsign(x * 2.0) - 0.25) + 1.0
    step = make_step_graph(fl.get_default_graph(), [x.output], [y.output])
    optimize(step, PipelineOptions())
    assert [n.op for n in step.graph if n.op not in _IO] == ["Fused"]
    check_against_interpreter(graph, [y], {x: rows(np.float64)[:4, :3]})


def test_leaky_relu_fuses_carrying_its_alpha(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4], name="x")
    b = fl.placeholder(fl.float32, [4], name="b")
    y = fl.nn.leaky_relu(fl.nn.bias_add(x, b), alpha=0.1) * 2.0
    z = fl.nn.leaky_relu(fl.nn.leaky_relu(x, alpha=-1.5) - b)         # two alphas, one kernel
    step = make_step_graph(fl.get_default_graph(), [x.output, b.output], [y.output, z.output])
    optimize(step, PipelineOptions())
    fused = [n for n in step.graph if n.op not in _IO]
    assert [n.op for n in fused] == ["Fused", "Fused"]
    assert "LeakyRelu[alpha=0.1]" in fused[0].attrs["expr"]
    assert "LeakyRelu[alpha=-1.5]" in fused[1].attrs["expr"]
    assert "LeakyRelu[alpha=0.2]" in fused[1].attrs["expr"]
    feeds = {x: rows(np.float32)[:4], b: np.array([0.5, -0.5, 0.0, 1.0], np.float32)}
    got = check_against_interpreter(graph, {"y": y, "z": z}, feeds)
    unfused = check_against_interpreter(graph, {"y": y, "z": z}, feeds,
                                        options=PipelineOptions(disable=("fuse",
                                                                         "fold-constants")))
    for k in got:
        np.testing.assert_array_equal(got[k], unfused[k])
