"""simplify: algebraic identities, one small rule per identity, looked up by op name.

A rule sees a node and returns a rewrite or None:

- ``Replace(value)``: every use of the node's output becomes ``value`` (``x * 1`` -> ``x``). It
  applies only when ``value`` has exactly the node's dtype and shape, so an identity that
  broadcasts (``x + zeros([4, 3])`` with ``x: f32[3]``) never fires.
- ``SetInput(i, value)``: the node reads ``value`` as input ``i`` instead
  (``Reshape(Reshape(x, a), b)`` -> ``Reshape(x, b)``).

Nodes with control inputs are left alone (their users may rely on that ordering). Control
uses of a replaced node move to the producer of the value that replaces it. Nodes a rewrite
leaves unused are erased. Add an identity with ``@rule("OpName", ...)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from compiler.ir.construct import constant_value, make_node
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import Shape, TensorType
from compiler.passes.manager import Pass, PassContext, register_pass
from compiler.passes.prune import erase_if_unused
from runtime.dtypes import DType


@dataclass(frozen=True)
class Replace:
    """Every use of the node's output 0 becomes ``value``."""
    value: Output


@dataclass(frozen=True)
class SetInput:
    """The node reads ``value`` as its input ``index``."""
    index: int
    value: Output


Rewrite = Union[Replace, SetInput]
Rule = Callable[[Node], Optional[Rewrite]]
RULES: Dict[str, List[Rule]] = {}

# Bounds the fixpoint loop; each sweep handles whole chains, so a second sweep is rare.
MAX_SWEEPS = 8


def rule(*ops: str) -> Callable[[Rule], Rule]:
    """Register a rule for the named ops (ops that are not registered simply never match)."""
    def deco(fn: Rule) -> Rule:
        for op in ops:
            RULES.setdefault(op, []).append(fn)
        return fn
    return deco


# --- helpers -------------------------------------------------------------------------------
class _NewNodes:
    """The nodes a rule makes to replace ``node`` (each named ``node/<suffix>``, on its
    device request, at its location): ``add`` makes one, ``replace_with`` keeps them when the
    result has the node's type, on its assigned device, and erases them otherwise."""

    def __init__(self, node: Node):
        self.node = node
        self.made: List[Node] = []

    def add(self, op: str, inputs, attrs, suffix: str) -> Node:
        n = make_node(self.node.graph, op, inputs, attrs, name=f"{self.node.name}/{suffix}",
                      device=self.node.device, location=self.node.location)
        self.made.append(n)
        return n

    def replace_with(self, result: Node) -> Optional[Rewrite]:
        if result.output_types[0] != self.node.output_types[0]:
            erase_if_unused(self.node.graph, list(reversed(self.made)))
            return None
        for n in self.made:
            n.assigned_device = self.node.assigned_device
        return Replace(result.output(0))

def _value(out: Output) -> Optional[np.ndarray]:
    v = constant_value(out)
    return None if v is None else np.asarray(v)


def _is_all(out: Output, scalar) -> bool:
    """``out`` is a compile-time constant whose every element equals ``scalar``."""
    v = _value(out)
    return v is not None and v.dtype != object and bool(np.all(v == scalar))


def broadcast_keeps_shape(x: TensorType, other: Shape) -> bool:
    """Broadcasting ``x`` with a tensor of shape ``other`` gives ``x``'s shape for every run."""
    if other is None:
        return False
    if x.shape is None:
        return len(other) == 0
    if len(other) > len(x.shape):
        return False
    tail = x.shape[len(x.shape) - len(other):]
    return all(c == 1 or (d is not None and d == c) for d, c in zip(tail, other))


def _neutral(node: Node, keep: int, neutral) -> Optional[Rewrite]:
    """``x op c`` -> ``x`` when input ``keep`` is x and the other input is all ``neutral``."""
    other = node.inputs[1 - keep]
    x = node.inputs[keep]
    if _is_all(other, neutral) and broadcast_keeps_shape(x.type, other.shape):
        return Replace(x)
    return None


def _int_list(out: Output) -> Optional[List[int]]:
    v = _value(out)
    return None if v is None or v.dtype.kind not in "iu" else [int(a) for a in v.reshape(-1)]


def _normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _squeeze_dims(node: Node) -> Optional[List[int]]:
    for name in ("squeeze_dims", "axis"):
        if name in node.attrs:
            return [int(a) for a in (node.attrs[name] or [])]
    return None


def _producer(out: Output, op: str) -> Optional[Node]:
    return out.node if out.node.op == op and not out.node.control_inputs else None


# --- arithmetic identities -----------------------------------------------------------------
@rule("AddV2", "Add")
def add_zero(node: Node) -> Optional[Rewrite]:
    """x + 0 -> x, 0 + x -> x (for floats this keeps -0.0 where IEEE would give +0.0, as
    TensorFlow's arithmetic optimizer does)."""
    return _neutral(node, 0, 0) or _neutral(node, 1, 0)


@rule("Sub")
def sub_zero(node: Node) -> Optional[Rewrite]:
    """x - 0 -> x."""
    return _neutral(node, 0, 0)


@rule("Mul")
def mul_one(node: Node) -> Optional[Rewrite]:
    """x * 1 -> x, 1 * x -> x."""
    return _neutral(node, 0, 1) or _neutral(node, 1, 1)


@rule("RealDiv", "Div")
def div_one(node: Node) -> Optional[Rewrite]:
    """x / 1 -> x."""
    return _neutral(node, 0, 1)


@rule("FloorDiv", "TruncateDiv")
def int_div_one(node: Node) -> Optional[Rewrite]:
    """x // 1 -> x for integers (for floats it rounds)."""
    return _neutral(node, 0, 1) if node.inputs[0].dtype.is_integer else None


@rule("Maximum", "Minimum")
def max_self(node: Node) -> Optional[Rewrite]:
    """max(x, x) -> x, min(x, x) -> x."""
    return Replace(node.inputs[0]) if node.inputs[0] == node.inputs[1] else None


@rule("Neg", "LogicalNot")
def involution(node: Node) -> Optional[Rewrite]:
    """-(-x) -> x, !(!x) -> x."""
    inner = _producer(node.inputs[0], node.op)
    return Replace(inner.inputs[0]) if inner is not None else None


@rule("AddN")
def add_n_single(node: Node) -> Optional[Rewrite]:
    """AddN([x]) -> x."""
    return Replace(node.inputs[0]) if len(node.inputs) == 1 else None


@rule("Sum", "Mean", "Prod", "Max", "Min")
def reduce_no_axes(node: Node) -> Optional[Rewrite]:
    """A reduction over no axes is its input."""
    axes = _value(node.inputs[1]) if len(node.inputs) > 1 else None
    return Replace(node.inputs[0]) if axes is not None and axes.size == 0 else None


# --- identities and casts -----------------------------------------------------------------
@rule("Identity", "StopGradient")
def identity(node: Node) -> Optional[Rewrite]:
    """Identity(x) -> x, unless it moves x to another requested device."""
    src = node.inputs[0].node
    if node.device and node.device != src.device:
        return None
    if src.op == "Switch":             # a branch's pivot: control edges from it mean "taken"
        return None
    return Replace(node.inputs[0])


@rule("Cast")
def cast_same_type(node: Node) -> Optional[Rewrite]:
    """Cast(x) to x's own dtype -> x."""
    return Replace(node.inputs[0]) if node.inputs[0].dtype == node.output_types[0].dtype else None


# --- movement ------------------------------------------------------------------------------
@rule("Transpose")
def transpose(node: Node) -> Optional[Rewrite]:
    """Transpose with the identity perm -> x; Transpose(Transpose(x, p), q) with p∘q = id -> x."""
    q = _int_list(node.inputs[1])
    if q is None:
        return None
    if q == list(range(len(q))):
        return Replace(node.inputs[0])
    inner = _producer(node.inputs[0], "Transpose")
    p = _int_list(inner.inputs[1]) if inner is not None else None
    if p is not None and len(p) == len(q) and all(0 <= a < len(p) for a in q) \
            and [p[a] for a in q] == list(range(len(q))):
        return Replace(inner.inputs[0])
    return None


def _reshape_keeps(x: TensorType, target: Optional[List[int]]) -> bool:
    """Reshaping ``x`` to ``target`` (one -1 allowed) gives ``x`` back on every run."""
    if x.shape is None or target is None or len(target) != len(x.shape) or target.count(-1) > 1:
        return False
    for k, (t, d) in enumerate(zip(target, x.shape)):
        if t == -1:         # inferred: equals d when every other dim is known and nonzero
            if not all(e is not None and e > 0 for j, e in enumerate(x.shape) if j != k):
                return False
        elif d is None or t != d:
            return False
    return True


@rule("Reshape")
def reshape(node: Node) -> Optional[Rewrite]:
    """Reshape to x's own shape -> x; Reshape(Reshape(x, a), b) -> Reshape(x, b)."""
    x = node.inputs[0]
    if _reshape_keeps(x.type, _int_list(node.inputs[1])):
        return Replace(x)
    inner = _producer(x, "Reshape")
    if inner is not None:
        return SetInput(0, inner.inputs[0])
    return None


@rule("Squeeze")
def squeeze_expanded(node: Node) -> Optional[Rewrite]:
    """Squeeze(ExpandDims(x, d), [d]) -> x."""
    inner = _producer(node.inputs[0], "ExpandDims")
    dims = _squeeze_dims(node)
    if inner is None or dims is None or len(dims) != 1 or inner.inputs[0].shape is None:
        return None
    d = _int_list(inner.inputs[1])
    rank = len(inner.inputs[0].shape) + 1
    if d is None or len(d) != 1 or _normalize_axis(d[0], rank) != _normalize_axis(dims[0], rank):
        return None
    return Replace(inner.inputs[0])


@rule("ExpandDims")
def expand_squeezed(node: Node) -> Optional[Rewrite]:
    """ExpandDims(Squeeze(x, [a]), a) -> x (x's dim a is statically 1: the types match)."""
    inner = _producer(node.inputs[0], "Squeeze")
    dims = _squeeze_dims(inner) if inner is not None else None
    x = inner.inputs[0] if inner is not None else None
    if dims is None or len(dims) != 1 or x.shape is None:
        return None
    d = _int_list(node.inputs[1])
    rank = len(x.shape)
    if d is None or len(d) != 1 or _normalize_axis(d[0], rank) != _normalize_axis(dims[0], rank):
        return None
    return Replace(x)


@rule("Tile")
def tile_once(node: Node) -> Optional[Rewrite]:
    """Tile(x, [1, 1, ...]) -> x."""
    m = _int_list(node.inputs[1])
    return Replace(node.inputs[0]) if m is not None and all(a == 1 for a in m) else None


# The attrs of a convolution's window, which its depthwise form takes as they are.
_WINDOW_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


@rule("Conv2D")
def grouped_conv(node: Node) -> Optional[Rewrite]:
    """A grouped Conv2D (input depth C a multiple G > 1 of the filter's in-channels: Keras'
    ``Conv2D(groups=G)``) with one input channel per group (ConvNeXt's ``groups=C``) becomes
    a DepthwiseConv2dNative of the filter reshaped from [KH, KW, 1, C*M] to [KH, KW, C, M]
    (output channel c*M + m reads input channel c in both). Groups of several channels
    (ResNeXt, RegNet) stay one Conv2D on every device: the C kernels run it as one grouped
    convolution (``c_ops/conv.py``), and so do the CUDA kernels (``cuda_ops/conv.py``, which
    take the groups as a run-time value, so nothing needs splitting for a GPU). The input's
    depth and the filter's shape must be known."""
    x, f = node.inputs[0].type.shape, node.inputs[1].type.shape
    nchw = node.attrs.get("data_format") == "NCHW"
    if x is None or f is None or len(x) != 4 or len(f) != 4 or not node.users:
        return None
    c = x[1] if nchw else x[3]
    if c is None or c < 2 or None in f or f[2] != 1 or f[3] % c:
        return None
    new = _NewNodes(node)
    attrs = {k: node.attrs[k] for k in _WINDOW_ATTRS if k in node.attrs}
    with node.graph.inserting_before(node):
        shape = new.add("Const", [], {"value": np.array([f[0], f[1], c, f[3] // c], np.int32),
                                      "dtype": DType.i32}, "depthwise_shape")
        filt = new.add("Reshape", [node.inputs[1], shape.output(0)], {}, "depthwise_filter")
        out = new.add("DepthwiseConv2dNative", [node.inputs[0], filt.output(0)], attrs,
                      "depthwise")
    return new.replace_with(out)


@rule("Conv2DBackpropInput", "Conv2DBackpropFilter")
def depthwise_conv_backprop(node: Node) -> Optional[Rewrite]:
    """The gradients of a Conv2D with one input channel per group (input depth C > 1, the
    filter [KH, KW, 1, C*M]: what ``grouped_conv`` makes a DepthwiseConv2dNative) become the
    depthwise gradients, on any device: DepthwiseConv2dNativeBackpropInput of the filter
    reshaped to [KH, KW, C, M], and DepthwiseConv2dNativeBackpropFilter (filter_sizes
    [KH, KW, C, M]) reshaped back to [KH, KW, 1, C*M]. The input's depth and the filter's
    shape must be known."""
    backprop_input = node.op == "Conv2DBackpropInput"
    out = node.output_types[0].shape
    x, f = (out, node.inputs[1].type.shape) if backprop_input else \
        (node.inputs[0].type.shape, out)
    if x is None or f is None or len(x) != 4 or len(f) != 4 or not node.users:
        return None
    c = x[1] if node.attrs.get("data_format") == "NCHW" else x[3]
    if c is None or c <= 1 or None in f or f[2] != 1 or f[3] % c:
        return None
    new = _NewNodes(node)

    def const(value, suffix: str) -> Output:
        return new.add("Const", [], {"value": np.array(value, np.int32), "dtype": DType.i32},
                       suffix).output(0)

    attrs = {k: node.attrs[k] for k in _WINDOW_ATTRS if k in node.attrs}
    depthwise_shape = [f[0], f[1], c, f[3] // c]
    with node.graph.inserting_before(node):
        if backprop_input:
            filt = new.add("Reshape",
                           [node.inputs[1], const(depthwise_shape, "depthwise_shape")], {},
                           "depthwise_filter")
            result = new.add("DepthwiseConv2dNativeBackpropInput",
                             [node.inputs[0], filt.output(0), node.inputs[2]], attrs,
                             "depthwise")
        else:
            grad = new.add("DepthwiseConv2dNativeBackpropFilter",
                           [node.inputs[0], const(depthwise_shape, "depthwise_shape"),
                            node.inputs[2]], attrs, "depthwise")
            result = new.add("Reshape", [grad.output(0), const(list(f), "grouped_shape")], {},
                             "grouped_filter")
    return new.replace_with(result)


# --- the pass ------------------------------------------------------------------------------
def find_rewrite(node: Node, rules: Optional[Dict[str, Sequence[Rule]]] = None) -> Optional[Rewrite]:
    """The first applicable rewrite of ``node`` (checked to keep its dtype and shape), if any."""
    if node.control_inputs or node.num_outputs != 1:
        return None
    for fn in (rules if rules is not None else RULES).get(node.op, ()):
        r = fn(node)
        if isinstance(r, Replace) and node.users and r.value.type == node.output_types[0]:
            return r
        if isinstance(r, SetInput) and r.value.dtype == node.inputs[r.index].dtype \
                and r.value != node.inputs[r.index]:
            return r
    return None


def apply_rewrite(graph: Graph, node: Node, r: Rewrite) -> None:
    """Carry out ``r`` on ``node`` and erase what it left unused."""
    if isinstance(r, SetInput):
        old = node.inputs[r.index].node
        node.set_input(r.index, r.value)
        erase_if_unused(graph, [old])
        return
    graph.replace_all_uses_with(node.output(0), r.value)
    for user in list(node.users):                  # control uses: wait for the value instead
        user.remove_control_input(node)
        if user is not r.value.node:
            user.add_control_input(r.value.node)
    erase_if_unused(graph, [node])


@register_pass("simplify")
class Simplify(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        changed = False
        for _ in range(MAX_SWEEPS):
            swept = False
            for node in graph:
                if node not in graph:
                    continue
                r = find_rewrite(node)
                if r is not None:
                    apply_rewrite(graph, node, r)
                    swept = True
            changed |= swept
            if not swept:
                break
        return changed
