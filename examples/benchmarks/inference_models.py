"""The ONNX models of bench_inference.py, built with onnx.helper from seeded random weights (no
PyTorch, no downloads): a ResNet-18-style CNN and a MobileNetV2-style CNN on NCHW images, a
Transformer encoder (post-norm layers: multi-head self-attention and a GELU feed-forward, as
``nn.TransformerEncoderLayer`` exports) and an LSTM (the ONNX ``LSTM`` op and a linear head).

Each ``build(batch)`` returns ``(model, inputs)``: an ONNX ``ModelProto`` with static shapes
for that batch, and seeded input arrays by input name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import make_mobilenet_onnx
from make_mobilenet_onnx import OnnxBuilder

IMAGE = 96                                  # the CNNs' input height and width
Inputs = Dict[str, np.ndarray]


def _model(b: OnnxBuilder, name: str, inputs, outputs, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(b.nodes, name, inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _image(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 3, IMAGE, IMAGE)).astype(np.float32)


def resnet18(batch: int) -> Tuple[onnx.ModelProto, Inputs]:
    """ResNet-18's layers (7x7/2 stem, 3x3/2 max pool, four stages of two basic blocks with
    64, 128, 256, 512 channels, 1x1/2 projections, global average pool, a 10-way Gemm), each
    convolution followed by BatchNormalization as exported by PyTorch."""
    b = OnnxBuilder(0)
    h = b.node("Relu", [b.conv_bn("image", 3, 64, 7, 2)], "relu")
    h = b.node("MaxPool", [h], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for i in range(2):
            s = stride if i == 0 else 1
            y = b.node("Relu", [b.conv_bn(h, c, out, 3, s)], "relu")
            y = b.conv_bn(y, out, out, 3, 1)
            short = h if (s == 1 and c == out) else b.conv_bn(h, c, out, 1, s)
            h = b.node("Relu", [b.node("Add", [y, short], "add")], "relu")
            c = out
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h], "gap")], "flat")
    fc = [b.const(b.rng.randn(10, c) * 0.03, "fc_w"), b.const(b.rng.randn(10) * 0.01, "fc_b")]
    b.nodes.append(helper.make_node("Gemm", [h] + fc, ["logits"], transB=1))
    model = _model(b, "resnet18_like",
                   [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                  [batch, 3, IMAGE, IMAGE])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
                   opset=13)
    return model, {"image": _image(batch)}


def mobilenet_v2(batch: int) -> Tuple[onnx.ModelProto, Inputs]:
    """make_mobilenet_onnx.py's model at width 1.0 (17 depthwise convolutions)."""
    model = make_mobilenet_onnx.model(1.0, IMAGE, batch)
    model.graph.input[0].name = "image"
    for n in model.graph.node:
        n.input[:] = ["image" if i == "input" else i for i in n.input]
    return model, {"image": _image(batch)}


# The Transformer encoder: sequence, width, heads, feed-forward width, layers.
SEQ, D_MODEL, HEADS, D_FF, LAYERS = 64, 128, 4, 512, 2


def _i64(b: OnnxBuilder, values, prefix: str) -> str:
    name = b.name(prefix)
    b.inits.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
    return name


def _linear(b: OnnxBuilder, x: str, fan_in: int, fan_out: int) -> str:
    w = b.const(b.rng.randn(fan_in, fan_out) * np.sqrt(1.0 / fan_in), "w")
    return b.node("Add", [b.node("MatMul", [x, w], "mm"),
                          b.const(b.rng.randn(fan_out) * 0.02, "b")], "lin")


def _layer_norm(b: OnnxBuilder, x: str) -> str:
    scale = b.const(1 + 0.1 * b.rng.randn(D_MODEL), "ln_g")
    bias = b.const(0.1 * b.rng.randn(D_MODEL), "ln_b")
    return b.node("LayerNormalization", [x, scale, bias], "ln", axis=-1, epsilon=1e-5)


def transformer(batch: int) -> Tuple[onnx.ModelProto, Inputs]:
    """LAYERS post-norm encoder layers on [batch, SEQ, D_MODEL] tokens: Q, K, V projections,
    heads split by Reshape/Transpose, softmax(QK^T / sqrt(d)) V, output projection, residual
    add and LayerNormalization; then Linear-GELU(Erf)-Linear, residual add, LayerNormalization.
    Output: the mean over the sequence of the last layer, [batch, D_MODEL]."""
    b = OnnxBuilder(0)
    dh = D_MODEL // HEADS
    heads = _i64(b, [batch, SEQ, HEADS, dh], "heads")
    merged = _i64(b, [batch, SEQ, D_MODEL], "merged")
    scale = b.const(1.0 / np.sqrt(dh), "scale")
    h = "tokens"
    for _ in range(LAYERS):
        q, k, v = (b.node("Reshape", [_linear(b, h, D_MODEL, D_MODEL), heads], "split")
                   for _ in range(3))
        q = b.node("Transpose", [q], "qt", perm=[0, 2, 1, 3])
        k = b.node("Transpose", [k], "kt", perm=[0, 2, 3, 1])
        v = b.node("Transpose", [v], "vt", perm=[0, 2, 1, 3])
        scores = b.node("Mul", [b.node("MatMul", [q, k], "qk"), scale], "scaled")
        att = b.node("MatMul", [b.node("Softmax", [scores], "softmax", axis=-1), v], "att")
        att = b.node("Reshape", [b.node("Transpose", [att], "at", perm=[0, 2, 1, 3]), merged],
                     "merge")
        h = _layer_norm(b, b.node("Add", [h, _linear(b, att, D_MODEL, D_MODEL)], "res"))
        f = _linear(b, h, D_MODEL, D_FF)
        erf = b.node("Erf", [b.node("Div", [f, b.const(np.sqrt(2.0), "sqrt2")], "div")], "erf")
        gelu = b.node("Mul", [b.node("Mul", [f, b.node("Add", [erf, b.const(1.0, "one")],
                                                        "erf1")], "fg"),
                              b.const(0.5, "half")], "gelu")
        h = _layer_norm(b, b.node("Add", [h, _linear(b, gelu, D_FF, D_MODEL)], "res"))
    b.nodes.append(helper.make_node("ReduceMean", [h], ["features"], axes=[1], keepdims=0))
    model = _model(b, "transformer_encoder",
                   [helper.make_tensor_value_info("tokens", TensorProto.FLOAT,
                                                  [batch, SEQ, D_MODEL])],
                   [helper.make_tensor_value_info("features", TensorProto.FLOAT,
                                                  [batch, D_MODEL])])
    tokens = np.random.default_rng(1).standard_normal((batch, SEQ, D_MODEL)).astype(np.float32)
    return model, {"tokens": tokens}


# The LSTM: time steps, input width, hidden width.
STEPS, LSTM_INPUT, HIDDEN = 32, 64, 128


def lstm(batch: int) -> Tuple[onnx.ModelProto, Inputs]:
    """One ONNX LSTM layer over [STEPS, batch, LSTM_INPUT] (time major, as exported) and a
    10-way Gemm on its last hidden state."""
    b = OnnxBuilder(0)
    r = b.rng
    w = b.const(r.randn(1, 4 * HIDDEN, LSTM_INPUT) * np.sqrt(1.0 / LSTM_INPUT), "W")
    rw = b.const(r.randn(1, 4 * HIDDEN, HIDDEN) * np.sqrt(1.0 / HIDDEN), "R")
    bias = b.const(r.randn(1, 8 * HIDDEN) * 0.05, "B")
    b.nodes.append(helper.make_node("LSTM", ["sequence", w, rw, bias], ["", "h_n"],
                                    hidden_size=HIDDEN))
    last = b.node("Squeeze", ["h_n", _i64(b, [0], "axis")], "last")
    fc = [b.const(r.randn(HIDDEN, 10) * 0.1, "fc_w"), b.const(r.randn(10) * 0.01, "fc_b")]
    b.nodes.append(helper.make_node("Gemm", [last] + fc, ["logits"]))
    model = _model(b, "lstm",
                   [helper.make_tensor_value_info("sequence", TensorProto.FLOAT,
                                                  [STEPS, batch, LSTM_INPUT])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
                   opset=14)
    seq = np.random.default_rng(1).standard_normal((STEPS, batch, LSTM_INPUT)).astype(np.float32)
    return model, {"sequence": seq}


# The MLP: widths of its 4 Gemms (8 ONNX nodes: Gemm, Relu, ..., Gemm, Softmax).
MLP_WIDTHS = (64, 128, 128, 128, 10)


def mlp(batch: int) -> Tuple[onnx.ModelProto, Inputs]:
    """A small MLP whose step is mostly call overhead at batch 1: Gemm + Relu three times, a
    last Gemm and Softmax."""
    b = OnnxBuilder(0)
    h = "features"
    for i, (fan_in, fan_out) in enumerate(zip(MLP_WIDTHS, MLP_WIDTHS[1:])):
        w = b.const(b.rng.randn(fan_in, fan_out) * np.sqrt(2.0 / fan_in), "w")
        h = b.node("Gemm", [h, w, b.const(b.rng.randn(fan_out) * 0.05, "b")], "gemm")
        if i < len(MLP_WIDTHS) - 2:
            h = b.node("Relu", [h], "relu")
    b.nodes.append(helper.make_node("Softmax", [h], ["probs"], axis=1))
    model = _model(b, "mlp",
                   [helper.make_tensor_value_info("features", TensorProto.FLOAT,
                                                  [batch, MLP_WIDTHS[0]])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT,
                                                  [batch, MLP_WIDTHS[-1]])], opset=13)
    x = np.random.default_rng(1).standard_normal((batch, MLP_WIDTHS[0])).astype(np.float32)
    return model, {"features": x}


@dataclass(frozen=True)
class ModelKind:
    name: str                                      # what it is
    short: str                                     # the row's name
    build: Callable[[int], Tuple[onnx.ModelProto, Inputs]]
    what: str                                      # one line for the README


MODELS = {
    "resnet18": ModelKind("ResNet-18-style CNN", "ResNet-18", resnet18,
                          f"ResNet-18 layers, 3x{IMAGE}x{IMAGE} NCHW, BatchNormalization"),
    "mobilenetv2": ModelKind("MobileNetV2-style CNN", "MobileNetV2", mobilenet_v2,
                             f"MobileNetV2 layers, 3x{IMAGE}x{IMAGE} NCHW, depthwise Conv"),
    "transformer": ModelKind("Transformer encoder", "Transformer", transformer,
                             f"{LAYERS} layers, {SEQ} tokens x {D_MODEL}, {HEADS} heads, "
                             f"feed-forward {D_FF}"),
    "lstm": ModelKind("LSTM", "LSTM", lstm,
                      f"{STEPS} steps x {LSTM_INPUT} inputs, hidden {HIDDEN}"),
    "mlp": ModelKind("MLP (8 ONNX nodes)", "MLP 8 nodes", mlp,
                     "-".join(map(str, MLP_WIDTHS)) + ", Gemm/Relu, Softmax"),
}


# --- the CNNs as TensorFlow GraphDefs ---------------------------------------------------------
def graphdef_twin(model: onnx.ModelProto, path: str) -> Tuple[str, str]:
    """Write the ONNX CNN ``model`` (resnet18 or mobilenet_v2 above: Conv, BatchNormalization,
    Relu, Clip, Add, MaxPool, GlobalAveragePool, Flatten, Gemm) as the frozen GraphDef a Keras
    model of the same layers and weights gives (``path``, a ``.pb``): NHWC input, HWIO filters,
    ``Conv2D``/``DepthwiseConv2dNative`` + ``BiasAdd``, ``FusedBatchNormV3`` (inference),
    ``Relu``/``Relu6``, ``AddV2``, ``Pad`` + VALID before a strided window (Keras
    applications' ZeroPadding2D; SAME would pad TensorFlow's way, not ONNX's), ``MaxPool``,
    ``Mean``, ``MatMul`` + ``BiasAdd``. Built with flowc's TF1 API and written by flowc's
    GraphDef writer, so TensorFlow is not needed. Returns (input name, output name); the
    input is the ONNX image transposed to NHWC, the output the same logits."""
    import dsl as fl
    from compiler.interop.graphdef import write_graphdef
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    graph = fl.Graph()
    with graph.as_default():
        n, c, h, w = (d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
        x = fl.placeholder(fl.float32, [n, h, w, c], name="image")
        values = {model.graph.input[0].name: x}

        def attr(node, key, default=None):
            for a in node.attribute:
                if a.name == key:
                    return helper.get_attribute_value(a)
            return default

        def padded(t, pads, stride):
            """SAME for stride 1 with symmetric pads; else an explicit Pad and VALID."""
            top, left, bottom, right = pads
            if stride == 1 and top == bottom and left == right:
                return t, "SAME"
            if any(pads):
                t = fl.pad(t, [[0, 0], [top, bottom], [left, right], [0, 0]])
            return t, "VALID"

        for node in model.graph.node:
            ins = [values[i] if i in values else inits[i] for i in node.input]
            op = node.op_type
            if op == "Conv":
                wt, group = inits[node.input[1]], attr(node, "group", 1)
                stride = attr(node, "strides")[0]
                t, padding = padded(ins[0], attr(node, "pads"), stride)
                if group == 1:
                    y = fl.nn.conv2d(t, np.ascontiguousarray(wt.transpose(2, 3, 1, 0)),
                                     [1, stride, stride, 1], padding)
                else:                      # [C, 1, kh, kw] -> [kh, kw, C, 1]
                    y = fl.nn.depthwise_conv2d_native(
                        t, np.ascontiguousarray(wt.transpose(2, 3, 0, 1)),
                        [1, stride, stride, 1], padding)
                out = fl.nn.bias_add(y, ins[2]) if len(ins) > 2 else y
            elif op == "BatchNormalization":
                out = fl.nn.fused_batch_norm(ins[0], ins[1], ins[2], ins[3], ins[4],
                                             epsilon=attr(node, "epsilon", 1e-5),
                                             is_training=False)[0]
            elif op == "Relu":
                out = fl.nn.relu(ins[0])
            elif op == "Clip":
                assert float(ins[1]) == 0.0 and float(ins[2]) == 6.0, "only ReLU6 clips"
                out = fl.nn.relu6(ins[0])
            elif op == "Add":
                out = ins[0] + ins[1]
            elif op == "MaxPool":       # after a ReLU: zero padding is -inf padding here
                k, stride = attr(node, "kernel_shape")[0], attr(node, "strides")[0]
                t, padding = padded(ins[0], attr(node, "pads"), stride)
                out = fl.nn.max_pool(t, [1, k, k, 1], [1, stride, stride, 1], padding)
            elif op == "GlobalAveragePool":
                out = fl.reduce_mean(ins[0], axis=[1, 2])
            elif op == "Flatten":
                out = ins[0]                               # already [batch, channels]
            elif op == "Gemm":
                wt = ins[1].T if attr(node, "transB", 0) else ins[1]
                out = fl.nn.bias_add(fl.matmul(ins[0], np.ascontiguousarray(wt)), ins[2])
            else:
                raise ValueError(f"graphdef_twin: no {op}")
            values[node.output[0]] = out
        logits = fl.identity(values[model.graph.output[0].name], name="logits")
    write_graphdef(graph, path)
    return "image", logits.name.split(":")[0]


def nhwc(image: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(image.transpose(0, 2, 3, 1))
