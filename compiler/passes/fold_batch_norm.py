"""fold-batch-norm: batch normalization with constant statistics folded into the convolution
(or matrix product) before it, at compile time: the inference form of a trained network.

A convolution ``y = conv(x, W)`` followed by per-channel affine ops with constant operands
(``BiasAdd``, ``Mul``, ``AddV2``/``Add``, ``Sub``, ``RealDiv`` by a constant that varies
along the channel axis only, and ``FusedBatchNorm*`` with ``is_training=false``) computes
``conv(x, W) * s + t``: it becomes ``BiasAdd(conv(x, W * s), t)``, one convolution whose
bias ``fuse-conv`` then applies in its epilogue. That is the decomposed batch norm ONNX
models import as (``(x - mean) * (scale / sqrt(var + eps)) + bias``), TensorFlow's frozen
Keras graphs (``x * a + b``) and TensorFlow's own ``FusedBatchNorm*``.

The producers: ``Conv2D``, ``DepthwiseConv2dNative`` (output channel ``c * M + m`` scales
filter ``[.., c, m]``) and ``Conv2DBackpropInput``, NHWC (the layout pass has made them so),
and ``MatMul`` (a Dense layer followed by a BatchNorm1d). It folds only where the filter and
every operand of the chain are constants, so a training step, whose filters and statistics
are variables, keeps its ops; and only through ops nothing else reads (a value used
elsewhere is needed as it is). The products are computed in float64 and rounded once.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from compiler.ir.construct import constant_value, make_node
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import TensorType
from compiler.passes.manager import Pass, PassContext, register_pass
from compiler.passes.prune import erase_if_unused
from compiler.passes.rewrite import single_use
from runtime.dtypes import DType

_FLOATS = (DType.f32, DType.f64)
BATCH_NORMS = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")

# producer op -> index of its filter (weights) input
PRODUCERS = {"Conv2D": 1, "DepthwiseConv2dNative": 1, "Conv2DBackpropInput": 1, "MatMul": 1}

Affine = Tuple[np.ndarray, np.ndarray]       # y -> y * a + b, per channel (float64)


def _nhwc(node: Node) -> bool:
    return node.attrs.get("data_format", "NHWC") == "NHWC"


def _channels(node: Node, w: np.ndarray) -> Optional[int]:
    """The output channels of ``node`` with weights ``w`` (known: they are a constant)."""
    if node.op == "MatMul":
        if node.attrs.get("transpose_a") or w.ndim != 2:
            return None
        return w.shape[0] if node.attrs.get("transpose_b") else w.shape[1]
    if w.ndim != 4 or not _nhwc(node):
        return None
    if node.op == "Conv2D":
        return w.shape[3]
    if node.op == "DepthwiseConv2dNative":
        return w.shape[2] * w.shape[3]
    return w.shape[2]                                    # Conv2DBackpropInput: [h, w, out, in]


def _scaled(node: Node, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The weights ``w`` of ``node`` with output channel k multiplied by ``s[k]``."""
    w64 = w.astype(np.float64)
    if node.op == "MatMul":
        out = w64 * (s[:, None] if node.attrs.get("transpose_b") else s[None, :])
    elif node.op == "Conv2D":
        out = w64 * s
    elif node.op == "DepthwiseConv2dNative":
        out = w64 * s.reshape(w.shape[2], w.shape[3])
    else:
        out = w64 * s[None, None, :, None]
    return out.astype(w.dtype)


def _per_channel(value: Output, like: Output, channels: int) -> Optional[np.ndarray]:
    """``value`` as ``channels`` float64 numbers when it is a constant that, broadcast against
    ``like``, varies along the last axis only (and does not grow ``like``)."""
    c = constant_value(value)
    shape = like.shape
    if c is None or shape is None:
        return None
    c = np.asarray(c)
    if c.dtype.kind != "f" or c.ndim > len(shape) or any(d != 1 for d in c.shape[:-1]):
        return None
    flat = c.reshape(-1).astype(np.float64)
    if flat.size not in (1, channels):
        return None
    return np.broadcast_to(flat, (channels,)).copy()


def _batch_norm_step(node: Node, channels: int) -> Optional[Affine]:
    """(a, b) of an inference FusedBatchNorm*: scale / sqrt(var + eps), offset - mean * a."""
    if node.attrs.get("is_training", True) or not _nhwc(node):
        return None
    if any(node.output_users(i) for i in range(1, node.num_outputs)):
        return None
    params = [constant_value(v) for v in node.inputs[1:5]]
    if any(p is None or np.asarray(p).shape != (channels,) for p in params):
        return None
    scale, offset, mean, var = (np.asarray(p, np.float64) for p in params)
    a = scale / np.sqrt(var + float(node.attrs.get("epsilon", 1e-4)))
    return a, offset - mean * a


def _step(node: Node, y: Output, channels: int) -> Optional[Affine]:
    """``node`` (which reads ``y`` once) as y -> y * a + b per channel, or None."""
    if node.control_inputs or not node.output_types or node.output_types[0].dtype not in _FLOATS:
        return None
    if node.op in BATCH_NORMS:
        return _batch_norm_step(node, channels) if node.inputs[0] == y else None
    if node.num_outputs != 1 or len(node.inputs) != 2:
        return None
    at = 0 if node.inputs[0] == y else 1
    c = _per_channel(node.inputs[1 - at], y, channels)
    if c is None:
        return None
    one, zero = np.ones(channels), np.zeros(channels)
    if node.op == "BiasAdd" and at == 0 and (_nhwc(node) or len(y.shape) == 2):
        return one, c
    if node.op == "Mul":
        return c, zero
    if node.op in ("AddV2", "Add"):
        return one, c
    if node.op == "Sub":
        return (one, -c) if at == 0 else (-one, c)
    if node.op == "RealDiv" and at == 0:
        return 1.0 / c, zero
    return None


def _chain(producer: Node, channels: int) -> Tuple[List[Node], np.ndarray, np.ndarray]:
    """The affine ops after ``producer``, each the only reader of the one before, and the
    per-channel (s, t) they apply together."""
    s, t = np.ones(channels), np.zeros(channels)
    nodes: List[Node] = []
    y = producer.output(0)
    while True:
        user = single_use(y)
        if user is None or user.device != producer.device:
            break
        step = _step(user, y, channels)
        if step is None:
            break
        a, b = step
        s, t = s * a, t * a + b
        nodes.append(user)
        y = user.output(0)
    return nodes, s, t


def fold_batch_norm(graph: Graph) -> bool:
    """Fold every chain found; whether the graph changed."""
    changed = False
    for producer in graph:
        fi = PRODUCERS.get(producer.op)
        if fi is None or producer not in graph or producer.control_inputs:
            continue
        if producer.output_types[0].dtype not in _FLOATS:
            continue
        w = constant_value(producer.inputs[fi])
        if w is None or (producer.op == "MatMul" and constant_value(producer.inputs[0]) is not None):
            continue
        w = np.asarray(w)
        channels = _channels(producer, w)
        if not channels:
            continue
        nodes, s, t = _chain(producer, channels)
        if not nodes or (len(nodes) == 1 and nodes[0].op == "BiasAdd"):
            continue
        if not (np.all(np.isfinite(s)) and np.all(np.isfinite(t))):
            continue                   # an infinite scale: 0 * inf in the filter is no fold
        _fold(graph, producer, fi, w, nodes, s, t)
        changed = True
    return changed


def _fold(graph: Graph, producer: Node, fi: int, w: np.ndarray, nodes: List[Node],
          s: np.ndarray, t: np.ndarray) -> None:
    dtype = producer.output_types[0].dtype
    last = nodes[-1]
    old_filter = producer.inputs[fi].node
    if np.any(s != 1):                           # shifts alone leave the filter as it is
        with graph.inserting_before(producer):
            scaled = _scaled(producer, w, s)
            filt = make_node(graph, "Const", [], {"value": scaled, "dtype": dtype},
                             name=f"{producer.name}/folded_filter", device=producer.device,
                             location=producer.location,
                             output_types=[TensorType(dtype, scaled.shape)])
        filt.assigned_device = producer.assigned_device
        producer.set_input(fi, filt.output(0))
    with graph.inserting_after(producer):
        bias = make_node(graph, "Const", [], {"value": t.astype(dtype.np), "dtype": dtype},
                         name=f"{last.name}/folded_bias", device=producer.device,
                         location=last.location, output_types=[TensorType(dtype, t.shape)])
    with graph.inserting_after(bias):
        add = make_node(graph, "BiasAdd", [producer.output(0), bias.output(0)], {},
                        name=f"{last.name}/folded", device=last.device, location=last.location)
    for n in (bias, add):
        n.assigned_device = producer.assigned_device
    graph.replace_all_uses_with(last.output(0), add.output(0))
    for user in list(last.users):                  # control uses wait for the folded value
        user.remove_control_input(last)
        user.add_control_input(add)
    name = last.name
    erase_if_unused(graph, list(reversed(nodes)) + [old_filter])
    if graph.get(name) is None:
        graph.rename(add, name)


@register_pass("fold-batch-norm")
class FoldBatchNorm(Pass):
    """Constant batch norms (and other per-channel scales and shifts) folded into the
    convolution or matrix product before them."""

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return fold_batch_norm(graph)
