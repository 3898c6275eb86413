"""DepthwiseConv2dNative and its two backprops.

The numpy references are checked first against independent formulations (direct loops with
TensorFlow's window arithmetic, one Conv2D per channel, float64 finite differences for the
backprops); then the compiled C against them over channel multipliers, strides, dilations,
paddings, dynamic and static dims, empty dims, both float types, NCHW, flowc's threads, and the
run-time shape errors; then fl.nn.depthwise_conv2d's gradients, compiled, against finite
differences.
"""
import re

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from oracle import check_against_interpreter
from runtime.errors import RuntimeExecutionError
from test_conv_ops import conv_attrs, numerical_grad, ref, tf_window

# (input HW, channels, multiplier, filter HW, strides, dilations, padding, explicit pads)
CASES = [
    ((5, 5), 3, 1, (3, 3), (1, 1), (1, 1), "SAME", None),
    ((7, 6), 4, 2, (3, 2), (2, 1), (1, 1), "SAME", None),
    ((6, 7), 2, 3, (2, 3), (2, 3), (1, 1), "VALID", None),
    ((8, 8), 5, 1, (3, 3), (1, 1), (2, 2), "SAME", None),
    ((9, 7), 3, 2, (2, 2), (2, 1), (3, 2), "VALID", None),
    ((4, 4), 6, 1, (1, 1), (1, 1), (1, 1), "VALID", None),
    ((5, 4), 2, 2, (3, 3), (2, 2), (1, 1), "EXPLICIT", ((1, 2), (0, 3))),
    ((2, 2), 3, 1, (3, 3), (3, 3), (1, 1), "SAME", None),      # stride larger than the input
    ((2, 5), 2, 1, (3, 1), (2, 1), (1, 1), "VALID", None),     # output height 0
    ((6, 6), 17, 1, (3, 3), (2, 2), (1, 1), "SAME", None),     # channels not a vector multiple
]


def attrs(s, d, pad, pads):
    a = conv_attrs(s, d, pad, pads)
    del a["use_cudnn_on_gpu"]
    return a


def loop_depthwise(x, f, strides, dilations, padding, pads):
    """DepthwiseConv2dNative by its definition: output channel c*M+m sums input channel c
    times filter[:, :, c, m] over the in-range taps."""
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    oh, pt = tf_window(h, kh, strides[0], dilations[0], padding, pads and pads[0])
    ow, pl = tf_window(w, kw, strides[1], dilations[1], padding, pads and pads[1])
    y = np.zeros((n, oh, ow, c * m), x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r = i * strides[0] - pt + a * dilations[0]
                    s = j * strides[1] - pl + b * dilations[1]
                    if 0 <= r < h and 0 <= s < w:
                        for ch in range(c):
                            y[:, i, j, ch * m:(ch + 1) * m] += x[:, r, s, ch, None] * f[a, b, ch]
    return y


def test_reference_matches_direct_loops_and_per_channel_conv2d(rng):
    for hw, c, m, k, s, d, pad, pads in CASES:
        a = attrs(s, d, pad, pads)
        x = rng.standard_normal((2, *hw, c))
        f = rng.standard_normal((*k, c, m))
        got = ref("DepthwiseConv2dNative", a, x, f)
        np.testing.assert_allclose(got, loop_depthwise(x, f, s, d, pad, pads), rtol=1e-12,
                                   atol=1e-12, err_msg=str((hw, c, m, k, s, pad)))
        per_channel = [ref("Conv2D", a, x[..., ch:ch + 1], f[:, :, ch:ch + 1, :])
                       for ch in range(c)]
        np.testing.assert_allclose(got, np.concatenate(per_channel, axis=3), rtol=1e-12,
                                   atol=1e-12)


def test_backprop_references_are_numerical_gradients(rng):
    for hw, c, m, k, s, d, pad, pads in CASES[:7]:
        a = attrs(s, d, pad, pads)
        x = rng.standard_normal((2, *hw, c))
        f = rng.standard_normal((*k, c, m))
        cot = rng.standard_normal(ref("DepthwiseConv2dNative", a, x, f).shape)
        dx = ref("DepthwiseConv2dNativeBackpropInput", a, np.array(x.shape, np.int32), f, cot)
        df = ref("DepthwiseConv2dNativeBackpropFilter", a, x, np.array(f.shape, np.int32), cot)
        fwd = lambda xv, fv: np.sum(ref("DepthwiseConv2dNative", a, xv, fv) * cot)  # noqa: E731
        np.testing.assert_allclose(dx, numerical_grad(lambda v: fwd(v, f), x.copy()), rtol=1e-6,
                                   atol=1e-6, err_msg=str((hw, k, s, pad)))
        np.testing.assert_allclose(df, numerical_grad(lambda v: fwd(x, v), f.copy()), rtol=1e-6,
                                   atol=1e-6, err_msg=str((hw, k, s, pad)))


def _tol(dt):
    return dict(rtol=1e-4, atol=1e-4) if dt == np.float32 else dict(rtol=1e-10, atol=1e-10)


def _build_cases(dt, static_batch=None):
    fetches, specs = {}, []
    for i, (hw, c, m, k, s, d, pad, pads) in enumerate(CASES):
        x = fl.placeholder(dt, [static_batch, None, None, c], name=f"x{i}")
        f = fl.placeholder(dt, [*k, c, m], name=f"f{i}")
        padding = [[0, 0], list(pads[0]), list(pads[1]), [0, 0]] if pad == "EXPLICIT" else pad
        fetches[f"y{i}"] = fl.nn.depthwise_conv2d(x, f, [1, *s, 1], padding, rate=d)
        dy = fl.placeholder(dt, [None, None, None, c * m], name=f"dy{i}")
        sizes = fl.placeholder(fl.int32, [4], name=f"sizes{i}")       # dynamic input_sizes
        fetches[f"dx{i}"] = fl.nn.depthwise_conv2d_native_backprop_input(
            sizes, f, dy, [1, *s, 1], padding, dilations=d)
        fetches[f"df{i}"] = fl.nn.depthwise_conv2d_native_backprop_filter(
            x, [*k, c, m], dy, [1, *s, 1], padding, dilations=d)
        specs.append((x, f, dy, sizes, CASES[i]))
    return fetches, specs


def _feed(specs, rng, n, dt):
    feed = {}
    for x, f, dy, sizes, (hw, c, m, k, s, d, pad, pads) in specs:
        oh = tf_window(hw[0], k[0], s[0], d[0], pad, pads and pads[0])[0]
        ow = tf_window(hw[1], k[1], s[1], d[1], pad, pads and pads[1])[0]
        feed[x] = rng.standard_normal((n, *hw, c)).astype(dt)
        feed[f] = rng.standard_normal((*k, c, m)).astype(dt)
        feed[dy] = rng.standard_normal((n, oh, ow, c * m)).astype(dt)
        feed[sizes] = np.array([n, *hw, c], np.int32)
    return feed


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_depthwise_and_backprops_against_interpreter(graph, rng, dt):
    """Every case with dynamic batch and spatial dims; batch 2, 1 and 0 are fed."""
    fetches, specs = _build_cases(dt)
    for n in (2, 1, 0):
        got = check_against_interpreter(graph, fetches, _feed(specs, rng, n, dt), **_tol(dt))
        assert got["y1"].shape == (n, 4, 6, 8) and got["y8"].shape == (n, 0, 5, 2)
        if n == 0:
            assert got["df0"].shape == (3, 3, 3, 1) and not np.any(got["df0"])


def test_multiplier_and_sizes_known_only_at_run_time(graph, rng):
    """A filter whose multiplier is fed (the helper reads M at run time) and sizes computed
    at run time (Shape of fed tensors), multipliers 3, 1 and 0 (no output channels)."""
    x = fl.placeholder(fl.float32, [None, None, None, 4], name="x")
    f = fl.placeholder(fl.float32, [3, 2, 4, None], name="f")
    y = fl.nn.depthwise_conv2d(x, f, [1, 2, 1, 1], "SAME")
    assert y.shape == (None, None, None, None)
    dy = fl.placeholder(fl.float32, [None, None, None, None], name="dy")
    fetches = {"y": y,
               "dx": fl.nn.depthwise_conv2d_native_backprop_input(fl.shape(x), f, dy,
                                                                  [1, 2, 1, 1], "SAME"),
               "df": fl.nn.depthwise_conv2d_native_backprop_filter(x, fl.shape(f), dy,
                                                                   [1, 2, 1, 1], "SAME")}
    for m in (3, 1, 0):
        feed = {x: rng.standard_normal((2, 5, 6, 4)).astype(np.float32),
                f: rng.standard_normal((3, 2, 4, m)).astype(np.float32),
                dy: rng.standard_normal((2, 3, 6, 4 * m)).astype(np.float32)}
        got = check_against_interpreter(graph, fetches, feed, rtol=1e-4, atol=1e-4)
        assert got["y"].shape == (2, 3, 6, 4 * m) and got["df"].shape == (3, 2, 4, m)
        if m == 0:
            assert not got["dx"].any()


def test_static_shapes_several_threads_and_a_wide_image(graph, rng, monkeypatch):
    """Static dims (literal loops, the multiplier baked in), a big enough batch that the rows
    are cut across 2 threads (the filter gradient summing per-thread copies), one thread too."""
    xv = rng.standard_normal((8, 33, 31, 24)).astype(np.float32)
    fv = rng.standard_normal((3, 3, 24, 2)).astype(np.float32)
    x = fl.placeholder(fl.float32, xv.shape, name="x")
    f = fl.placeholder(fl.float32, fv.shape, name="f")
    y = fl.nn.depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME")
    y1 = fl.nn.depthwise_conv2d(x, f[:, :, :, :1], [1, 1, 1, 1], "VALID", rate=[2, 1])
    dy = fl.placeholder(fl.float32, y.shape, name="dy")
    fetches = {"y": y, "y1": y1,
               "dx": fl.nn.depthwise_conv2d_native_backprop_input(list(xv.shape), f, dy,
                                                                  [1, 2, 2, 1], "SAME"),
               "df": fl.nn.depthwise_conv2d_native_backprop_filter(x, list(fv.shape), dy,
                                                                   [1, 2, 2, 1], "SAME")}
    assert y.shape == (8, 17, 16, 48) and y1.shape == (8, 29, 29, 24)
    feed = {x: xv, f: fv, dy: rng.standard_normal(y.shape).astype(np.float32)}
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")      # flowc's kernels, not oneDNN's
    results = []
    for threads in ("2", "1"):
        monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
        results.append(check_against_interpreter(graph, fetches, feed, rtol=1e-3, atol=1e-3))
    want = loop_depthwise(xv[:1].astype(np.float64), fv.astype(np.float64), (2, 2), (1, 1),
                          "SAME", None)
    np.testing.assert_allclose(results[0]["y"][:1], want, rtol=1e-4, atol=1e-4)
    for k in fetches:
        np.testing.assert_allclose(results[0][k], results[1][k], rtol=1e-5, atol=1e-4)


# (image HW, channels, filter HW, strides, dilations, padding) for the multiplier-1 forward
# kernel's paths: channel blocks of 64 and 16 (one pixel) and 32 and 16 (4 pixels whose
# windows lie inside the row), the channels left over, windows cut by the edges, an image
# narrower than 4 pixels
BLOCKED = [((9, 11), 144, (3, 3), (1, 1), (1, 1), "SAME"),
           ((10, 13), 100, (3, 3), (2, 2), (1, 1), "SAME"),
           ((7, 12), 40, (3, 3), (1, 1), (1, 2), "SAME"),
           ((8, 9), 96, (5, 3), (1, 2), (1, 1), "VALID"),
           ((6, 3), 80, (3, 3), (1, 1), (1, 1), "SAME"),
           ((5, 17), 7, (3, 3), (1, 1), (1, 1), "SAME")]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_multiplier_one_channel_blocks_with_an_epilogue(graph, rng, monkeypatch, dt):
    """flowc's multiplier-1 kernel (FLOWC_CONV_ENGINE=blas keeps float32 off oneDNN), plain and
    fused with a bias, a residual and ReLU6, against the interpreter."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    fetches, feed = {}, {}
    for i, (hw, c, k, s, d, pad) in enumerate(BLOCKED):
        xv = rng.standard_normal((2, *hw, c)).astype(dt)
        x = fl.placeholder(dt, xv.shape, name=f"x{i}")
        f = fl.constant(rng.standard_normal((*k, c, 1)).astype(dt))
        y = fl.nn.depthwise_conv2d(x, f, [1, *s, 1], pad, rate=d)
        bias = fl.constant(rng.standard_normal(c).astype(dt))
        residual = fl.placeholder(dt, y.shape, name=f"r{i}")
        fetches[f"y{i}"] = y
        fetches[f"fused{i}"] = fl.nn.relu6(fl.nn.bias_add(y, bias) + residual)
        feed[x] = xv
        feed[residual] = rng.standard_normal(y.shape).astype(dt)
    check_against_interpreter(graph, fetches, feed, **_tol(dt))


def test_nchw_runs_in_c_as_the_transposed_nhwc_op(graph, rng):
    xv = rng.standard_normal((2, 3, 7, 6))                               # NCHW
    fv = rng.standard_normal((3, 2, 3, 2))
    x, f = fl.placeholder(fl.float64, xv.shape, name="x"), fl.placeholder(fl.float64, fv.shape)
    strides, rate = [1, 1, 2, 1], [1, 2]
    y = fl.nn.depthwise_conv2d(x, f, strides, "SAME", data_format="NCHW", rate=rate)
    assert y.shape == (2, 6, 4, 6)
    dy = fl.placeholder(fl.float64, y.shape, name="dy")
    dyv = rng.standard_normal(y.shape)
    fetches = {"y": y,
               "dx": fl.nn.depthwise_conv2d_native_backprop_input(
                   [2, 3, 7, 6], f, dy, strides, "SAME", data_format="NCHW", dilations=rate),
               "df": fl.nn.depthwise_conv2d_native_backprop_filter(
                   x, [3, 2, 3, 2], dy, strides, "SAME", data_format="NCHW", dilations=rate)}
    got = check_against_interpreter(graph, fetches, {x: xv, f: fv, dy: dyv})
    a = attrs((2, 1), (1, 2), "SAME", None)
    xt, dyt = xv.transpose(0, 2, 3, 1), dyv.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got["y"], ref("DepthwiseConv2dNative", a, xt, fv)
                               .transpose(0, 3, 1, 2), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["dx"], ref("DepthwiseConv2dNativeBackpropInput", a,
                                              np.array([2, 7, 6, 3], np.int32), fv, dyt)
                               .transpose(0, 3, 1, 2), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["df"], ref("DepthwiseConv2dNativeBackpropFilter", a, xt,
                                              np.array(fv.shape, np.int32), dyt),
                               rtol=1e-12, atol=1e-12)


def test_one_native_kernel_per_node_not_a_conv_per_channel(graph):
    """Each depthwise node is one call of its module helper (one helper per multiplier): no
    Conv2D, Split or Concat is made and no im2col helper compiled in."""
    from compiler.codegen.emitter import emit_c
    from compiler.step import make_step_graph, optimize
    x = fl.placeholder(fl.float32, [1, 16, 16, 32], name="x")
    h = fl.nn.depthwise_conv2d(x, fl.constant(np.ones((3, 3, 32, 1), np.float32)), 1, "SAME")
    h = fl.nn.depthwise_conv2d(h, fl.constant(np.ones((3, 3, 32, 1), np.float32)), 2, "SAME")
    y = fl.nn.depthwise_conv2d(h, fl.constant(np.ones((5, 5, 32, 2), np.float32)), 1, "VALID")
    step = make_step_graph(graph, [x.output], [y.output])
    optimize(step)
    assert sorted(n.op for n in step.graph if "Conv" in n.op or n.op in ("Split", "ConcatV2")) \
        == ["DepthwiseConv2dNative"] * 3
    source = emit_c(step.graph, step.feeds, step.retvals).source
    assert len(re.findall(r"= flowc_depthwise_fwd_f32_m1\(", source)) == 2
    assert len(re.findall(r"= flowc_depthwise_fwd_f32_m2\(", source)) == 1
    assert source.count("static int flowc_depthwise_fwd_f32_m1(") == 1
    assert "im2col" not in source


def test_static_shape_errors(graph):
    x = fl.placeholder(fl.float32, [1, 4, 4, 3], name="x")
    with pytest.raises(ShapeError, match="in-channels"):
        fl.nn.depthwise_conv2d(x, fl.placeholder(fl.float32, [2, 2, 2, 1]), [1, 1, 1, 1], "SAME")
    with pytest.raises(ShapeError, match="negative"):
        fl.nn.depthwise_conv2d(x, fl.placeholder(fl.float32, [6, 1, 3, 1]), [1, 1, 1, 1], "VALID")
    with pytest.raises(ShapeError, match="batch and depth"):
        fl.nn.depthwise_conv2d(x, fl.placeholder(fl.float32, [1, 1, 3, 1]), [2, 1, 1, 1], "SAME")
    with pytest.raises(ShapeError, match="padding"):
        fl.nn.depthwise_conv2d(x, fl.placeholder(fl.float32, [1, 1, 3, 1]), [1, 1, 1, 1], "FULL")
    with pytest.raises(ShapeError, match="out_backprop"):
        fl.nn.depthwise_conv2d_native_backprop_input(
            [1, 4, 4, 3], fl.placeholder(fl.float32, [2, 2, 3, 2]),
            fl.placeholder(fl.float32, [1, 4, 4, 3]), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="rate or dilations"):
        fl.nn.depthwise_conv2d(x, fl.placeholder(fl.float32, [1, 1, 3, 1]), [1, 1, 1, 1], "SAME",
                               rate=2, dilations=2)
    y = fl.nn.depthwise_conv2d(fl.placeholder(fl.float32, [None, None, None, None]),
                               fl.placeholder(fl.float32, [3, 3, None, 2]), [1, 2, 2, 1], "SAME")
    assert y.shape == (None, None, None, None)


def test_run_time_shape_errors_name_the_node(graph):
    x = fl.placeholder(fl.float64, [None, None, None, None], name="x")
    f = fl.placeholder(fl.float64, [3, 3, 2, 2], name="f")
    conv = fl.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID", name="the_conv")
    dy = fl.placeholder(fl.float64, [None, None, None, 4], name="dy")
    bwd = fl.nn.depthwise_conv2d_native_backprop_filter(x, [3, 3, 2, 2], dy, [1, 1, 1, 1],
                                                        "VALID", name="the_bwd")
    sizes = fl.placeholder(fl.int32, [None], name="sizes")
    dx = fl.nn.depthwise_conv2d_native_backprop_input(sizes, f, dy, [1, 1, 1, 1], "VALID",
                                                      name="the_dx")
    dx_feed = {dy: np.ones((1, 2, 2, 4))}
    cases = [(conv, {x: np.zeros((1, 4, 4, 3))}, "the_conv"),            # depth 3 != 2
             (dx, {**dx_feed, sizes: np.array([1, 4, 4], np.int32)}, "the_dx.*4"),
             (dx, {**dx_feed, sizes: np.array([1, -4, 4, 2], np.int32)}, "the_dx.*negative"),
             (dx, {**dx_feed, sizes: np.array([1, 4, 4, 3], np.int32)}, "the_dx.*in-channels"),
             (dx, {**dx_feed, sizes: np.array([1, 5, 4, 2], np.int32)}, "the_dx"),  # dy shape
             (conv, {x: np.zeros((1, 1, 4, 2))}, "the_conv"),            # negative output
             (bwd, {x: np.zeros((1, 4, 4, 2)), dy: np.zeros((1, 3, 2, 4))}, "the_bwd")]
    for fetch, feed, match in cases:
        feed[f] = np.ones((3, 3, 2, 2))
        for backend in ("interpreter", "c"):
            with fl.Session(graph=graph, backend=backend) as s:
                with pytest.raises((ExecutionError, RuntimeExecutionError), match=match):
                    s.run(fetch, feed)


def test_compiled_gradients_match_finite_differences(graph, rng):
    """fl.gradients through depthwise_conv2d (multiplier 2, stride 2, SAME), compiled C,
    against central differences of the compiled loss."""
    xv = rng.standard_normal((2, 6, 5, 3))
    fv = rng.standard_normal((3, 3, 3, 2))
    w = fl.constant(rng.uniform(0.5, 1.5, size=(2, 3, 3, 6)))
    x = fl.placeholder(fl.float64, xv.shape, name="x")
    f = fl.placeholder(fl.float64, fv.shape, name="f")
    loss = fl.reduce_sum(fl.tanh(fl.nn.depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME")) * w)
    gx, gf = fl.gradients(loss, [x, f])
    with fl.Session(graph=graph) as s:
        got_x, got_f = s.run([gx, gf], {x: xv, f: fv})

        def numeric(which, value, eps=1e-6):
            out = np.zeros_like(value)
            for k in np.ndindex(*value.shape):
                vals = []
                for step in (eps, -eps):
                    moved = value.copy()
                    moved[k] += step
                    feed = {x: xv, f: fv, which: moved}
                    vals.append(s.run(loss, feed))
                out[k] = (vals[0] - vals[1]) / (2 * eps)
            return out

        np.testing.assert_allclose(got_x, numeric(x, xv), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got_f, numeric(f, fv), rtol=1e-6, atol=1e-7)
