"""The direct grouped Conv2D kernel (conv_grouped_direct.c.j2: thin groups without im2col,
each 32-byte vector of output channels from its groups' contiguous input channels, a
block-diagonal filter when a vector spans several groups) against the interpreter, under
FLOWC_CONV_ENGINE=blas: groups whose outputs fill part of a vector (Og 1, 2, 4 in float32)
or whole vectors (Og 8, 16), strides, SAME / VALID / EXPLICIT padding, dilations, the fused
epilogues (bias, the residual Add, Relu, Relu6), float32 and float64, rows cut for 2 of
flowc's threads; the same graphs through the im2col + gemm kernel (FLOWC_GROUPED_CONV=gemm)
agree; shapes the direct kernel cannot take fall back to it. Also its two gradients: the
input gradient with strides 1 (the kernel on dy by the flipped, transposed filter) and the
filter gradient (with the bias gradient fused or not)."""
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.emitter import emit_c
from compiler.errors import CompileError
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter

# (input NHWC, groups, filter KHxKW, outputs, strides, padding, dilations, epilogue)
CASES = [
    ((2, 9, 11, 16), 4, (3, 3), 16, (1, 1), "SAME", (1, 1), "bias_relu"),     # Og 4, Cg 4
    ((1, 10, 9, 16), 8, (3, 3), 8, (2, 2), "VALID", (1, 1), "none"),          # Og 1, Cg 2
    ((2, 8, 13, 32), 16, (3, 3), 32, (1, 1), "SAME", (2, 2), "residual"),     # Og 2, Cg 2
    ((1, 9, 10, 64), 4, (3, 3), 64, (2, 1), "SAME", (1, 1), "residual_relu"),  # Og 16, Cg 16
    ((2, 7, 9, 24), 3, (1, 1), 24, (1, 1), "VALID", (1, 1), "bias_relu6"),    # 1x1, Og 8
    ((1, 8, 10, 12), 2, (2, 3), 16, (2, 1), "EXPLICIT", (1, 1), "bias"),      # Og 8, Cg 6
    ((1, 6, 17, 8), 2, (3, 5), 8, (1, 2), "SAME", (2, 1), "bias_relu"),       # Og 4, wide KW
]


def _conv(x, f, strides, padding, dilations):
    attrs = {"strides": [1, *strides, 1], "padding": padding, "dilations": [1, *dilations, 1]}
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = [0, 0, 1, 2, 2, 0, 0, 0]
    return fl.apply_op("Conv2D", [x, f], attrs)


def _graph(rng, dtype, cases=CASES):
    fetches, feed = {}, {}
    for i, (xs, groups, (kh, kw), out, strides, padding, dil, epi) in enumerate(cases):
        x = fl.placeholder(dtype, [None, *xs[1:]], name=f"x{i}")
        f = fl.constant(rng.standard_normal((kh, kw, xs[3] // groups, out)).astype(dtype))
        y = _conv(x, f, strides, padding, dil)
        if epi != "none":
            y = fl.nn.bias_add(y, fl.constant(rng.standard_normal(out).astype(dtype)))
        if epi.startswith("residual"):
            y = y + fl.constant(rng.standard_normal((xs[0], *y.shape[1:])).astype(dtype))
        if epi.endswith("relu"):
            y = fl.nn.relu(y)
        elif epi.endswith("relu6"):
            y = fl.nn.relu6(y)
        fetches[f"case{i}"] = y
        feed[x] = rng.standard_normal(xs).astype(dtype)
    return fetches, feed


def _source(graph, fetches, feed):
    step = make_step_graph(graph, [x.output for x in feed], [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    return emit_c(step.graph, step.feeds, step.retvals).source


@pytest.mark.cpu_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_direct_grouped_matches_the_interpreter_and_the_gemm_kernel(graph, rng, monkeypatch,
                                                                    dtype):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    fetches, feed = _graph(rng, dtype)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    results = {}
    for mode in ("direct", "gemm"):
        monkeypatch.setenv("FLOWC_GROUPED_CONV", mode)
        source = _source(graph, fetches, feed)
        sfx = "f32" if dtype == np.float32 else "f64"
        direct = len(re.findall(rf"= flowc_conv2d_grouped_direct_{sfx}_\w+\(", source))
        gemm = source.count(f"= flowc_conv2d_grouped_{sfx}(")
        # float64 vectors hold 4: Og 1 and 2 cases still run directly (a vector spans groups)
        assert (direct, gemm) == ((len(CASES), 0) if mode == "direct" else (0, len(CASES)))
        results[mode] = check_against_interpreter(graph, fetches, feed, **tol)
    for k in fetches:
        np.testing.assert_allclose(results["direct"][k], results["gemm"][k], **tol)


@pytest.mark.cpu_only
def test_auto_picks_direct_unless_groups_are_wide_or_the_filter_large(graph, rng, monkeypatch):
    """Under auto (the default) groups of up to 64 channels run directly; wider ones (128
    channels a group), ones whose filter as the direct kernel reads it passes 2 MiB (32
    groups of 64: 4.5 MiB), and ones whose group outputs neither fill nor divide a vector
    (Og 3) run by im2col + gemm; all match the interpreter."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.delenv("FLOWC_GROUPED_CONV", raising=False)
    cases = [((1, 6, 7, 128), 32, (3, 3), 128, (1, 1), "SAME", (1, 1), "bias_relu"),
             ((1, 5, 6, 128), 2, (3, 3), 128, (1, 1), "SAME", (1, 1), "bias_relu"),
             ((1, 4, 5, 256), 2, (3, 3), 256, (1, 1), "SAME", (1, 1), "bias"),
             ((1, 3, 4, 2048), 32, (3, 3), 2048, (1, 1), "SAME", (1, 1), "bias_relu"),
             ((1, 6, 7, 16), 4, (3, 3), 12, (1, 1), "SAME", (1, 1), "bias")]
    fetches, feed = _graph(rng, np.float32, cases)
    source = _source(graph, fetches, feed)
    assert source.count("= flowc_conv2d_grouped_direct_f32_3x3x4x4x32(") == 1
    assert source.count("= flowc_conv2d_grouped_direct_f32_3x3x64x64x2(") == 1
    assert source.count("= flowc_conv2d_grouped_f32(") == 3
    check_against_interpreter(graph, fetches, feed, rtol=1e-4, atol=1e-4)


@pytest.mark.cpu_only
def test_direct_grouped_cut_for_flowcs_threads(graph, rng, monkeypatch):
    """A ResNeXt-sized block (32 groups of 4) whose output rows are cut into parts for 2
    threads equals the interpreter's, and the single-threaded run, exactly (each output
    sums the same taps in the same order whatever the part)."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.setenv("FLOWC_GROUPED_CONV", "direct")
    cases = [((2, 28, 28, 128), 32, (3, 3), 128, (1, 1), "SAME", (1, 1), "residual_relu"),
             ((1, 29, 30, 64), 16, (3, 3), 64, (2, 2), "SAME", (1, 1), "bias_relu")]
    fetches, feed = _graph(rng, np.float32, cases)
    results = []
    for threads in ("2", "1"):
        monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
        results.append(check_against_interpreter(graph, fetches, feed, rtol=1e-4, atol=1e-4))
    for k in fetches:
        np.testing.assert_array_equal(results[0][k], results[1][k])


def test_grouped_conv_setting_is_checked(graph, monkeypatch):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.setenv("FLOWC_GROUPED_CONV", "fast")
    x = fl.placeholder(fl.float32, [1, 5, 5, 8], name="x")
    y = _conv(x, fl.constant(np.ones((3, 3, 2, 8), np.float32)), (1, 1), "SAME", (1, 1))
    with pytest.raises(CompileError, match="FLOWC_GROUPED_CONV must be"):
        _source(graph, {"y": y}, {x: np.ones((1, 5, 5, 8), np.float32)})


# (dx NHWC, groups, filter KHxKW, outputs, strides, padding, explicit pads, dilations)
BWD_INPUT = [
    ((2, 9, 11, 16), 4, (3, 3), 16, (1, 1), "SAME", None, (1, 1)),           # Og 4, Cg 4
    ((1, 10, 9, 16), 8, (3, 3), 8, (1, 1), "VALID", None, (1, 1)),           # Og 1, Cg 2
    ((2, 8, 13, 32), 16, (3, 3), 32, (1, 1), "SAME", None, (2, 2)),          # dilated
    ((1, 9, 10, 64), 4, (3, 3), 64, (1, 1), "SAME", None, (1, 1)),           # Og 16, Cg 16
    ((2, 7, 9, 24), 3, (1, 1), 24, (1, 1), "VALID", None, (1, 1)),           # 1x1, Og 8
    ((1, 8, 10, 16), 4, (3, 2), 16, (1, 1), "EXPLICIT", (1, 2, 1, 0), (1, 1)),
    ((1, 8, 10, 16), 4, (3, 3), 16, (1, 1), "EXPLICIT", (3, 0, 0, 1), (1, 1)),  # pad > window
    ((1, 10, 9, 16), 4, (3, 3), 16, (2, 2), "SAME", None, (1, 1)),           # strided: gemm
]


def _bwd_input_graph(rng, dtype, cases=BWD_INPUT):
    fetches, feed = {}, {}
    for i, (xs, groups, (kh, kw), out, strides, padding, pads, dil) in enumerate(cases):
        attrs = {"strides": [1, *strides, 1], "padding": padding, "dilations": [1, *dil, 1]}
        if pads:
            attrs["explicit_paddings"] = [0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0]
        f = fl.constant(rng.standard_normal((kh, kw, xs[3] // groups, out)).astype(dtype))
        ys = fl.apply_op("Conv2D", [fl.zeros(xs, dtype=dtype), f], attrs).shape
        dy = fl.placeholder(dtype, ys, name=f"dy{i}")
        fetches[f"dx{i}"] = fl.apply_op("Conv2DBackpropInput",
                                        [fl.constant(np.int32(xs)), f, dy], attrs)
        feed[dy] = rng.standard_normal(ys).astype(dtype)
    return fetches, feed


@pytest.mark.cpu_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_direct_grouped_input_gradient(graph, rng, monkeypatch, dtype):
    """Conv2DBackpropInput of a thin grouped Conv2D with strides 1 runs the direct kernel
    (a convolution of dy by the flipped, transposed filter; a padding wider than the window
    falls back to the gemm kernel at run time), strided ones the gemm kernel; all equal the
    interpreter, also cut for 2 threads."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.delenv("FLOWC_GROUPED_CONV", raising=False)
    fetches, feed = _bwd_input_graph(rng, dtype)
    sfx = "f32" if dtype == np.float32 else "f64"
    source = _source(graph, fetches, feed)
    direct = re.findall(rf"= flowc_conv2d_grouped_direct_{sfx}_\w+_bwd_input\(", source)
    assert len(direct) == len(BWD_INPUT) - 1
    assert source.count(f"= flowc_conv2d_bwd_input_grouped_{sfx}(") == 1
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    results = []
    for threads in ("2", "1"):
        monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
        results.append(check_against_interpreter(graph, fetches, feed, **tol))
    for k in fetches:
        np.testing.assert_array_equal(results[0][k], results[1][k])
    monkeypatch.setenv("FLOWC_GROUPED_CONV", "gemm")
    assert "_bwd_input(" not in _source(graph, fetches, feed)


@pytest.mark.cpu_only
def test_direct_grouped_input_gradient_cut_for_flowcs_threads(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.setenv("FLOWC_NUM_THREADS", "2")
    fetches, feed = _bwd_input_graph(
        rng, np.float32, [((2, 28, 28, 128), 32, (3, 3), 128, (1, 1), "SAME", None, (1, 1))])
    check_against_interpreter(graph, fetches, feed, rtol=1e-4, atol=1e-4)


# (x NHWC, groups, filter KHxKW, outputs, strides, padding, dilations)
BWD_FILTER = [
    ((2, 9, 11, 16), 4, (3, 3), 16, (1, 1), "SAME", (1, 1)),                 # Og 4, Cg 4
    ((1, 10, 9, 16), 8, (3, 3), 8, (2, 2), "VALID", (1, 1)),                 # Og 1, Cg 2
    ((2, 8, 13, 32), 16, (3, 3), 32, (1, 1), "SAME", (2, 2)),                # Og 2, dilated
    ((1, 9, 10, 64), 4, (3, 3), 64, (2, 1), "SAME", (1, 1)),                 # Og 16, Cg 16
    ((2, 7, 9, 24), 3, (1, 1), 24, (1, 1), "VALID", (1, 1)),                 # 1x1, Og 8
    ((1, 8, 10, 24), 2, (2, 3), 32, (2, 1), "EXPLICIT", (1, 1)),             # Cg 12, Og 16
]


def _bwd_filter_graph(rng, dtype, cases=BWD_FILTER):
    """d(sum(bias_add(conv) * cot)) / d(f, b) of each case: a _Conv2DBackpropFilterBias
    where the bias gradient fuses (even cases), a Conv2DBackpropFilter otherwise."""
    fetches, feed = {}, {}
    for i, (xs, groups, (kh, kw), out, strides, padding, dil) in enumerate(cases):
        x = fl.placeholder(dtype, xs, name=f"x{i}")
        f = fl.placeholder(dtype, [kh, kw, xs[3] // groups, out], name=f"f{i}")
        y = _conv(x, f, strides, padding, dil)
        variables = [f]
        if i % 2 == 0:
            b = fl.placeholder(dtype, [out], name=f"b{i}")
            y = fl.nn.bias_add(y, b)
            variables.append(b)
        cot = fl.placeholder(dtype, y.shape, name=f"cot{i}")
        for v, grad in zip(variables, fl.gradients(fl.reduce_sum(y * cot), variables)):
            fetches[f"d{v.op.name}"] = grad
        for v in variables + [x, cot]:
            feed[v] = rng.standard_normal(v.shape.as_list()).astype(dtype)
    return fetches, feed


@pytest.mark.cpu_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_direct_grouped_filter_gradient(graph, rng, monkeypatch, dtype):
    """Conv2DBackpropFilter (and the bias-fused form) of thin groups runs the direct kernel
    (the expanded filter's gradient, its own group's entries kept) for every stride,
    padding and dilation; equal to the interpreter's and the gemm kernel's, with 1 and 2
    of flowc's threads."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.delenv("FLOWC_GROUPED_CONV", raising=False)
    fetches, feed = _bwd_filter_graph(rng, dtype)
    sfx = "f32" if dtype == np.float32 else "f64"
    source = _source(graph, fetches, feed)
    direct = re.findall(rf"= flowc_conv2d_grouped_direct_{sfx}_\w+_bwd_filter\(", source)
    assert len(direct) == len(BWD_FILTER)
    tol = dict(rtol=2e-4, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    results = []
    for threads in ("2", "1"):
        monkeypatch.setenv("FLOWC_NUM_THREADS", threads)
        results.append(check_against_interpreter(graph, fetches, feed, **tol))
    monkeypatch.setenv("FLOWC_GROUPED_CONV", "gemm")
    assert "_bwd_filter(" not in _source(graph, fetches, feed)
    results.append(check_against_interpreter(graph, fetches, feed, **tol))
    for k in fetches:
        np.testing.assert_allclose(results[0][k], results[1][k], **tol)
        np.testing.assert_allclose(results[0][k], results[2][k], **tol)


@pytest.mark.cpu_only
def test_direct_grouped_filter_gradient_cut_for_flowcs_threads(graph, rng, monkeypatch):
    """Big enough to be cut into 2 parts (each summing into its own gradient, added in
    order): equal to the interpreter's."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.setenv("FLOWC_NUM_THREADS", "2")
    fetches, feed = _bwd_filter_graph(
        rng, np.float32, [((2, 28, 28, 128), 32, (3, 3), 128, (1, 1), "SAME", (1, 1))])
    check_against_interpreter(graph, fetches, feed, rtol=1e-3, atol=1e-3)
