"""The CNNs whose compile time the compile benchmark measures, written with onnx.helper (seeded
weights, no PyTorch needed): a ResNet-18-style CNN as PyTorch exports it in eval mode (batch
norm folded into each Conv's bias), and the MobileNetV2-style CNN of make_mobilenet_onnx.py
(depthwise convolutions, batch norm, Clip as ReLU6), both 1x3x96x96.

    python3 examples/benchmarks/compile_models.py OUT_DIR     # writes resnet18.onnx, mobilenetv2.onnx
"""
from __future__ import annotations

import os
import sys
from typing import List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))     # make_mobilenet_onnx

import numpy as np

OPSET = 13
IMAGE = (1, 3, 96, 96)


class _Builder:
    """Nodes and initializers of one ONNX graph, with seeded He-scaled weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.initializers: list = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def weight(self, shape: Tuple[int, ...], fan_in: int) -> str:
        from onnx import numpy_helper
        name = self.name("w")
        value = (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: List[str], **attrs) -> str:
        from onnx import helper
        out = self.name(op.lower() + "_")
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        """A Conv with a bias (a batch norm folded in, as an eval-mode export writes it)."""
        w = self.weight((cout, cin // group, k, k), cin // group * k * k)
        b = self.weight((cout,), cout)
        p = k // 2
        return self.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
                         pads=[p, p, p, p], group=group)

    def head(self, x: str, channels: int, classes: int) -> str:
        x = self.node("GlobalAveragePool", [x])
        x = self.node("Flatten", [x], axis=1)
        w = self.weight((classes, channels), channels)
        b = self.weight((classes,), classes)
        return self.node("Gemm", [x, w, b], transB=1)

    def model(self, name: str, x: str, y: str, classes: int, shape=IMAGE):
        from onnx import TensorProto, helper
        self.nodes[-1].output[0] = y
        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info(x, TensorProto.FLOAT, list(shape))],
            [helper.make_tensor_value_info(y, TensorProto.FLOAT, [shape[0], classes])],
            self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def resnet18(classes: int = 1000, seed: int = 18, shape=IMAGE):
    """torchvision's ResNet-18 (BasicBlocks [2, 2, 2, 2] of 64-512 channels), as an ONNX
    ModelProto taking ``shape`` (NCHW)."""
    b = _Builder(seed)
    x = b.node("Relu", [b.conv("image", 3, 64, 7, 2)])
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and block == 0 else 1
            y = b.node("Relu", [b.conv(x, cin, cout, 3, stride)])
            y = b.conv(y, cout, cout, 3)
            shortcut = b.conv(x, cin, cout, 1, stride) if stride != 1 or cin != cout else x
            x = b.node("Relu", [b.node("Add", [shortcut, y])])
            cin = cout
    b.head(x, cin, classes)
    return b.model("resnet18", "image", "logits", classes, shape)


def write_mobilenetv2(path: str, width: float = 1.0, size: int = 96) -> str:
    """make_mobilenet_onnx.py's MobileNetV2-style model at ``path``."""
    import contextlib
    import io
    import make_mobilenet_onnx
    with contextlib.redirect_stdout(io.StringIO()):         # it reports what it wrote
        make_mobilenet_onnx.make(path, width, size)
    return path


def write_model(name: str, folder: str) -> str:
    """Write ``name``.onnx (resnet18 or mobilenetv2) into ``folder``; its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".onnx")
    if name == "resnet18":
        import onnx
        onnx.save(resnet18(), path)
    else:
        write_mobilenetv2(path)
    return path


def write_models(folder: str) -> dict:
    """Write resnet18.onnx and mobilenetv2.onnx into ``folder``; their paths by name."""
    return {name: write_model(name, folder) for name in ("resnet18", "mobilenetv2")}


if __name__ == "__main__":
    for name, path in write_models(sys.argv[1] if len(sys.argv) > 1 else ".").items():
        print(name, path)
