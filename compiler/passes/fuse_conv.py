"""Convolution and pooling with the elementwise op next to them, as one kernel (NHWC, f32/f64,
all nodes on one device: a CPU, or a GPU where the fused op has a GPU kernel; each absorbed
value used by nothing else):

- ``act(BiasAdd(Conv2D(x, f), b) + r)``, with the residual ``+ r`` (ResNet's shortcut, ``r``
  of the output's shape) and the activation ``act`` each optional, becomes
  ``_FusedConv2D(x, f, [b, r])`` (``fused_ops`` ``["BiasAdd", "Add", act]``, TensorFlow's
  names); the same with ``DepthwiseConv2dNative`` becomes ``_FusedDepthwiseConv2dNative``.
  ``act`` is ``Relu``, ``Relu6``, ``Elu`` or ``LeakyRelu``, and also ``Maximum(y, 0)`` (a
  ReLU) and ``Minimum(Maximum(y, 0), 6)`` (ONNX's ``Clip(0, 6)``: MobileNet's ReLU6), which
  compute the same. The epilogue is applied to each chunk of the convolution's output while
  it is in cache, and the separate passes over the output disappear;
- ``Conv2DBackpropFilter(x, sizes, dy)`` and ``BiasAddGrad(dy)`` of one ``dy`` become
  ``_Conv2DBackpropFilterBias(x, sizes, dy)`` with both gradients as outputs: the bias
  gradient is summed while the filter gradient reads ``dy``;
- ``ReluGrad(MaxPoolGrad(x, y, dy), x)`` (the gradient of ``MaxPool(Relu(z))``) becomes
  ``_MaxPoolReluGrad(x, y, dy)``: the ReLU's mask is applied where the pooling gradient is
  written, and ReluGrad's pass disappears;
- ``y = MaxPool(x)`` with gradients ``MaxPoolGrad(x, y, dy)`` (or ``_MaxPoolReluGrad``) becomes
  ``y, places = _MaxPoolArgmax(x)`` and ``_MaxPoolGradArgmax(x, y, places, dy)``: the forward
  pass records where each maximum is (a byte per output), so the gradient reads those bytes
  instead of searching ``x`` again (windows of at most 255 pixels);
- ``_Conv2DBackpropFilterBias(x, sizes, dy)`` whose ``dy`` is a ``_MaxPoolGradArgmax`` (the
  gradient of ``MaxPool(Relu(Conv2D(x, f) + b))``) becomes ``Conv2DBackpropFilter(x, sizes,
  dy)`` with ``dy, db = _MaxPoolGradArgmaxBias(...)``: the bias gradient is summed from the
  routed grads while ``dy`` is written (a sum over a quarter of ``dy``'s size for 2x2 pools),
  and the filter gradient runs without one. Measured on the 28x28 CNN, batch 64, one thread
  (``bench_train_cnn.py --profile``, fastest of 40 steps): the first layer's filter gradient
  went from 1.1-1.3 ms with the bias gradient to 0.5-0.6 ms without, the second's from 6.3 ms
  to 4.9-5.6 ms, while the sum costs the pooling gradient 0.01-0.04 ms.

Ops in ``compiler/ops/conv_fused.py``; run by the ``fuse-conv`` pass. The fused node keeps
the last replaced node's name and source location and the control edges of all of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from compiler.ir.construct import constant_value, make_node
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.op_registry import get_op
from compiler.ir.types import TensorType
from compiler.passes.rewrite import single_use, take_place
from compiler.passes.manager import Pass, PassContext, register_pass
from runtime.dtypes import DType

_FLOATS = (DType.f32, DType.f64)


def _on_one_device(fused_op: str, *nodes: Node) -> bool:
    """The nodes share one device that can run ``fused_op``: a CPU, or a GPU where the op has
    a GPU kernel (``_FusedConv2D`` and ``_MaxPoolReluGrad`` have)."""
    devices = {n.assigned_device for n in nodes}
    device = (nodes[0].assigned_device or "").upper()
    if len(devices) != 1:
        return False
    if "GPU" in device:
        return get_op(fused_op).cuda_kernel is not None
    return "CPU" in device


def _nhwc(node: Node) -> bool:
    return node.attrs.get("data_format", "NHWC") == "NHWC"


def _absorbed_by(node: Node, op: str, index: int) -> Optional[Node]:
    """The producer of ``node``'s input ``index`` when it is an ``op`` used only there."""
    value = node.inputs[index]
    producer = value.node
    if producer.op != op or value.type.dtype not in _FLOATS or single_use(value) is not node:
        return None
    return producer


# convolution op -> its fused form
FUSED_CONVS = {"Conv2D": "_FusedConv2D", "DepthwiseConv2dNative": "_FusedDepthwiseConv2dNative"}
ACTIVATION_OPS = ("Relu", "Relu6", "Elu", "LeakyRelu")


@dataclass
class ConvMatch:
    """A convolution and the epilogue after it, ``last`` the node whose value it computes."""
    conv: Node
    bias_add: Node
    residual: Optional[Output]
    act: Optional[str]
    alpha: float
    absorbed: List[Node]                 # the nodes replaced, users before producers

    @property
    def last(self) -> Node:
        return self.absorbed[0]


def _scalar_const(value: Output) -> Optional[float]:
    v = constant_value(value)
    if v is None or np.size(v) != 1 or np.ndim(v) > len(value.shape or ()):
        return None
    return float(np.reshape(v, -1)[0])


def _clamp(node: Node, op: str, bound: float) -> Optional[Output]:
    """The other operand of ``node`` when it is ``op(y, bound)`` (or ``op(bound, y)``)."""
    if node.op != op or len(node.inputs) != 2:
        return None
    for k in (0, 1):
        if _scalar_const(node.inputs[1 - k]) == bound and \
                node.inputs[k].type == node.output_types[0]:
            return node.inputs[k]
    return None


def _activation(node: Node) -> Optional[Tuple[str, float, Output, List[Node]]]:
    """(activation, LeakyRelu's slope, its input, the nodes computing it) when ``node``'s
    value is an activation of one input."""
    if node.op in ACTIVATION_OPS:
        return node.op, float(node.attrs.get("alpha", 0.2)), node.inputs[0], [node]
    for outer, inner, bound in (("Minimum", "Maximum", 6.0), ("Maximum", "Minimum", 0.0)):
        y = _clamp(node, outer, bound)
        if y is not None and y.node.op == inner and single_use(y) is node:
            z = _clamp(y.node, inner, 6.0 - bound)
            if z is not None:
                return "Relu6", 0.2, z, [node, y.node]
    y = _clamp(node, "Maximum", 0.0)
    return ("Relu", 0.2, y, [node]) if y is not None else None


def _conv_under(bias_add: Node) -> Optional[Node]:
    """The convolution under ``bias_add`` (NHWC, a vector bias) when only it reads it."""
    value = bias_add.inputs[0]
    conv = value.node
    if bias_add.op != "BiasAdd" or not _nhwc(bias_add) or value.type.dtype not in _FLOATS:
        return None
    if conv.op not in FUSED_CONVS or single_use(value) is not bias_add or not _nhwc(conv) \
            or conv.inputs[0].type.shape is None:
        return None
    bias = bias_add.inputs[1]
    if bias.type.dtype != conv.output_types[0].dtype or not bias.type.shape or \
            len(bias.type.shape) != 1:
        return None
    return conv


def match_conv_epilogue(node: Node) -> Optional[ConvMatch]:
    """The convolution whose fused epilogue (bias, residual, activation) ends at ``node``."""
    act, alpha, absorbed = None, 0.2, []
    pre = node
    found = _activation(node)
    if found is not None:
        act, alpha, value, absorbed = found
        if single_use(value) is not absorbed[-1]:
            return None
        pre = value.node
    residual = None
    if pre.op in ("AddV2", "Add") and pre.num_outputs == 1:
        for k in (0, 1):
            b, other = pre.inputs[k], pre.inputs[1 - k]
            if b.node.op == "BiasAdd" and single_use(b) is pre and _conv_under(b.node) and \
                    other.type == pre.output_types[0] and other.type.shape is not None and \
                    len(other.type.shape) == 4:
                residual = other
                absorbed = absorbed + [pre]
                pre = b.node
                break
        else:
            return None
    conv = _conv_under(pre) if pre.op == "BiasAdd" else None
    if conv is None:
        return None
    absorbed = absorbed + [pre, conv]
    if not _on_one_device(FUSED_CONVS[conv.op], *absorbed):
        return None
    return ConvMatch(conv, pre, residual, act, alpha, absorbed)


def match_max_pool_relu_grad(node: Node) -> Optional[Node]:
    """The MaxPoolGrad under ``node`` when ``node`` is ``ReluGrad(MaxPoolGrad(x, y, dy), x)``."""
    if node.op != "ReluGrad" or len(node.inputs) != 2:
        return None
    pool_grad = _absorbed_by(node, "MaxPoolGrad", 0)
    if pool_grad is None or not _nhwc(pool_grad) or pool_grad.inputs[0] != node.inputs[1]:
        return None
    return pool_grad if _on_one_device("_MaxPoolReluGrad", node, pool_grad) else None


def match_filter_bias_grad(bias_grad: Node) -> Optional[Node]:
    """The Conv2DBackpropFilter that reads the same dy as ``bias_grad`` (a BiasAddGrad with
    no control users), on its device; None if there is none or more than one."""
    if bias_grad.op != "BiasAddGrad" or not _nhwc(bias_grad):
        return None
    dy = bias_grad.inputs[0]
    if dy.type.dtype not in _FLOATS or dy.type.shape is None or len(dy.type.shape) != 4:
        return None
    if any(bias_grad in u.control_inputs for u in bias_grad.users):
        return None
    found = [u for u in dy.node.users if u.op == "Conv2DBackpropFilter" and len(u.inputs) == 3
             and u.inputs[2] == dy and _nhwc(u)
             and _on_one_device("_Conv2DBackpropFilterBias", u, bias_grad)]
    return found[0] if len(found) == 1 else None


def _fuse_filter_bias_grad(graph: Graph, bias_grad: Node, filter_grad: Node) -> None:
    """The fused node goes where the later of the two was; the graph is sorted again after
    (users of the earlier one may come before it)."""
    order = {n: i for i, n in enumerate(graph)}
    later = max(bias_grad, filter_grad, key=order.__getitem__)
    with graph.inserting_before(later):
        fused = graph.add_node("_Conv2DBackpropFilterBias", list(filter_grad.inputs),
                               dict(filter_grad.attrs), name=f"{filter_grad.name}/fused",
                               output_types=[filter_grad.output(0).type,
                                             bias_grad.output(0).type],
                               location=filter_grad.location, device=filter_grad.device)
    graph.replace_all_uses_with(bias_grad.output(0), fused.output(1))
    take_place(graph, filter_grad, fused, (bias_grad,))


_POOL_ATTRS = ("ksize", "strides", "padding", "data_format", "explicit_paddings")


def match_max_pool_argmax(pool: Node) -> List[Node]:
    """The pooling gradients of ``pool`` (a MaxPool) that can take its argmax instead."""
    if pool.op != "MaxPool" or not _nhwc(pool) or not _on_one_device("_MaxPoolArgmax", pool):
        return []
    k = list(pool.attrs["ksize"])
    if pool.output_types[0].dtype not in _FLOATS or k[1] * k[2] > 255:
        return []
    x, y = pool.inputs[0], pool.output(0)
    return [u for u in y.node.users
            if u.op in ("MaxPoolGrad", "_MaxPoolReluGrad") and len(u.inputs) == 3
            and u.inputs[0] == x and u.inputs[1] == y
            and _on_one_device("_MaxPoolArgmax", u, pool)
            and all(u.attrs.get(a) == pool.attrs.get(a) for a in _POOL_ATTRS)]


def _fuse_max_pool_argmax(graph: Graph, pool: Node, grads: List[Node]) -> None:
    with graph.inserting_before(pool):
        fused = graph.add_node("_MaxPoolArgmax", [pool.inputs[0]], dict(pool.attrs),
                               name=f"{pool.name}/argmax",
                               output_types=[pool.output_types[0],
                                             TensorType(DType.u8, pool.output_types[0].shape)],
                               location=pool.location, device=pool.device)
    take_place(graph, pool, fused, ())
    for grad in grads:
        with graph.inserting_before(grad):
            routed = graph.add_node(
                "_MaxPoolGradArgmax", [grad.inputs[0], fused.output(0), fused.output(1),
                                       grad.inputs[2]],
                dict(grad.attrs, relu=grad.op == "_MaxPoolReluGrad"),
                name=f"{grad.name}/argmax", output_types=[grad.output_types[0]],
                location=grad.location, device=grad.device)
        take_place(graph, grad, routed, ())


def match_pool_bias_grad(filter_bias: Node) -> Optional[Node]:
    """The ``_MaxPoolGradArgmax`` that writes ``filter_bias``'s dy (a
    ``_Conv2DBackpropFilterBias``) when it can sum the bias gradient instead: on the same
    device, its output read by no other bias gradient."""
    if filter_bias.op != "_Conv2DBackpropFilterBias":
        return None
    dy = filter_bias.inputs[2]
    pool_grad = dy.node
    if pool_grad.op != "_MaxPoolGradArgmax" or not _nhwc(pool_grad) \
            or not _on_one_device("_MaxPoolGradArgmaxBias", pool_grad, filter_bias):
        return None
    others = [u for u in pool_grad.users
              if u is not filter_bias and u.op in ("_Conv2DBackpropFilterBias", "BiasAddGrad")]
    return None if others else pool_grad


def _fuse_pool_bias_grad(graph: Graph, filter_bias: Node, pool_grad: Node) -> None:
    """``pool_grad`` also sums the bias gradient; ``filter_bias`` becomes the plain filter
    gradient (both keep their names, devices and control edges)."""
    with graph.inserting_before(pool_grad):
        routed = graph.add_node("_MaxPoolGradArgmaxBias", list(pool_grad.inputs),
                                dict(pool_grad.attrs), name=f"{pool_grad.name}/bias",
                                output_types=[pool_grad.output_types[0],
                                              filter_bias.output_types[1]],
                                location=pool_grad.location, device=pool_grad.device)
    graph.replace_all_uses_with(filter_bias.output(1), routed.output(1))
    take_place(graph, pool_grad, routed, ())
    with graph.inserting_before(filter_bias):
        plain = graph.add_node("Conv2DBackpropFilter", list(filter_bias.inputs),
                               dict(filter_bias.attrs), name=f"{filter_bias.name}/plain",
                               output_types=[filter_bias.output_types[0]],
                               location=filter_bias.location, device=filter_bias.device)
    take_place(graph, filter_bias, plain, ())


def _fuse_conv(graph: Graph, m: ConvMatch) -> None:
    fused_ops = ["BiasAdd"] + (["Add"] if m.residual is not None else []) + \
        ([m.act] if m.act else [])
    attrs = dict(m.conv.attrs, fused_ops=fused_ops)
    if m.act == "LeakyRelu":
        attrs["leakyrelu_alpha"] = m.alpha
    args = [m.bias_add.inputs[1]] + ([m.residual] if m.residual is not None else [])
    last = m.last
    with graph.inserting_before(last):
        fused = make_node(graph, FUSED_CONVS[m.conv.op], [m.conv.inputs[0], m.conv.inputs[1], args],
                          attrs, name=f"{last.name}/fused", output_types=[last.output(0).type],
                          location=last.location, device=last.device)
    take_place(graph, last, fused, m.absorbed[1:])


def _fuse_pool_grad(graph: Graph, relu_grad: Node, pool_grad: Node) -> None:
    with graph.inserting_before(relu_grad):
        fused = graph.add_node("_MaxPoolReluGrad", list(pool_grad.inputs),
                               dict(pool_grad.attrs), name=f"{relu_grad.name}/fused",
                               output_types=[relu_grad.output(0).type],
                               location=relu_grad.location, device=relu_grad.device)
    take_place(graph, relu_grad, fused, (pool_grad,))


# The ops a fused convolution's epilogue may end with.
_EPILOGUE_ENDS = ACTIVATION_OPS + ("Maximum", "Minimum", "AddV2", "Add", "BiasAdd")


def fuse_conv(graph: Graph) -> bool:
    """Rewrite every match; whether the graph changed. Users come before their producers, so
    a Relu takes its Add, BiasAdd and convolution before the BiasAdd alone could take the
    convolution."""
    changed = resort = False
    for node in reversed(list(graph)):
        if node not in graph:
            continue
        if node.op in _EPILOGUE_ENDS:
            found = match_conv_epilogue(node)
            if found is not None:
                _fuse_conv(graph, found)
                changed = True
        elif node.op == "BiasAddGrad":
            filter_grad = match_filter_bias_grad(node)
            if filter_grad is not None:
                _fuse_filter_bias_grad(graph, node, filter_grad)
                changed = resort = True
        elif node.op == "MaxPool":
            grads = match_max_pool_argmax(node)
            if grads:
                _fuse_max_pool_argmax(graph, node, grads)
                changed = True
        elif node.op == "ReluGrad":
            pool_grad = match_max_pool_relu_grad(node)
            if pool_grad is not None:
                _fuse_pool_grad(graph, node, pool_grad)
                changed = True
    if resort:
        graph.topo_sort()
    for node in list(graph):            # after the fusions above made both
        pool_grad = match_pool_bias_grad(node) if node in graph else None
        if pool_grad is not None:
            _fuse_pool_bias_grad(graph, node, pool_grad)
            changed = True
    return changed


@register_pass("fuse-conv")
class FuseConv(Pass):
    """A convolution with its bias, residual and activation, and the pooling-gradient
    fusions, as one kernel each."""

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return fuse_conv(graph)
