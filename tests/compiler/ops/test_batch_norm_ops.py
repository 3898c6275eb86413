"""Fused batch normalization: FusedBatchNorm, V2, V3 and their gradients.

The numpy references are checked against TensorFlow's own outputs and gradients (recorded
into tests/data/tf1_layers/fused_batch_norm_tf.npz by record_fused_batch_norm.py there) and
against a direct formula; then the compiled C against the references over data formats,
dtypes, training and inference, moving-average factors, static and dynamic dims, empty
statistics, empty and one-element batches, and the run-time shape errors; then the gradients
of fl.nn.fused_batch_norm, compiled, against finite differences.
"""
import os

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from repo_paths import TESTS
from runtime.errors import RuntimeExecutionError

TF_VALUES = os.path.join(TESTS, "data", "tf1_layers", "fused_batch_norm_tf.npz")
FORMATS = ("NHWC", "NCHW", "NDHWC")


def _channel_axis(fmt):
    return len(fmt) - 1 if fmt.endswith("C") else 1


def _run(fetches, feeds=None, backend="interpreter"):
    with fl.Session(backend=backend) as s:
        return s.run(fetches, feeds or {})


def direct_batch_norm(x, scale, offset, mean, var, eps, axis, training):
    """Batch normalization written out with numpy in float64, per channel."""
    xm = np.moveaxis(x.astype(np.float64), axis, -1)
    if training:
        mean = xm.reshape(-1, xm.shape[-1]).mean(axis=0)
        var = xm.reshape(-1, xm.shape[-1]).var(axis=0)
    y = (xm - mean) / np.sqrt(var + eps) * scale + offset
    return np.moveaxis(y, -1, axis)


# --- the references --------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_reference_matches_tensorflow_outputs_and_gradients(graph, fmt):
    tf = np.load(TF_VALUES)
    x, scale, offset = tf[f"{fmt}/x"], tf[f"{fmt}/scale"], tf[f"{fmt}/offset"]
    mean, var, dy = tf[f"{fmt}/mean"], tf[f"{fmt}/var"], tf[f"{fmt}/dy"]
    fetches, expected = [], []
    for training in (True, False):
        for factor in (1.0, 0.25):
            key = f"{fmt}/{'train' if training else 'infer'}/{factor}"
            outs = fl.raw_ops.FusedBatchNormV3(
                x=x, scale=scale, offset=offset, mean=mean, variance=var, epsilon=0.001,
                exponential_avg_factor=factor, data_format=fmt, is_training=training)
            dx, ds, do = fl.gradients(outs[0], [outs[0].op.inputs[k] for k in range(3)],
                                      grad_ys=dy)
            names = ["y", "batch_mean", "batch_variance"]
            got = list(outs[:3])
            if training:
                names += ["reserve_space_1", "reserve_space_2"]
                got += list(outs[3:5])
            names += ["dx", "dscale", "doffset"]
            got += [dx, ds, do]
            fetches += got
            expected += [(f"{key}/{n}", tf[f"{key}/{n}"]) for n in names]
    for backend in ("interpreter", "c"):
        values = _run(fetches, backend=backend)
        for (name, want), v in zip(expected, values):
            assert v.dtype == np.float32 and v.shape == want.shape, name
            np.testing.assert_allclose(v, want, rtol=2e-5, atol=2e-5, err_msg=f"{backend} {name}")


def test_reference_matches_the_direct_formula_and_the_statistics_are_tensorflows(graph, rng):
    for fmt in FORMATS:
        shape = (3, 4, 5, 6) if len(fmt) == 4 else (2, 3, 4, 2, 5)
        axis = _channel_axis(fmt)
        c = shape[axis]
        x = rng.standard_normal(shape) * 3 + 1
        scale, offset, mean = (rng.standard_normal(c) for _ in range(3))
        var = rng.random(c) + 0.1
        outs = {}
        for training in (True, False):
            outs[training] = fl.nn.fused_batch_norm(x, scale, offset, mean, var, epsilon=0.01,
                                                    data_format=fmt, is_training=training)
        (y_t, m_t, v_t), (y_i, m_i, v_i) = _run([list(outs[True]), list(outs[False])])
        np.testing.assert_allclose(y_t, direct_batch_norm(x, scale, offset, mean, var, 0.01,
                                                          axis, True), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(y_i, direct_batch_norm(x, scale, offset, mean, var, 0.01,
                                                          axis, False), rtol=1e-12, atol=1e-12)
        flat = np.moveaxis(x, axis, -1).reshape(-1, c)
        np.testing.assert_allclose(m_t, flat.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(v_t, flat.var(axis=0, ddof=1), rtol=1e-12)   # unbiased
        np.testing.assert_array_equal(m_i, mean)
        np.testing.assert_array_equal(v_i, var)


def test_moving_average_factor_and_its_reserve_spaces(graph, rng):
    x = rng.standard_normal((4, 2, 2, 3))
    scale, offset = np.ones(3), np.zeros(3)
    mean, var = rng.standard_normal(3), rng.random(3) + 1
    outs = fl.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=var,
                                       exponential_avg_factor=0.1, epsilon=0.001)
    y, bm, bv, r1, r2, r3 = _run(list(outs))
    flat = x.reshape(-1, 3)
    np.testing.assert_allclose(bm, 0.9 * mean + 0.1 * flat.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(bv, 0.9 * var + 0.1 * flat.var(axis=0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(r1, flat.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(r2, flat.var(axis=0), rtol=1e-12)    # biased: for the gradient
    assert r3.shape == () and r3 == 0


# --- compiled C against the references ---------------------------------------------------------
def _cases(rng, dtype, static: bool):
    """(name, tensor) pairs over every op version, format, mode and factor."""
    fetches, feeds = {}, {}
    for fmt in FORMATS:
        shape = (2, 3, 4, 5) if len(fmt) == 4 else (2, 3, 2, 2, 5)
        if fmt == "NCHW":
            shape = (2, 5, 3, 4)
        c = shape[_channel_axis(fmt)]
        x = rng.standard_normal(shape).astype(dtype) * 2
        xp = fl.placeholder(dtype, shape if static else [None] * len(shape), name=f"x_{fmt}")
        feeds[xp] = x
        scale = rng.standard_normal(c).astype(dtype)
        offset = rng.standard_normal(c).astype(dtype)
        mean = rng.standard_normal(c).astype(dtype)
        var = (rng.random(c) + 0.5).astype(dtype)
        dy = rng.standard_normal(shape).astype(dtype)
        versions = ("V3",) if len(fmt) == 5 else ("", "V2", "V3")
        for v in versions:
            for training in (True, False):
                for factor in (1.0, 0.3):
                    key = f"{fmt}{v}_{training}_{factor}"
                    outs = getattr(fl.raw_ops, f"FusedBatchNorm{v}")(
                        x=xp, scale=scale, offset=offset, mean=mean, variance=var,
                        epsilon=0.001, exponential_avg_factor=factor, data_format=fmt,
                        is_training=training)
                    for i, t in enumerate(outs):
                        fetches[f"{key}:{i}"] = t
                    saved = list(outs[3:5]) if training else [mean, var]
                    extra = {"reserve_space_3": outs[5]} if v == "V3" else {}
                    grads = getattr(fl.raw_ops, f"FusedBatchNormGrad{v}")(
                        y_backprop=dy, x=xp, scale=scale, reserve_space_1=saved[0],
                        reserve_space_2=saved[1], epsilon=0.001, data_format=fmt,
                        is_training=training, **extra)
                    for i, t in enumerate(grads):
                        fetches[f"{key}/grad:{i}"] = t
    return fetches, feeds


@pytest.mark.parametrize("dtype,static", [(np.float32, False), (np.float64, True)])
def test_c_matches_the_reference_for_every_version_format_and_mode(graph, rng, dtype, static):
    fetches, feeds = _cases(rng, dtype, static)
    got = check_against_interpreter(graph, fetches, feeds)
    assert got["NHWC_True_1.0/grad:3"].shape == (0,)
    assert got["NHWCV3_True_1.0:5"].shape == ()


def test_c_training_with_empty_statistics_one_element_and_empty_batches(graph, rng):
    x = fl.placeholder(fl.float32, [None, None, None, 3])
    scale, offset = np.array([1.0, 2.0, 0.5], np.float32), np.zeros(3, np.float32)
    y, m, v = fl.nn.fused_batch_norm(x, scale, offset)           # mean, variance: []
    dx = fl.gradients(fl.reduce_sum(y * y), x)[0]
    for shape in [(2, 3, 4, 3), (1, 1, 1, 3), (0, 2, 2, 3)]:
        value = rng.standard_normal(shape).astype(np.float32)
        got = check_against_interpreter(graph, {"y": y, "m": m, "v": v, "dx": dx}, {x: value})
        if shape[0] == 0:                       # no elements: NaN statistics, as in TensorFlow
            assert np.isnan(got["m"]).all() and np.isnan(got["v"]).all()
            assert got["y"].shape == shape and got["dx"].shape == shape
        elif shape == (1, 1, 1, 3):             # one element: variance 0, not 0 / 0
            np.testing.assert_array_equal(got["v"], np.zeros(3, np.float32))
            np.testing.assert_allclose(got["m"], value.reshape(3))


def test_shape_errors_name_the_rule_at_build_time(graph):
    x4 = fl.placeholder(fl.float32, [2, 3, 4, 5])
    c5, c4 = np.ones(5, np.float32), np.ones(4, np.float32)
    with pytest.raises(ShapeError, match="scale must have the same number of elements as the "
                                         "channels of x, got 4 and 5"):
        fl.raw_ops.FusedBatchNormV3(x=x4, scale=c4, offset=c5, mean=c5, variance=c5)
    with pytest.raises(ShapeError, match="When|mean must have the same number of elements"):
        fl.raw_ops.FusedBatchNormV3(x=x4, scale=c5, offset=c5, mean=np.ones(0, np.float32),
                                    variance=c5, is_training=False)
    with pytest.raises(ShapeError, match="input must be 4-dimensional"):
        fl.raw_ops.FusedBatchNormV3(x=fl.placeholder(fl.float32, [2, 3, 4]), scale=c5,
                                    offset=c5, mean=c5, variance=c5)
    with pytest.raises(ShapeError, match="data_format must be one of NHWC, NCHW, got 'NDHWC'"):
        fl.raw_ops.FusedBatchNormV2(x=fl.placeholder(fl.float32, [2, 3, 4, 5, 5]), scale=c5,
                                    offset=c5, mean=c5, variance=c5, data_format="NDHWC")
    with pytest.raises(ValueError, match="Both `mean` and `variance` must be a 1D tensor"):
        fl.nn.fused_batch_norm(x4, c5, c5, is_training=False)


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_fed_statistics_of_the_wrong_size_fail_at_run_time_and_name_the_node(graph, backend):
    x = fl.placeholder(fl.float32, [2, 2, 2, 3])
    scale = fl.placeholder(fl.float32, [None])
    mean = fl.placeholder(fl.float32, [None])
    y = fl.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=np.zeros(3, np.float32),
                                    mean=mean, variance=np.ones(3, np.float32),
                                    is_training=False, name="bn")[0]
    xv, three = np.ones((2, 2, 2, 3), np.float32), np.ones(3, np.float32)
    with fl.Session(backend=backend) as s:
        with pytest.raises(RuntimeExecutionError, match=r"bn.*scale must have the same number|"
                                                        r"scale must have the same number.*bn"):
            s.run(y, {x: xv, scale: np.ones(4, np.float32), mean: three})
        with pytest.raises(RuntimeExecutionError, match="mean must have the same number"):
            s.run(y, {x: xv, scale: three, mean: np.ones(0, np.float32)})
        assert s.run(y, {x: xv, scale: three, mean: three}).shape == (2, 2, 2, 3)


# --- gradients ---------------------------------------------------------------------------------
def numerical_grad(fn, x, eps=1e-6):
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = fn()
        flat[i] = old - eps
        down = fn()
        flat[i] = old
        gflat[i] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("fmt,training", [("NHWC", True), ("NCHW", True), ("NHWC", False),
                                          ("NCHW", False)])
def test_gradients_compiled_match_finite_differences(graph, rng, fmt, training):
    shape = (2, 3, 2, 3) if fmt == "NHWC" else (2, 3, 3, 2)
    c = 3
    x0 = rng.standard_normal(shape)
    s0, o0 = rng.standard_normal(c), rng.standard_normal(c)
    mean, var = rng.standard_normal(c), rng.random(c) + 0.5
    w = rng.standard_normal(shape)                  # a loss that weighs every output differently
    x, s, o = (fl.placeholder(fl.float64, v.shape) for v in (x0, s0, o0))
    y = fl.nn.fused_batch_norm(x, s, o, mean, var, epsilon=0.01, data_format=fmt,
                               is_training=training)[0]
    loss = fl.reduce_sum(y * w)
    grads = fl.gradients(loss, [x, s, o])
    with fl.Session(backend="c") as sess:
        feeds = {x: x0, s: s0, o: o0}
        got = sess.run(grads, feeds)
        for value, g in zip((x0, s0, o0), got):
            want = numerical_grad(lambda: sess.run(loss, feeds), value)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6)


def test_statistics_outputs_are_not_differentiated_as_in_tensorflow(graph):
    x = fl.placeholder(fl.float32, [2, 2, 2, 3])
    y, m, v = fl.nn.fused_batch_norm(x, np.ones(3, np.float32), np.zeros(3, np.float32))
    assert fl.gradients(fl.reduce_sum(m) + fl.reduce_sum(v), [x]) == [None]


def test_a_tensorflow_graphdef_with_fused_batch_norm_v1_and_v3_imports_and_matches(tmp_path):
    pytest.importorskip("google.protobuf", reason="GraphDef import needs protobuf")
    from compiler.interop.graphdef import load_graphdef_model
    from dsl.tensor import Tensor
    model = load_graphdef_model(os.path.join(TESTS, "data", "tf1_layers",
                                             "fused_batch_norm_graph.pb"))
    g = model.graph
    assert {n.op for n in g} >= {"FusedBatchNorm", "FusedBatchNormV3"}
    tf = np.load(os.path.join(TESTS, "data", "tf1_layers", "fused_batch_norm_graph.npz"))
    fetches = [Tensor(g.output(n)) for n in ("out", "batch_mean", "batch_variance")]
    for backend in ("interpreter", "c"):
        with fl.Session(graph=g, backend=backend) as s:
            got = s.run(fetches, {Tensor(g.output("x")): tf["x"]})
        for name, v in zip(("out", "batch_mean", "batch_variance"), got):
            np.testing.assert_allclose(v, tf[name], rtol=1e-5, atol=1e-5, err_msg=backend + name)
