"""The layout pass on whole CNNs: NCHW models (from ONNX, and TensorFlow graphs written with
data_format="NCHW") run in NHWC inside, with their batch norms folded into the convolutions
(fold-batch-norm) and each convolution's bias, residual Add and activation in its epilogue
(fuse-conv). Compiled results equal the numpy interpreter's on the graph as written (the
oracle); the passes' effect is counted on the optimized step graph."""
from __future__ import annotations

import importlib.util
import os
from typing import Dict, List

import numpy as np
import pytest

import dsl as fl
from compiler.ir.op_registry import has_op
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter
from repo_paths import ROOT

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from dsl.onnx import import_graph  # noqa: E402

DEFAULT = PipelineOptions()
NO_LAYOUT = PipelineOptions(disable=("layout",))
# Folding a batch norm into a filter rounds once where the graph as written rounds twice.
TOL = dict(rtol=1e-4, atol=1e-5)


def _ops(graph, fetches, feeds, options=DEFAULT) -> List[str]:
    step = make_step_graph(graph, [f.output for f in feeds], [f.output for f in fetches], [])
    optimize(step, options)
    return [n.op for n in step.graph]


def _fused_ops(graph, fetches, feeds) -> List[List[str]]:
    step = make_step_graph(graph, [f.output for f in feeds], [f.output for f in fetches], [])
    optimize(step, DEFAULT)
    return [list(n.attrs["fused_ops"]) for n in step.graph if n.op.startswith("_Fused")]


def _resnet_builder():
    path = os.path.join(ROOT, "examples", "benchmarks", "make_resnet_onnx.py")
    spec = importlib.util.spec_from_file_location("make_resnet_onnx", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _import(model, graph):
    imported = import_graph(model, "model.onnx", graph)
    (x,) = imported.inputs.values()
    (y,) = imported.outputs.values()
    return x, y


def test_resnet_from_onnx_keeps_one_transpose_and_matches_the_interpreter(graph, rng):
    """ResNet-18's structure (20 convolutions with batch norm, 8 residual blocks, 3 of them
    with a projection shortcut) at a small width: the Transposes around every convolution
    (41 of them) cancel but the input's, every batch norm folds, and every block's second
    convolution adds the shortcut and applies the ReLU in its epilogue."""
    model = _resnet_builder().build(width=0.125, size=24, batch=2, seed=3)
    x, y = _import(model, graph)
    ops = _ops(graph, [y], [x])
    assert ops.count("Transpose") == 1
    assert _ops(graph, [y], [x], NO_LAYOUT).count("Transpose") > 30
    assert not {"Conv2D", "Sub", "Mul", "Relu", "Fused"} & set(ops)
    fused = _fused_ops(graph, [y], [x])
    assert len(fused) == 20
    assert fused.count(["BiasAdd", "Add", "Relu"]) == 8
    assert fused.count(["BiasAdd", "Relu"]) == 9 and fused.count(["BiasAdd"]) == 3
    feed = {x: rng.standard_normal((2, 3, 24, 24)).astype(np.float32)}
    check_against_interpreter(graph, [y], feed, options=DEFAULT, **TOL)


class _OnnxBuilder:
    """Nodes and initializers of a small ONNX graph."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.count = rng, [], [], 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value) -> str:
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), n))
        return n

    def node(self, op: str, inputs, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        r = self.rng
        w = self.const(r.standard_normal((cout, cin // group, k, k)) * 0.4)
        y = self.node("Conv", [x, w, self.const(r.standard_normal(cout) * 0.1)],
                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                      group=group)
        stats = [1 + 0.1 * r.standard_normal(cout), 0.1 * r.standard_normal(cout),
                 0.1 * r.standard_normal(cout), 1 + 0.1 * r.random(cout)]
        return self.node("BatchNormalization", [y] + [self.const(p) for p in stats])

    def relu6(self, x: str) -> str:
        return self.node("Clip", [x, self.const(0.0), self.const(6.0)])

    def model(self, x_shape, out: str, out_shape, opset: int = 13):
        g = helper.make_graph(
            self.nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_mobilenet_blocks_from_onnx_run_in_nhwc_with_depthwise_epilogues(graph, rng):
    """MobileNetV2's inverted residual blocks: 1x1 expansion, depthwise 3x3 (a grouped Conv),
    1x1 projection, each with batch norm, Clip(0, 6) as ReLU6, a residual Add where the shape
    allows; then global average pooling and Gemm."""
    b = _OnnxBuilder(rng)
    h = b.relu6(b.conv_bn("x", 3, 8, 3, 2))
    for cin, cout, stride in ((8, 8, 1), (8, 16, 2), (16, 16, 1)):
        y = b.relu6(b.conv_bn(h, cin, cin * 4, 1))
        y = b.relu6(b.conv_bn(y, cin * 4, cin * 4, 3, stride, group=cin * 4))
        y = b.conv_bn(y, cin * 4, cout, 1)
        h = b.node("Add", [h, y]) if stride == 1 and cin == cout else y
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h])])
    b.nodes.append(helper.make_node("Gemm", [h, b.const(rng.standard_normal((16, 5))),
                                             b.const(rng.standard_normal(5))], ["logits"]))
    x, y = _import(b.model([2, 3, 16, 16], "logits", [2, 5]), graph)
    ops = _ops(graph, [y], [x])
    assert ops.count("Transpose") == 1
    assert ops.count("_FusedDepthwiseConv2dNative") == 3 and ops.count("_FusedConv2D") == 7
    fused = _fused_ops(graph, [y], [x])
    assert fused.count(["BiasAdd", "Relu6"]) == 7 and fused.count(["BiasAdd", "Add"]) == 2
    assert not {"Maximum", "Minimum", "Mul", "Sub", "Fused"} & set(ops)
    feed = {x: (rng.standard_normal((2, 3, 16, 16)) * 2).astype(np.float32)}
    check_against_interpreter(graph, [y], feed, options=DEFAULT, **TOL)


def test_an_nchw_tensorflow_graph_runs_in_nhwc(graph, rng):
    """Conv2D, BiasAdd, MaxPool, AvgPool and DepthwiseConv2dNative with data_format="NCHW"
    (no C kernel takes NCHW convolutions: each becomes its NHWC form), a concat along the
    channels, an elementwise op with a per-channel [C, 1, 1] constant, a Pad and a mean over
    the spatial dims: one Transpose on the input remains, the output being [N, C]."""
    x = fl.placeholder(fl.float32, [None, 3, 11, 10], name="x")
    f = fl.constant(rng.standard_normal((3, 3, 3, 6)).astype(np.float32))
    d = fl.constant(rng.standard_normal((3, 3, 6, 2)).astype(np.float32))
    nchw = {"data_format": "NCHW"}
    c = fl.apply_op("Conv2D", [x, f], dict(nchw, strides=[1, 1, 2, 1], padding="EXPLICIT",
                                           explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1]))
    c = fl.nn.relu(fl.nn.bias_add(c, rng.standard_normal(6).astype(np.float32),
                                  data_format="NCHW"))
    p = fl.apply_op("MaxPool", [c], dict(nchw, ksize=[1, 1, 3, 3], strides=[1, 1, 2, 2],
                                        padding="SAME"))
    dw = fl.apply_op("DepthwiseConv2dNative", [p, d], dict(nchw, strides=[1, 1, 1, 1],
                                                            padding="SAME"))
    a = fl.apply_op("AvgPool", [p], dict(nchw, ksize=[1, 1, 2, 2], strides=[1, 1, 1, 1],
                                         padding="SAME"))
    cat = fl.concat([dw, a], axis=1)                                        # 12 + 6 channels
    scaled = cat * rng.standard_normal((18, 1, 1)).astype(np.float32)
    padded = fl.pad(scaled, [[0, 0], [0, 0], [1, 1], [2, 0]])
    y = fl.reduce_mean(padded, axis=[2, 3])
    assert _ops(graph, [y], [x]).count("Transpose") == 1
    check_against_interpreter(graph, [y], {x: rng.standard_normal((2, 3, 11, 10)).astype(
        np.float32)}, options=DEFAULT, **TOL)


def test_a_training_step_keeps_its_batch_norm(graph, rng):
    """Filters and statistics that are variables (a training step) fold nothing; a constant
    batch norm after a variable filter neither."""
    x = fl.placeholder(fl.float32, [None, 5, 5, 2], name="x")
    f = fl.Variable(rng.standard_normal((3, 3, 2, 4)).astype(np.float32), name="f")
    scale = fl.Variable(np.ones(4, np.float32), name="scale")
    y = fl.nn.conv2d(x, f, 1, "SAME") * scale + 1.0
    z = fl.nn.conv2d(x, f, 1, "SAME") * np.float32(2.0) - 1.0
    ops = _ops(graph, [y, z], [x], PipelineOptions(disable=("fuse",)))
    assert ops.count("Mul") == 2 and "BiasAdd" not in ops and "_FusedConv2D" not in ops


def test_batch_norm_folds_into_conv_depthwise_and_dense_layers(graph, rng):
    """Decomposed batch norms (as the ONNX importer and Keras' frozen graphs make them) after a
    convolution, a depthwise convolution and a Dense layer fold into their weights, in f32 and
    f64."""
    fetches: Dict[str, object] = {}
    feed = {}
    for dtype in (np.float32, np.float64):
        x = fl.placeholder(dtype, [None, 6, 6, 3], name=f"x_{np.dtype(dtype).name}")
        feed[x] = rng.standard_normal((2, 6, 6, 3)).astype(dtype)

        def c(*shape):
            return fl.constant(rng.standard_normal(shape).astype(dtype))

        def bn(v, channels):
            mean, var = c(channels), fl.constant((rng.random(channels) + 0.5).astype(dtype))
            return (v - mean) * (c(channels) * fl.rsqrt(var + 1e-3)) + c(channels)
        conv = bn(fl.nn.bias_add(fl.nn.conv2d(x, c(3, 3, 3, 4), 2, "SAME"), c(4)), 4)
        dw = bn(fl.nn.depthwise_conv2d_native(x, c(3, 3, 3, 2), [1, 1, 1, 1], "VALID"), 6)
        dense = bn(fl.matmul(fl.reshape(x, [-1, 108]), c(108, 5)), 5)
        name = np.dtype(dtype).name
        fetches.update({f"conv_{name}": fl.nn.relu(conv), f"dw_{name}": dw,
                        f"dense_{name}": dense})
    ops = _ops(graph, list(fetches.values()), list(feed))
    assert not {"Sub", "Mul", "AddV2", "Rsqrt", "Fused"} & set(ops)
    assert ops.count("_FusedConv2D") == 2 and ops.count("_FusedDepthwiseConv2dNative") == 2
    assert ops.count("_MatMulBiasAdd") == 2
    check_against_interpreter(graph, fetches, feed, options=DEFAULT, **TOL)


@pytest.mark.skipif(not has_op("FusedBatchNormV3"), reason="FusedBatchNormV3 is not an op yet")
def test_fused_batch_norm_nchw_runs_in_nhwc_and_folds(graph, rng):
    """TensorFlow's inference FusedBatchNormV3 (NCHW, constant statistics) after an NCHW
    convolution: NHWC inside, folded into the filter."""
    x = fl.placeholder(fl.float32, [None, 2, 6, 6], name="x")
    f = fl.constant(rng.standard_normal((3, 3, 2, 4)).astype(np.float32))
    c = fl.apply_op("Conv2D", [x, f], {"data_format": "NCHW", "strides": [1, 1, 1, 1],
                                       "padding": "SAME"})
    stats = [fl.constant(v.astype(np.float32)) for v in (
        rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4),
        rng.random(4) + 0.5)]
    y = fl.nn.relu(fl.apply_op("FusedBatchNormV3", [c, *stats],
                               {"data_format": "NCHW", "is_training": False,
                                "epsilon": 0.001})[0])
    ops = _ops(graph, [y], [x])
    assert "FusedBatchNormV3" not in ops and ops.count("Transpose") == 2
    check_against_interpreter(graph, [y], {x: rng.standard_normal((2, 2, 6, 6)).astype(
        np.float32)}, options=DEFAULT, **TOL)


def test_zero_pads_fold_into_the_convolutions_after_them(graph, rng):
    """Keras' ZeroPadding2D + VALID strided convolution (Conv2D and depthwise, asymmetric and
    added to explicit pads) loses its Pad; a Pad of the channels, a Pad read twice
    and one before a SAME convolution stay. All equal the interpreter."""
    x = fl.placeholder(fl.float32, [2, 13, 12, 4], name="x")

    def f(*shape):
        return fl.constant(rng.standard_normal(shape).astype(np.float32))
    folded = {
        "conv": fl.nn.conv2d(fl.pad(x, [[0, 0], [0, 1], [0, 1], [0, 0]]), f(3, 3, 4, 8),
                             [1, 2, 2, 1], "VALID"),
        "depthwise": fl.nn.depthwise_conv2d_native(
            fl.pad(x, [[0, 0], [1, 1], [2, 0], [0, 0]]), f(3, 3, 4, 2), [1, 2, 2, 1], "VALID"),
        "explicit": fl.nn.conv2d(fl.pad(x, [[0, 0], [1, 0], [0, 2], [0, 0]]), f(3, 3, 4, 8),
                                 [1, 1, 1, 1], [[0, 0], [1, 1], [0, 1], [0, 0]]),
    }
    shared = fl.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
    kept = {
        "channels": fl.nn.conv2d(fl.pad(x, [[0, 0], [1, 1], [1, 1], [0, 4]]), f(3, 3, 8, 8),
                                 [1, 1, 1, 1], "VALID"),
        "shared": (fl.nn.conv2d(shared, f(3, 3, 4, 8), [1, 1, 1, 1], "VALID")
                   + shared[:, :13, :12, :1]),
        "same": fl.nn.conv2d(fl.pad(x, [[0, 0], [2, 2], [1, 1], [0, 0]]), f(3, 3, 4, 8),
                             [1, 1, 1, 1], "SAME"),
    }
    ops = _ops(graph, list(folded.values()), [x])
    assert "Pad" not in ops
    ops = _ops(graph, list(kept.values()), [x])
    assert ops.count("Pad") == len(kept)
    check_against_interpreter(graph, {**folded, **kept},
                              {x: rng.standard_normal((2, 13, 12, 4)).astype(np.float32)}, **TOL)


def test_zero_pads_of_a_relu_fold_into_the_max_pool_after_it(graph, rng):
    """Keras ResNet's ZeroPadding2D + VALID 3x3/2 MaxPool after a ReLU (or ReLU6) loses its Pad
    (the ReLU's values are never negative, so the zeros never win a window); a Pad of a value
    that may be negative, a Pad as wide as the window and a Pad of the channels stay. All
    equal the interpreter (the negative input shows what folding there would get wrong)."""
    x = fl.placeholder(fl.float32, [2, 11, 10, 4], name="x")
    relu = fl.nn.relu(x)

    def pool(t, padding="VALID", ksize=3):
        return fl.nn.max_pool(t, [1, ksize, ksize, 1], [1, 2, 2, 1], padding)
    folded = {
        "relu": pool(fl.pad(relu, [[0, 0], [1, 1], [1, 1], [0, 0]])),
        "relu6": pool(fl.pad(fl.nn.relu6(x), [[0, 0], [0, 2], [1, 0], [0, 0]])),
    }
    kept = {
        "negative": pool(fl.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])),
        "wide": pool(fl.pad(relu, [[0, 0], [2, 0], [0, 0], [0, 0]]), ksize=2),
        "channels": pool(fl.pad(relu, [[0, 0], [1, 1], [1, 1], [0, 2]])),
    }
    ops = _ops(graph, list(folded.values()), [x])
    assert "Pad" not in ops and ops.count("MaxPool") == len(folded)
    ops = _ops(graph, list(kept.values()), [x])
    assert ops.count("Pad") == len(kept)
    check_against_interpreter(graph, {**folded, **kept},
                              {x: rng.standard_normal((2, 11, 10, 4)).astype(np.float32)}, **TOL)
