"""fuse-conv joins a convolution's bias, residual Add and activation (ReLU, ReLU6 also as
ONNX's Clip(0, 6), Elu, LeakyRelu) to the convolution (``_FusedConv2D``, and
``_FusedDepthwiseConv2dNative`` for a depthwise one), a
ReLU's mask to the max pooling gradient under it (``_MaxPoolReluGrad``), a layer's bias
gradient to its filter gradient (``_Conv2DBackpropFilterBias``), and has max pooling record
where its maxima are for its gradient (``_MaxPoolArgmax``, ``_MaxPoolGradArgmax``, up to
255-pixel windows; larger ones keep searching the input). Compiled results equal
the interpreter's (the oracle) for odd sizes, strides 1 and 2 (and windows apart or
overlapping), SAME and VALID padding, batch 1, channel counts that are no multiple of 4 or 8
(and over the pooling kernel's 256-channel block), f64 and empty batches; what must not fuse
keeps its ops."""
import numpy as np
import pytest

import dsl as fl
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter


def _ops(fetches, feeds):
    step = make_step_graph(fl.get_default_graph(), [f.output for f in feeds],
                           [f.output for f in fetches], [])
    optimize(step, NO_FOLDING)                  # as the oracle compiles them
    return [n.op for n in step.graph]


def _normal(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# (input shape, filter shape, stride, padding, relu)
CONV_CASES = [
    ((2, 7, 9, 3), (3, 3, 3, 5), 1, "SAME", True),
    ((2, 7, 9, 3), (3, 2, 3, 6), 2, "VALID", False),
    ((1, 11, 6, 5), (5, 5, 5, 7), 2, "SAME", True),
    ((3, 5, 4, 6), (1, 1, 6, 9), 1, "VALID", True),      # 1x1: no im2col
    ((2, 4, 4, 1), (5, 5, 1, 3), 1, "SAME", False),      # window larger than the input
]


def test_conv_bias_relu_fuses_and_matches_the_interpreter(graph, rng):
    fetches, feed, feeds = {}, {}, []
    for i, (xs, fs, stride, padding, relu) in enumerate(CONV_CASES):
        x = fl.placeholder(fl.float32, [None, *xs[1:]], name=f"x{i}")
        f = fl.placeholder(fl.float32, fs, name=f"f{i}")
        b = fl.placeholder(fl.float32, [fs[3]], name=f"b{i}")
        y = fl.nn.bias_add(fl.nn.conv2d(x, f, stride, padding), b)
        fetches[f"case{i}"] = fl.nn.relu(y) if relu else y
        feed.update({x: _normal(rng, xs), f: _normal(rng, fs), b: _normal(rng, fs[3])})
        feeds += [x, f, b]
    x64 = fl.placeholder(fl.float64, [2, 6, 5, 3], name="x64")
    f64 = fl.constant(rng.standard_normal((3, 3, 3, 4)))
    fetches["f64"] = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x64, f64, 2, "SAME"),
                                               fl.constant(rng.standard_normal(4))))
    feed[x64] = rng.standard_normal((2, 6, 5, 3))
    ops = _ops(list(fetches.values()), feeds + [x64])
    assert ops.count("_FusedConv2D") == len(fetches)
    assert not {"Conv2D", "BiasAdd", "Relu"} & set(ops)
    check_against_interpreter(graph, fetches, feed)
    for i, (xs, *_rest) in enumerate(CONV_CASES):              # empty batches at run time
        feed[graph.get_tensor_by_name(f"x{i}:0")] = np.zeros((0, *xs[1:]), np.float32)
    check_against_interpreter(graph, {k: v for k, v in fetches.items() if k != "f64"}, feed)


def test_a_convolution_used_elsewhere_keeps_its_ops(graph, rng):
    x = fl.placeholder(fl.float32, [2, 5, 5, 2], name="x")
    f = fl.placeholder(fl.float32, [3, 3, 2, 4], name="f")
    b = fl.placeholder(fl.float32, [4], name="b")
    conv = fl.nn.conv2d(x, f, 1, "SAME")
    shifted = fl.nn.bias_add(conv, b)
    fetches = {"conv": conv, "relu": fl.nn.relu(shifted), "shifted": shifted}
    ops = _ops(list(fetches.values()), [x, f, b])
    assert "_FusedConv2D" not in ops and "Conv2D" in ops
    check_against_interpreter(graph, fetches, {x: _normal(rng, (2, 5, 5, 2)),
                                               f: _normal(rng, (3, 3, 2, 4)), b: _normal(rng, 4)})



def _activations(y, kind: str):
    """``y`` through the activation ``kind`` (as an op, or as the clamps ONNX's Clip makes)."""
    if kind == "Relu6":
        return fl.nn.relu6(y)
    if kind == "Clip06":
        return fl.minimum(fl.maximum(y, 0.0), 6.0)
    if kind == "Max0":
        return fl.maximum(y, 0.0)
    if kind == "Elu":
        return fl.nn.elu(y)
    if kind == "LeakyRelu":
        return fl.nn.leaky_relu(y, alpha=0.3)
    return fl.nn.relu(y) if kind == "Relu" else y


# (input shape, filter shape, stride, padding, residual, activation): im2col + gemm, 1x1
# (no im2col), the direct kernel (few taps, whole vectors of output channels), no input
# channels; depthwise filters are [KH, KW, C, M]
EPILOGUE_CASES = [
    ("conv", (2, 7, 9, 3), (3, 3, 3, 5), 1, "SAME", True, "Relu"),
    ("conv", (2, 7, 9, 3), (3, 3, 3, 6), 2, "VALID", True, "Relu6"),
    ("conv", (1, 6, 5, 4), (1, 1, 4, 7), 1, "VALID", True, "Clip06"),
    ("conv", (2, 9, 8, 1), (5, 5, 1, 8), 2, "SAME", True, "LeakyRelu"),
    ("conv", (2, 9, 8, 1), (3, 3, 1, 8), 1, "SAME", False, "Clip06"),
    ("conv", (2, 6, 6, 3), (3, 3, 3, 4), 1, "SAME", True, None),
    ("conv", (2, 5, 5, 0), (3, 3, 0, 4), 1, "SAME", True, "Elu"),
    ("depthwise", (2, 7, 6, 5), (3, 3, 5, 2), 1, "SAME", True, "Relu6"),
    ("depthwise", (2, 7, 6, 8), (3, 3, 8, 1), 2, "SAME", False, "Clip06"),
    ("depthwise", (1, 5, 5, 3), (3, 3, 3, 1), 1, "VALID", True, "Max0"),
    ("depthwise", (2, 5, 4, 3), (1, 1, 3, 3), 1, "VALID", True, "LeakyRelu"),
]


def test_conv_epilogues_fuse_and_match_the_interpreter(graph, rng):
    """Bias, residual and activation in the convolution's epilogue, both kinds of
    convolution, every activation, every C path; empty batches too."""
    fetches, feed, feeds = {}, {}, []
    for i, (kind, xs, fs, stride, padding, residual, act) in enumerate(EPILOGUE_CASES):
        x = fl.placeholder(fl.float32, [None, *xs[1:]], name=f"x{i}")
        f = fl.placeholder(fl.float32, fs, name=f"f{i}")
        channels = fs[3] if kind == "conv" else fs[2] * fs[3]
        b = fl.placeholder(fl.float32, [channels], name=f"b{i}")
        conv = fl.nn.conv2d(x, f, stride, padding) if kind == "conv" else \
            fl.nn.depthwise_conv2d_native(x, f, [1, stride, stride, 1], padding)
        y = fl.nn.bias_add(conv, b)
        if residual:
            r = fl.placeholder(fl.float32, [None, *list(y.shape)[1:]], name=f"r{i}")
            y = r + y if i % 2 else y + r
            feed[r] = _normal(rng, (xs[0], *list(y.shape)[1:]))
            feeds.append(r)
        fetches[f"case{i}"] = _activations(y, act)
        feed.update({x: _normal(rng, xs) * 2, f: _normal(rng, fs), b: _normal(rng, channels)})
        feeds += [x, f, b]
    ops = _ops(list(fetches.values()), feeds)
    convs = sum(c[0] == "conv" for c in EPILOGUE_CASES)
    assert ops.count("_FusedConv2D") == convs
    assert ops.count("_FusedDepthwiseConv2dNative") == len(EPILOGUE_CASES) - convs
    assert not {"Conv2D", "DepthwiseConv2dNative", "BiasAdd", "AddV2", "Relu", "Relu6",
                "Maximum", "Minimum", "Elu", "LeakyRelu", "Fused"} & set(ops)
    check_against_interpreter(graph, fetches, feed)
    for i, (_, xs, *_rest) in enumerate(EPILOGUE_CASES):      # empty batches at run time
        feed[graph.get_tensor_by_name(f"x{i}:0")] = np.zeros((0, *xs[1:]), np.float32)
        r = graph.get_tensor_by_name(f"r{i}:0") if EPILOGUE_CASES[i][5] else None
        if r is not None:
            feed[r] = np.zeros((0, *list(r.shape)[1:]), np.float32)
    check_against_interpreter(graph, fetches, feed)


def test_a_residual_of_another_shape_or_a_clamp_of_other_bounds_stays_apart(graph, rng):
    x = fl.placeholder(fl.float32, [2, 5, 5, 3], name="x")
    f = fl.constant(_normal(rng, (3, 3, 3, 4)))
    b = fl.constant(_normal(rng, 4))
    row = fl.placeholder(fl.float32, [1, 1, 5, 4], name="row")       # broadcasts over rows
    y1 = fl.nn.bias_add(fl.nn.conv2d(x, f, 1, "SAME"), b) + row
    g = fl.constant(_normal(rng, (3, 3, 3, 4)))
    y2 = fl.minimum(fl.maximum(fl.nn.bias_add(fl.nn.conv2d(x, g, 1, "SAME"), b), 0.0), 5.0)
    fetches = {"broadcast": y1, "clip05": y2}
    ops = _ops(list(fetches.values()), [x, row])
    # the bias (and Maximum(y, 0), a ReLU) fused; the broadcast Add and the Minimum stay
    assert ops.count("_FusedConv2D") == 2 and {"AddV2", "Minimum"} <= set(ops)
    check_against_interpreter(graph, fetches, {x: _normal(rng, (2, 5, 5, 3)),
                                               row: _normal(rng, (1, 1, 5, 4))})


def test_a_fused_conv_rejects_a_residual_of_the_wrong_shape_at_run_time(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4, 4, 2], name="x")
    r = fl.placeholder(fl.float32, [None, 4, 4, 3], name="r")
    y = fl.apply_op("_FusedConv2D", [x, fl.constant(_normal(rng, (1, 1, 2, 3))),
                                     [fl.constant(_normal(rng, 3)), r]],
                    {"strides": [1, 1, 1, 1], "padding": "SAME",
                     "fused_ops": ["BiasAdd", "Add", "Relu"]})
    with fl.Session(graph=graph) as s:
        with pytest.raises(fl.errors.InvalidArgumentError, match="residual's dim 0"):
            s.run(y, {x: np.zeros((2, 4, 4, 2), np.float32),
                      r: np.zeros((3, 4, 4, 3), np.float32)})

# (input shape, window, stride, padding): windows that tile the input, leave rows and
# columns out (VALID on odd sizes, stride above the window), start in the padding (SAME with
# padding before), or overlap.
POOL_CASES = [
    ((2, 7, 9, 3), 2, 2, "VALID"),
    ((1, 8, 8, 5), 2, 2, "SAME"),
    ((2, 4, 7, 6), 3, 3, "SAME"),
    ((2, 8, 7, 3), 2, 3, "VALID"),
    ((2, 7, 6, 4), 3, 2, "SAME"),
    ((1, 5, 5, 300), 2, 2, "SAME"),
    ((1, 17, 16, 3), 16, 16, "SAME"),            # 256 pixels: too many for u8 places
]
ARGMAX_CASES = len(POOL_CASES) - 1


def _pool_gradients(rng, relu: bool):
    zs, grads, feed = [], {}, {}
    for i, (shape, k, s, padding) in enumerate(POOL_CASES):
        z = fl.placeholder(fl.float32, [None, *shape[1:]], name=f"z{i}")
        h = fl.nn.relu(z) if relu else z
        pooled = fl.nn.max_pool(h, k, s, padding)
        weights = fl.constant(_normal(rng, list(pooled.shape)[1:]))
        grads[f"case{i}"] = fl.gradients(fl.reduce_sum(pooled * weights), [z])[0]
        grads[f"pooled{i}"] = pooled
        # rounded values: ties in a window, and (after the ReLU) windows of zeros
        feed[z] = np.round(rng.uniform(-2, 2, shape)).astype(np.float32)
        zs.append(z)
    return zs, grads, feed


def test_max_pool_relu_gradient_fuses_and_matches_the_interpreter(graph, rng):
    zs, grads, feed = _pool_gradients(rng, relu=True)
    ops = _ops(list(grads.values()), zs)
    assert ops.count("_MaxPoolArgmax") == ops.count("_MaxPoolGradArgmax") == ARGMAX_CASES
    assert ops.count("_MaxPoolReluGrad") == 1 and ops.count("MaxPool") == 1
    assert "ReluGrad" not in ops and "MaxPoolGrad" not in ops
    check_against_interpreter(graph, grads, feed)
    for z in zs:
        feed[z] = np.zeros((0, *list(z.shape)[1:]), np.float32)
    check_against_interpreter(graph, grads, feed)


def test_max_pool_gradient_without_relu_matches_the_interpreter(graph, rng):
    zs, grads, feed = _pool_gradients(rng, relu=False)
    ops = _ops(list(grads.values()), zs)
    assert ops.count("_MaxPoolGradArgmax") == ARGMAX_CASES and ops.count("MaxPoolGrad") == 1
    assert "_MaxPoolReluGrad" not in ops
    check_against_interpreter(graph, grads, feed)


# (input shape, filter shape, stride, padding): im2col + gemm, a 1x1 window (no im2col), the
# direct kernel (few taps, whole vectors of output channels), no input channels
LAYER_CASES = [
    ((2, 7, 9, 3), (3, 3, 3, 5), 1, "SAME"),
    ((1, 6, 5, 4), (1, 1, 4, 7), 1, "VALID"),
    ((2, 9, 8, 1), (5, 5, 1, 8), 2, "SAME"),
    ((2, 5, 5, 0), (3, 3, 0, 4), 1, "SAME"),
]


def test_filter_and_bias_gradients_fuse_and_match_the_interpreter(graph, rng):
    grads, feed, feeds = {}, {}, []
    for i, (xs, fs, stride, padding) in enumerate(LAYER_CASES):
        x = fl.placeholder(fl.float32, [None, *xs[1:]], name=f"x{i}")
        f = fl.placeholder(fl.float32, fs, name=f"f{i}")
        b = fl.placeholder(fl.float32, [fs[3]], name=f"b{i}")
        y = fl.nn.bias_add(fl.nn.conv2d(x, f, stride, padding), b)
        weights = fl.constant(_normal(rng, list(y.shape)[1:]))
        df, db = fl.gradients(fl.reduce_sum(y * weights), [f, b])
        grads.update({f"filter{i}": df, f"bias{i}": db})
        feed.update({x: _normal(rng, xs), f: _normal(rng, fs), b: _normal(rng, fs[3])})
        feeds += [x, f, b]
    ops = _ops(list(grads.values()), feeds)
    assert ops.count("_Conv2DBackpropFilterBias") == len(LAYER_CASES)
    assert "BiasAddGrad" not in ops and "Conv2DBackpropFilter" not in ops
    check_against_interpreter(graph, grads, feed)
    for i, (xs, *_rest) in enumerate(LAYER_CASES):             # empty batches at run time
        feed[graph.get_tensor_by_name(f"x{i}:0")] = np.zeros((0, *xs[1:]), np.float32)
    check_against_interpreter(graph, grads, feed)


# (input shape, filter shape, window, stride, padding, relu, dtype): a convolution layer under
# a max pool: windows that tile the input (rows and columns left out on odd sizes), that
# overlap, channels below, at and above one vector's lanes, float64
POOLED_LAYER_CASES = [
    ((2, 9, 7, 3), (3, 3, 3, 8), 2, 2, "VALID", True, np.float32),
    ((1, 8, 8, 2), (3, 3, 2, 19), 2, 2, "SAME", True, np.float32),
    ((2, 7, 6, 4), (3, 3, 4, 5), 3, 2, "SAME", True, np.float32),
    ((2, 6, 6, 3), (1, 1, 3, 6), 2, 2, "VALID", False, np.float32),
    ((2, 7, 7, 2), (3, 3, 2, 6), 2, 2, "VALID", True, np.float64),
]


def test_a_pooled_layer_sums_its_bias_gradient_in_the_pooling_gradient(graph, rng):
    grads, feed, feeds = {}, {}, []
    for i, (xs, fs, k, s, padding, relu, npt) in enumerate(POOLED_LAYER_CASES):
        dtype = fl.float64 if npt is np.float64 else fl.float32
        x = fl.placeholder(dtype, [None, *xs[1:]], name=f"x{i}")
        f = fl.placeholder(dtype, fs, name=f"f{i}")
        b = fl.placeholder(dtype, [fs[3]], name=f"b{i}")
        h = fl.nn.bias_add(fl.nn.conv2d(x, f, 1, "SAME"), b)
        pooled = fl.nn.max_pool(fl.nn.relu(h) if relu else h, k, s, padding)
        weights = fl.constant(_normal(rng, list(pooled.shape)[1:], npt))
        df, db = fl.gradients(fl.reduce_sum(pooled * weights), [f, b])
        grads.update({f"filter{i}": df, f"bias{i}": db})
        # rounded: ties in windows, zeros after the ReLU
        feed.update({x: np.round(rng.uniform(-2, 2, xs)).astype(npt),
                     f: np.round(rng.uniform(-1, 1, fs)).astype(npt),
                     b: np.round(rng.uniform(-1, 1, fs[3])).astype(npt)})
        feeds += [x, f, b]
    ops = _ops(list(grads.values()), feeds)
    cases = len(POOLED_LAYER_CASES)
    assert ops.count("_MaxPoolGradArgmaxBias") == ops.count("Conv2DBackpropFilter") == cases
    assert "_Conv2DBackpropFilterBias" not in ops and "BiasAddGrad" not in ops
    assert "_MaxPoolGradArgmax" not in ops
    check_against_interpreter(graph, grads, feed)
    for i, (xs, *_rest) in enumerate(POOLED_LAYER_CASES):      # empty batches at run time
        feed[graph.get_tensor_by_name(f"x{i}:0")] = np.zeros((0, *xs[1:]), _rest[-1])
    got = check_against_interpreter(graph, grads, feed)
    assert not any(got[f"bias{i}"].any() for i in range(cases))
