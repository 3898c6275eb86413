"""Write a ResNet-18-style ONNX model: random seeded weights, NCHW 1x3xSxS input, Conv (no
bias) + BatchNormalization + Relu, a 3x3 MaxPool, four stages of two basic blocks (64, 128,
256, 512 channels times WIDTH; 1x1 projection shortcuts where the shape changes), residual
Adds, GlobalAveragePool, Flatten, Gemm: the graph torchvision's resnet18 exports (without
BatchNormalization folded into the convolutions).

    python3 examples/benchmarks/make_resnet_onnx.py OUT.onnx [WIDTH] [SIZE]
    flowc compile OUT.onnx -o build/r18 --time-passes

Needs only the onnx package (no PyTorch).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_mobilenet_onnx import OnnxBuilder  # noqa: E402  (the script's own folder)

# (out channels, blocks, first stride) of ResNet-18's four stages
STAGES = [(64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2)]


class _Builder(OnnxBuilder):
    """MobileNetV2's builder with ResNet's convolutions (no bias, no groups) and Relu."""

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int) -> str:
        r = self.rng
        w = self.const(r.randn(cout, cin, k, k) * np.sqrt(2.0 / (k * k * cin)), "w")
        y = self.node("Conv", [x, w], "conv", kernel_shape=[k, k], strides=[stride, stride],
                      pads=[k // 2] * 4)
        params = [1 + 0.1 * r.randn(cout), 0.1 * r.randn(cout), 0.1 * r.randn(cout),
                  1 + 0.1 * r.rand(cout)]
        return self.node("BatchNormalization", [y] + [self.const(p, "bn") for p in params],
                         "bn", epsilon=1e-5)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x], "relu")


def build(width: float = 1.0, size: int = 96, batch: int = 1, seed: int = 0,
          classes: int = 10) -> onnx.ModelProto:
    """The model as a ModelProto (opset 13)."""
    b = _Builder(seed)

    def channels(c: int) -> int:
        return max(8, int(c * width + 4) // 8 * 8)

    c = channels(64)
    h = b.relu(b.conv_bn("input", 3, c, 7, 2))
    h = b.node("MaxPool", [h], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for out, blocks, first_stride in STAGES:
        out = channels(out)
        for i in range(blocks):
            stride = first_stride if i == 0 else 1
            y = b.relu(b.conv_bn(h, c, out, 3, stride))
            y = b.conv_bn(y, out, out, 3, 1)
            shortcut = h if stride == 1 and c == out else b.conv_bn(h, c, out, 1, stride)
            h, c = b.relu(b.node("Add", [y, shortcut], "add")), out
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h], "gap")], "flat")
    fc = [b.const(b.rng.randn(classes, c) * 0.03, "fc_w"),
          b.const(b.rng.randn(classes) * 0.01, "fc_b")]
    b.nodes.append(helper.make_node("Gemm", [h] + fc, ["logits"], transB=1))
    graph = helper.make_graph(
        b.nodes, "resnet18_like",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def make(path: str, width: float = 1.0, size: int = 96) -> None:
    model = build(width, size)
    onnx.save(model, path)
    convs = sum(n.op_type == "Conv" for n in model.graph.node)
    print(f"{path}: {len(model.graph.node)} ONNX nodes, {convs} Conv")


if __name__ == "__main__":
    make(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0,
         int(sys.argv[3]) if len(sys.argv) > 3 else 96)
