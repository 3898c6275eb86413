"""Grouped Conv2D (input depth a multiple G > 1 of the filter's in-channels; ResNeXt, RegNet,
ShuffleNet's grouped 1x1s) compiled as ONE native kernel: flowc's grouped im2col + gemm
(``flowc_conv2d_grouped``, conv.c.j2) under FLOWC_CONV_ENGINE=blas, oneDNN's grouped
primitive (hwigo filter) under ``onednn`` where it is installed; no Split/ConcatV2 in the
optimized graph. Compiled C against the interpreter for 2, 4 and 8 groups by strides,
padding (SAME, VALID, explicit), dilations, NHWC and NCHW, 1x1 windows, with and without the
fused epilogues (bias, ReLU, the residual add), float64, and a batch fed at run time."""
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen import onednn
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter

TOL = dict(rtol=1e-4, atol=1e-4)

# (input NHWC, groups, filter KxK, outputs, strides, padding, dilations, epilogue)
CASES = [
    ((2, 9, 8, 8), 2, 3, 6, 1, "SAME", 1, "none"),
    ((1, 10, 9, 16), 4, 3, 8, 2, "VALID", 1, "bias_relu"),
    ((2, 8, 8, 16), 8, 3, 16, 1, "SAME", 2, "residual"),
    ((1, 7, 9, 32), 8, 1, 32, 1, "VALID", 1, "bias_relu"),          # grouped 1x1 (pointwise)
    ((2, 9, 7, 8), 4, 3, 12, 2, "SAME", 1, "residual_relu"),
    ((1, 8, 10, 12), 2, 2, 4, (2, 1), "EXPLICIT", 1, "bias"),
]


def _case(rng, i, case, nchw, dtype=np.float32):
    xs, groups, k, out, stride, padding, dilation, epi = case
    n, h, w, c = xs
    shape = (n, c, h, w) if nchw else xs
    x = fl.placeholder(dtype, shape, name=f"x{i}")
    f = fl.constant(rng.standard_normal((k, k, c // groups, out)).astype(dtype))
    strides = [stride] * 2 if isinstance(stride, int) else list(stride)
    attrs = {"padding": padding, "data_format": "NCHW" if nchw else "NHWC"}
    if nchw:
        attrs.update(strides=[1, 1] + strides, dilations=[1, 1, dilation, dilation])
    else:
        attrs.update(strides=[1] + strides + [1], dilations=[1, dilation, dilation, 1])
    if padding == "EXPLICIT":
        pads = [[0, 0], [0, 0], [1, 2], [2, 0]] if nchw else [[0, 0], [1, 2], [2, 0], [0, 0]]
        attrs["explicit_paddings"] = [p for pair in pads for p in pair]
    y = fl.apply_op("Conv2D", [x, f], attrs)
    fmt = "NCHW" if nchw else "NHWC"
    if epi != "none":
        y = fl.nn.bias_add(y, fl.constant(rng.standard_normal(out).astype(dtype)),
                           data_format=fmt)
    if epi.startswith("residual"):
        y = y + fl.constant(rng.standard_normal(tuple(y.shape)).astype(dtype))
    if epi.endswith("relu"):
        y = fl.nn.relu(y)
    return x, y, rng.standard_normal(shape).astype(dtype)


def _graph(rng, nchw, dtype=np.float32, cases=CASES):
    fetches, feed = {}, {}
    for i, case in enumerate(cases):
        x, y, value = _case(rng, i, case, nchw, dtype)
        fetches[f"case{i}"] = y
        feed[x] = value
    return fetches, feed


def _optimized(graph, fetches, feed):
    step = make_step_graph(graph, [x.output for x in feed],
                           [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    return step


def _ops(step):
    return [n.op for n in step.graph]


ENGINES = ["blas"] + (["onednn"] if onednn.available() else [])


@pytest.mark.cpu_only
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
def test_grouped_convs_are_one_kernel_and_match(graph, rng, monkeypatch, engine, nchw):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", engine)
    fetches, feed = _graph(rng, nchw)
    step = _optimized(graph, fetches, feed)
    ops = _ops(step)
    assert "Split" not in ops and "ConcatV2" not in ops and "SplitV" not in ops
    convs = [o for o in ops if o in ("Conv2D", "_FusedConv2D")]
    assert len(convs) == len(CASES)
    # every epilogue but "none" fuses into the convolution
    assert ops.count("_FusedConv2D") == sum(c[-1] != "none" for c in CASES)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    # flowc's kernels: im2col + gemm, or the direct one for thin groups (test_grouped_conv_direct)
    direct = len(re.findall(r"= flowc_conv2d_grouped_direct_f32_\w+\(", source))
    assert source.count("= flowc_conv2d_grouped_f32(") + direct + source.count(
        "flowc_dnnl_conv_f32(&") >= len(CASES)
    if engine == "onednn":
        assert source.count("flowc_dnnl_conv_f32(&") == len(CASES)
    check_against_interpreter(graph, fetches, feed, **TOL)


@pytest.mark.cpu_only
def test_grouped_float64_and_a_fed_batch(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    x = fl.placeholder(fl.float64, [None, 6, 7, 12], name="x")
    fetches = {}
    for k, (groups, out, s, p, d) in enumerate([(2, 4, 1, "SAME", 1), (4, 8, 2, "VALID", 1),
                                                (3, 6, 1, "SAME", 2), (6, 12, 1, "VALID", 1)]):
        f = fl.constant(rng.standard_normal((3, 3, 12 // groups, out)))
        y = fl.apply_op("Conv2D", [x, f], {"strides": [1, s, s, 1], "padding": p,
                                           "dilations": [1, d, d, 1]})
        fetches[f"c{k}"] = fl.nn.relu(fl.nn.bias_add(y, fl.constant(rng.standard_normal(out))))
    for batch in (3, 1, 0):
        check_against_interpreter(graph, fetches, {
            x: rng.standard_normal((batch, 6, 7, 12))}, rtol=1e-10, atol=1e-10)


@pytest.mark.cpu_only
def test_large_grouped_block_uses_flowcs_threads(graph, rng, monkeypatch):
    """A ResNeXt-sized grouped 3x3 (32 groups) big enough to be cut into parts for the
    threads, on flowc's kernel and (where installed) oneDNN's."""
    for engine in ENGINES:
        monkeypatch.setenv("FLOWC_CONV_ENGINE", engine)
        g = fl.Graph()
        with g.as_default():
            x = fl.placeholder(fl.float32, [1, 28, 28, 128], name="x")
            f = fl.constant(rng.standard_normal((3, 3, 4, 128)).astype(np.float32) * 0.1)
            y = fl.nn.relu(fl.nn.bias_add(
                fl.apply_op("Conv2D", [x, f], {"strides": [1, 1, 1, 1], "padding": "SAME"}),
                fl.constant(rng.standard_normal(128).astype(np.float32))))
            check_against_interpreter(g, {"y": y}, {
                x: rng.standard_normal((1, 28, 28, 128)).astype(np.float32)}, **TOL)
