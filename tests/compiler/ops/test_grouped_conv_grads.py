"""Gradients of a grouped Conv2D (input depth G times the filter's in-channels: Keras'
``Conv2D(groups=G)``, ResNeXt): Conv2DBackpropInput and Conv2DBackpropFilter with TensorFlow's
grouped shapes. The reference against one ungrouped backprop per group; compiled C (flowc's
grouped col2im / im2col + gemm under FLOWC_CONV_ENGINE=blas, oneDNN's grouped backward
primitives under ``onednn`` where installed) against the interpreter for 2, 3, 4 and 8 groups
by strides, padding, dilations, 1x1 windows, the bias-fused filter gradient, float64 and a
fed batch; shape errors; the per-group split of a gradient meant for a GPU; and a small
grouped model that trains. Finite differences of the grouped gradients are in
tests/dsl/test_gradients.py."""
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen import onednn
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
TOL = dict(rtol=2e-4, atol=2e-4)
ENGINES = ["blas"] + (["onednn"] if onednn.available() else [])

# (input NHWC, groups, KH x KW, outputs, strides, padding, dilations)
CASES = [
    ((2, 7, 6, 8), 2, (3, 3), 6, 1, "SAME", 1),
    ((1, 9, 8, 12), 3, (3, 2), 6, 2, "VALID", 1),
    ((2, 8, 7, 16), 4, (3, 3), 8, 1, "SAME", 2),
    ((2, 5, 6, 16), 8, (1, 1), 16, 1, "VALID", 1),             # grouped 1x1 (pointwise)
    ((1, 8, 9, 8), 4, (2, 3), 12, (2, 1), "EXPLICIT", 1),
]


def _attrs(stride, padding, dilation):
    strides = [stride] * 2 if isinstance(stride, int) else list(stride)
    attrs = {"strides": [1] + strides + [1], "padding": padding,
             "dilations": [1, dilation, dilation, 1]}
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = [0, 0, 1, 2, 2, 0, 0, 0]
    return attrs


def _grads(rng, case, i, dynamic=False, bias=False, dtype=np.float32):
    """Placeholders x, f (and b), a cotangent, the output, and d(sum(y * cot))/d(x, f, b)."""
    xs, groups, (kh, kw), out, stride, padding, dilation = case
    x = fl.placeholder(dtype, [None, *xs[1:]] if dynamic else xs, name=f"x{i}")
    f = fl.placeholder(dtype, [kh, kw, xs[3] // groups, out], name=f"f{i}")
    y = A("Conv2D", [x, f], _attrs(stride, padding, dilation))
    variables = [x, f]
    if bias:
        b = fl.placeholder(dtype, [out], name=f"b{i}")
        y = fl.nn.bias_add(y, b)
        variables.append(b)
    cot = fl.placeholder(dtype, [None] * 4, name=f"cot{i}")
    grads = fl.gradients(fl.reduce_sum(y * cot), variables)
    feed = {v: rng.standard_normal([xs[0] if d is None else d for d in v.shape.as_list()])
            .astype(dtype) for v in variables}
    with fl.Session(graph=x.graph, backend="interpreter") as s:
        y_shape = s.run(y, feed).shape
    feed[cot] = rng.standard_normal(y_shape).astype(dtype)
    fetches = {f"d{v.op.name}": g for v, g in zip(variables, grads)}
    return fetches, feed


def _source(graph, fetches, feed) -> str:
    step = make_step_graph(graph, [v.output for v in feed], [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    return emit_c(step.graph, step.feeds, step.retvals).source


def test_grouped_backprop_references_are_one_backprop_per_group(graph, rng):
    x = rng.standard_normal((2, 6, 5, 6))
    f = rng.standard_normal((3, 3, 2, 6))                      # 3 groups, 2 outputs each
    dy = rng.standard_normal((2, 3, 3, 6))
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    dx = A("Conv2DBackpropInput", [fl.constant(np.int32([2, 6, 5, 6])), fl.constant(f),
                                   fl.constant(dy)], attrs)
    df = A("Conv2DBackpropFilter", [fl.constant(x), fl.constant(np.int32([3, 3, 2, 6])),
                                    fl.constant(dy)], attrs)
    assert dx.shape == (2, 6, 5, 6) and df.shape == (3, 3, 2, 6)
    parts_dx = [A("Conv2DBackpropInput", [fl.constant(np.int32([2, 6, 5, 2])),
                                          fl.constant(f[..., 2 * k:2 * k + 2]),
                                          fl.constant(dy[..., 2 * k:2 * k + 2])], attrs)
                for k in range(3)]
    parts_df = [A("Conv2DBackpropFilter", [fl.constant(x[..., 2 * k:2 * k + 2]),
                                           fl.constant(np.int32([3, 3, 2, 2])),
                                           fl.constant(dy[..., 2 * k:2 * k + 2])], attrs)
                for k in range(3)]
    with fl.Session(backend="interpreter") as s:
        got_dx, got_df, pdx, pdf = s.run([dx, df, parts_dx, parts_df])
    np.testing.assert_allclose(got_dx, np.concatenate(pdx, axis=-1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_df, np.concatenate(pdf, axis=-1), rtol=1e-12, atol=1e-12)


@pytest.mark.cpu_only
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "fed_batch"])
def test_grouped_gradients_compile_and_match(graph, rng, monkeypatch, engine, dynamic):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", engine)
    fetches, feed = {}, {}
    for i, case in enumerate(CASES):
        f, d = _grads(rng, case, i, dynamic, bias=i % 2 == 0)   # even: the bias-fused df
        fetches.update(f)
        feed.update(d)
    source = _source(graph, fetches, feed)
    if engine == "blas":
        # thin groups with strides 1: the direct kernel (test_grouped_conv_direct.py)
        assert len(re.findall(r"= flowc_conv2d_bwd_input_grouped_f32\(", source)) + len(
            re.findall(r"= flowc_conv2d_grouped_direct_f32_\w+_bwd_input\(", source)) \
            == len(CASES)
        assert len(re.findall(r"= flowc_conv2d_bwd_filter_grouped_f32\(", source)) + len(
            re.findall(r"= flowc_conv2d_grouped_direct_f32_\w+_bwd_filter\(", source)) \
            == len(CASES)
        assert "flowc_dnnl_conv_bwd" not in source
    else:
        # oneDNN's grouped primitives, each with flowc's grouped kernel as its fallback
        assert len(re.findall(r"= flowc_dnnl_conv_bwd_data_f32\(&\w+, 0, \d+,", source)) \
            == len(CASES)
        assert len(re.findall(r"= flowc_dnnl_conv_bwd_weights_f32\(&\w+, 0, \d+,", source)) \
            == len(CASES)
    check_against_interpreter(graph, fetches, feed, **TOL)


@pytest.mark.cpu_only
@pytest.mark.parametrize("engine", ENGINES)
def test_grouped_gradients_nchw(graph, rng, monkeypatch, engine):
    """NCHW runs as the NHWC ops between transposes; the groups stay known through the
    input_sizes' reordering."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", engine)
    x = fl.placeholder(fl.float32, [None, 8, 7, 6], name="x")
    f = fl.placeholder(fl.float32, [3, 3, 2, 12], name="f")          # 4 groups
    y = A("Conv2D", [x, f], {"strides": [1, 1, 2, 1], "padding": "SAME", "data_format": "NCHW"})
    cot = fl.placeholder(fl.float32, [None] * 4, name="cot")
    dx, df = fl.gradients(fl.reduce_sum(y * cot), [x, f])
    feed = {x: rng.standard_normal((2, 8, 7, 6)).astype(np.float32),
            f: rng.standard_normal((3, 3, 2, 12)).astype(np.float32)}
    with fl.Session(graph=graph, backend="interpreter") as s:
        feed[cot] = rng.standard_normal(s.run(y, feed).shape).astype(np.float32)
    check_against_interpreter(graph, {"dx": dx, "df": df}, feed, **TOL)


@pytest.mark.cpu_only
def test_grouped_gradients_float64_and_empty_batches(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    x = fl.placeholder(fl.float64, [None, 6, 7, 12], name="x")
    f = fl.placeholder(fl.float64, [3, 3, 4, 6], name="f")     # 3 groups
    y = fl.nn.bias_add(fl.nn.conv2d(x, f, 2, "SAME"), fl.constant(rng.standard_normal(6)))
    dx, df = fl.gradients(fl.reduce_sum(fl.tanh(y)), [x, f])
    for batch in (2, 0):
        check_against_interpreter(graph, {"dx": dx, "df": df}, {
            x: rng.standard_normal((batch, 6, 7, 12)), f: rng.standard_normal((3, 3, 4, 6))},
            rtol=1e-10, atol=1e-10)


@pytest.mark.cpu_only
@pytest.mark.parametrize("nchw", [False, True], ids=["NHWC", "NCHW"])
def test_one_channel_per_group_gradients_become_depthwise(graph, rng, nchw):
    """Keras' Conv2D(groups=C) (ConvNeXt): the forward op runs as DepthwiseConv2dNative, and
    its gradients as the depthwise gradients (the filter reshaped), not C tiny groups."""
    shape = (2, 6, 7, 5) if nchw else (2, 7, 5, 6)
    x = fl.placeholder(fl.float32, [None, *shape[1:]], name="x")
    f = fl.placeholder(fl.float32, [3, 3, 1, 12], name="f")          # 6 groups, 2 outputs each
    fmt = "NCHW" if nchw else "NHWC"
    y = A("Conv2D", [x, f], {"strides": [1, 1, 2, 2] if nchw else [1, 2, 2, 1],
                             "padding": "SAME", "data_format": fmt})
    cot = fl.placeholder(fl.float32, [None] * 4, name="cot")
    dx, df = fl.gradients(fl.reduce_sum(y * cot), [x, f])
    feed = {x: rng.standard_normal(shape).astype(np.float32),
            f: rng.standard_normal((3, 3, 1, 12)).astype(np.float32)}
    with fl.Session(graph=graph, backend="interpreter") as s:
        feed[cot] = rng.standard_normal(s.run(y, feed).shape).astype(np.float32)
    step = make_step_graph(graph, [v.output for v in feed], [dx.output, df.output])
    optimize(step, NO_FOLDING)
    ops = {n.op for n in step.graph}
    assert {"DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"} <= ops
    assert not ops & {"Conv2DBackpropInput", "Conv2DBackpropFilter"}
    check_against_interpreter(graph, {"dx": dx, "df": df}, feed, **TOL)


@pytest.mark.cpu_only
@pytest.mark.parametrize("engine", ENGINES)
def test_fused_bias_gradients_of_a_grouped_layer(graph, rng, monkeypatch, engine):
    """fuse-conv's gradient fusions keep the groups: MaxPool(Relu(grouped conv + b)) makes
    the bias gradient a _MaxPoolGradArgmaxBias output beside a plain grouped filter gradient,
    and Relu(grouped conv + b) alone a _Conv2DBackpropFilterBias."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", engine)
    x = fl.placeholder(fl.float32, [None, 8, 8, 8], name="x")
    f1 = fl.placeholder(fl.float32, [3, 3, 2, 8], name="f1")         # 4 groups
    b1 = fl.placeholder(fl.float32, [8], name="b1")
    f2 = fl.placeholder(fl.float32, [3, 3, 4, 8], name="f2")         # 2 groups
    b2 = fl.placeholder(fl.float32, [8], name="b2")
    h = fl.nn.max_pool(fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, f1, 1, "SAME"), b1)), 2, 2,
                       "VALID")
    y = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(h, f2, 1, "SAME"), b2))
    cot = fl.placeholder(fl.float32, [None] * 4, name="cot")
    variables = [x, f1, b1, f2, b2]
    grads = fl.gradients(fl.reduce_sum(y * cot), variables)
    fetches = {f"d{v.op.name}": g for v, g in zip(variables, grads)}
    feed = {v: rng.standard_normal([2 if d is None else d for d in v.shape.as_list()])
            .astype(np.float32) for v in variables}
    feed[cot] = rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
    step = make_step_graph(graph, [v.output for v in feed],
                           [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    ops = [n.op for n in step.graph]
    assert "_MaxPoolGradArgmaxBias" in ops and "_Conv2DBackpropFilterBias" in ops
    assert ops.count("Conv2DBackpropFilter") == 1 and "BiasAddGrad" not in ops
    check_against_interpreter(graph, fetches, feed, **TOL)


@pytest.mark.cpu_only
def test_grouped_gradients_cut_for_flowcs_threads(graph, rng, monkeypatch):
    """Gradients big enough to be cut into parts for 2 threads (the input gradient by whole
    images, the filter gradient's parts summed in order) equal the interpreter's."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    monkeypatch.setenv("FLOWC_NUM_THREADS", "2")
    fetches, feed = _grads(rng, ((4, 16, 16, 32), 4, (3, 3), 32, 1, "SAME", 1), 0, bias=True)
    check_against_interpreter(graph, fetches, feed, **TOL)


def test_grouped_backprop_shape_errors_name_the_node():
    g = fl.Graph()
    with g.as_default():
        dy = fl.zeros([1, 4, 4, 8])
        with pytest.raises(FlowcError, match=r"BadInput.*divisor"):
            A("Conv2DBackpropInput", [fl.constant(np.int32([1, 4, 4, 6])),
                                      fl.zeros([3, 3, 4, 8]), dy],
              {"strides": [1, 1, 1, 1], "padding": "SAME"}, name="BadInput")
        with pytest.raises(FlowcError, match=r"BadFilter.*not a multiple of the number"):
            A("Conv2DBackpropFilter", [fl.zeros([1, 4, 4, 6]), fl.constant(np.int32([3, 3, 2, 4])),
                                       fl.zeros([1, 4, 4, 4])],
              {"strides": [1, 1, 1, 1], "padding": "SAME"}, name="BadFilter")
        with pytest.raises(FlowcError, match=r"BadFilter_1.*divisor"):
            A("Conv2DBackpropFilter", [fl.zeros([1, 4, 4, 6]), fl.constant(np.int32([3, 3, 4, 8])),
                                       fl.zeros([1, 4, 4, 8])],
              {"strides": [1, 1, 1, 1], "padding": "SAME"}, name="BadFilter")


@pytest.mark.cpu_only
def test_a_small_grouped_model_trains(graph, rng, monkeypatch):
    """Keras-style: a grouped 3x3 convolution (4 groups) with bias and ReLU, then a dense
    layer, trained with SGD through fl.Session: the loss goes down."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    x = fl.placeholder(fl.float32, [None, 6, 6, 8], name="x")
    labels = fl.placeholder(fl.int32, [None], name="labels")
    f = fl.Variable((rng.standard_normal((3, 3, 2, 8)) * 0.3).astype(np.float32), name="f")
    b = fl.Variable(np.zeros(8, np.float32), name="b")
    w = fl.Variable((rng.standard_normal((8, 3)) * 0.3).astype(np.float32), name="w")
    h = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, f, 1, "SAME"), b))
    logits = fl.matmul(fl.reduce_mean(h, axis=[1, 2]), w)
    loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    train = fl.train.GradientDescentOptimizer(0.5).minimize(loss)
    data = rng.standard_normal((12, 6, 6, 8)).astype(np.float32)
    target = np.argmax(data.mean(axis=(1, 2))[:, :3], axis=1).astype(np.int32)
    feed = {x: data, labels: target}
    with fl.Session(graph=graph) as s:
        s.run(fl.global_variables_initializer())
        first = s.run(loss, feed)
        for _ in range(30):
            s.run(train, feed)
        last = s.run(loss, feed)
    assert np.isfinite(last) and last < 0.7 * first
