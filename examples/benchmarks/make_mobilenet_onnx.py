"""Write a MobileNetV2-style ONNX model: random seeded weights, NCHW BATCHx3xSxS input,
BatchNormalization, Clip as ReLU6, depthwise Conv (group == channels), residual Adds,
GlobalAveragePool, Gemm; the channel counts of MobileNetV2 times WIDTH (rounded to 8).

    python3 examples/benchmarks/make_mobilenet_onnx.py OUT.onnx [WIDTH [BATCH]]
    flowc compile OUT.onnx -o build/mnv2 --time-passes     # compile time, build/mnv2/cpu_0.c

Needs only the onnx package (no PyTorch).
"""
from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# MobileNetV2's inverted residual stages: (expansion, out channels, blocks, first stride)
STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1)]


class OnnxBuilder:
    """Nodes and seeded initializers of an ONNX graph under construction (also used by
    inference_models.py)."""

    def __init__(self, seed: int):
        self.rng = np.random.RandomState(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: np.ndarray, prefix: str) -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), n))
        return n

    def node(self, op: str, inputs, prefix: str, **attrs) -> str:
        out = self.name(prefix)
        self.nodes.append(helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, group: int = 1) -> str:
        r = self.rng
        w = self.const(r.randn(cout, cin // group, k, k) * np.sqrt(2.0 * group / (k * k * cin)),
                       "w")
        y = self.node("Conv", [x, w, self.const(r.randn(cout) * 0.01, "b")], "conv",
                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                      group=group)
        params = [1 + 0.1 * r.randn(cout), 0.1 * r.randn(cout), 0.1 * r.randn(cout),
                  1 + 0.1 * r.rand(cout)]
        return self.node("BatchNormalization", [y] + [self.const(p, "bn") for p in params],
                         "bn", epsilon=1e-5)

    def relu6(self, x: str) -> str:
        return self.node("Clip", [x, self.const(0.0, "lo"), self.const(6.0, "hi")], "relu6")


def model(width: float = 1.0, size: int = 96, batch: int = 1, seed: int = 0) -> onnx.ModelProto:
    """The MobileNetV2-style model, checked by the ONNX checker."""
    b = OnnxBuilder(seed)

    def channels(c: int) -> int:
        return max(8, int(c * width + 4) // 8 * 8)

    c = channels(32)
    h = b.relu6(b.conv_bn("input", 3, c, 3, 2))
    for expansion, out, blocks, first_stride in STAGES:
        out = channels(out)
        for i in range(blocks):
            stride = first_stride if i == 0 else 1
            hidden = c * expansion
            y = h if expansion == 1 else b.relu6(b.conv_bn(h, c, hidden, 1, 1))
            y = b.relu6(b.conv_bn(y, hidden, hidden, 3, stride, group=hidden))
            y = b.conv_bn(y, hidden, out, 1, 1)
            if stride == 1 and c == out:
                y = b.node("Add", [h, y], "add")
            h, c = y, out
    h = b.relu6(b.conv_bn(h, c, 1280, 1, 1))
    h = b.node("Flatten", [b.node("GlobalAveragePool", [h], "pool")], "flat")
    fc = [b.const(b.rng.randn(1280, 10) * 0.03, "fc_w"), b.const(b.rng.randn(10) * 0.01, "fc_b")]
    b.nodes.append(helper.make_node("Gemm", [h] + fc, ["logits"]))
    graph = helper.make_graph(
        b.nodes, "mobilenet_v2_like",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])], b.inits)
    result = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(result)
    return result


def make(path: str, width: float = 1.0, size: int = 96, batch: int = 1, seed: int = 0) -> None:
    m = model(width, size, batch, seed)
    onnx.save(m, path)
    groups = [next(a.i for a in n.attribute if a.name == "group")
              for n in m.graph.node if n.op_type == "Conv"]
    depthwise = [g for g in groups if g > 1]
    print(f"{path}: {len(m.graph.node)} ONNX nodes, {len(groups)} Conv ({len(depthwise)} "
          f"depthwise, {sum(depthwise)} channels)")


if __name__ == "__main__":
    make(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 1.0,
         batch=int(sys.argv[3]) if len(sys.argv) > 3 else 1)
