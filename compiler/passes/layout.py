"""layout: models that arrive in NCHW run in NHWC inside.

flowc's convolution and pooling kernels are NHWC, TensorFlow's CPU layout. ONNX models are
NCHW: the importer wraps every convolution and pooling in Transposes (to NHWC before, back to
NCHW after), and TensorFlow graphs written for GPUs carry ``data_format="NCHW"``. Left alone,
each layer of a CNN copies its activations twice. This pass, before placement and fusion:

1. rewrites each NCHW ``Conv2D``, ``DepthwiseConv2dNative``, ``MaxPool``, ``AvgPool``,
   ``BiasAdd`` (rank 4), ``FusedBatchNorm*`` and their gradients as the NHWC op between
   Transposes (strides, dilations, windows and explicit paddings reordered, an input
   gradient's ``input_sizes`` too): the C and CUDA kernels are NHWC;
2. folds each Transpose of a constant into a constant (whatever its size when the constant
   has no other use: the result is no larger, so ``--fold-max-elements`` does not hold a big
   filter back);
3. pushes each Transpose forward, through the ops that compute the same thing in either
   layout: elementwise ops (their constant operands transposed at compile time, other
   operands given the inverse Transpose), ``BiasAdd`` while the channel stays last,
   reductions (``Mean`` over the spatial dims, ...: axes remapped), ``ConcatV2``, ``Split``,
   ``SplitV`` (axis remapped), ``Pad`` and ``Slice`` (rows remapped), ``Identity``; two
   Transposes in a row compose, and cancel when they are inverses. A push happens when it
   does not add Transposes: it counts the Transposes it removes (the one pushed when nothing
   else reads it, same-perm Transposes on the other operands, inverse Transposes after the
   op) against those it adds (after the op, on operands that need one);
4. a Transpose that moves only dims of size 1 becomes a ``Reshape`` (a view, no copy);
5. a zero ``Pad`` of the spatial dims before an NHWC ``Conv2D`` or ``DepthwiseConv2dNative``
   with VALID or EXPLICIT padding becomes its explicit padding (Keras' ZeroPadding2D before
   a strided convolution: no padded copy; ``_fold_pads``); so does one before an NHWC
   ``MaxPool`` when what it pads is a ``Relu`` or ``Relu6`` (never negative, so a window's
   maximum is the same with or without the zeros) and each pad is narrower than the window
   (ResNet's ZeroPadding2D + MaxPool after its first convolution).

In a CNN from ONNX the Transposes after one layer meet those before the next and cancel: a
ResNet keeps the one Transpose on its input. ``DepthwiseConv2dNative`` is treated as
``Conv2D`` throughout. Nothing is pushed into or out of a node with an unknown rank.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from compiler.ir.construct import constant_value, infer_types, make_node
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.op_registry import get_op, has_op
from compiler.ir.types import TensorType
from compiler.passes.manager import Pass, PassContext, register_pass
from compiler.passes.prune import erase_if_unused
from compiler.passes.simplify import (MAX_SWEEPS as SIMPLIFY_SWEEPS, RULES as SIMPLIFY_RULES,
                                     apply_rewrite, find_rewrite)
from runtime.dtypes import DType

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)

@dataclass(frozen=True)
class NchwOp:
    """Where an op with a ``data_format`` attr has NCHW operands: its 4-D activation inputs
    and outputs, its inputs that are 4 sizes in that order (an input gradient's
    ``input_sizes``), and its attrs that hold one value per dim."""
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...] = (0,)
    sizes: Tuple[int, ...] = ()
    dims: Tuple[str, ...] = ()


_CONV_DIMS = ("strides", "dilations")
_POOL_DIMS = ("ksize", "strides")
# The ops rewritten as their NHWC form between Transposes when they are NCHW.
NCHW_OPS: Dict[str, NchwOp] = {
    "Conv2D": NchwOp((0,), dims=_CONV_DIMS),
    "Conv2DBackpropInput": NchwOp((2,), sizes=(0,), dims=_CONV_DIMS),
    "Conv2DBackpropFilter": NchwOp((0, 2), outputs=(), dims=_CONV_DIMS),
    "DepthwiseConv2dNative": NchwOp((0,), dims=_CONV_DIMS),
    "DepthwiseConv2dNativeBackpropInput": NchwOp((2,), sizes=(0,), dims=_CONV_DIMS),
    "DepthwiseConv2dNativeBackpropFilter": NchwOp((0, 2), outputs=(), dims=_CONV_DIMS),
    "MaxPool": NchwOp((0,), dims=_POOL_DIMS),
    "AvgPool": NchwOp((0,), dims=_POOL_DIMS),
    "MaxPoolGrad": NchwOp((0, 1, 2), dims=_POOL_DIMS),
    "AvgPoolGrad": NchwOp((1,), sizes=(0,), dims=_POOL_DIMS),
    "BiasAdd": NchwOp((0,)),
    "BiasAddGrad": NchwOp((0,), outputs=()),
    "FusedBatchNorm": NchwOp((0,)), "FusedBatchNormV2": NchwOp((0,)),
    "FusedBatchNormV3": NchwOp((0,)),
    "FusedBatchNormGrad": NchwOp((0, 1)), "FusedBatchNormGradV2": NchwOp((0, 1)),
    "FusedBatchNormGradV3": NchwOp((0, 1)),
}

REDUCTIONS = ("Sum", "Mean", "Prod", "Max", "Min", "All", "Any")
PASS_THROUGH = ("Identity", "StopGradient")

# Pushes per node of the graph at most (each push moves a Transpose strictly forward, so the
# pass ends anyway; this bounds a pathological graph's work).
MAX_PUSHES_PER_NODE = 8


def perm_of(node: Node) -> Optional[List[int]]:
    """The permutation of a Transpose whose perm is a constant, else None."""
    if node.op != "Transpose" or len(node.inputs) != 2:
        return None
    value = constant_value(node.inputs[1])
    if value is None:
        return None
    perm = [int(a) for a in np.reshape(value, -1)]
    if sorted(perm) != list(range(len(perm))):
        return None
    shape = node.inputs[0].shape
    if shape is not None and len(shape) != len(perm):
        return None
    return perm


def inverse(perm: Sequence[int]) -> List[int]:
    inv = [0] * len(perm)
    for k, a in enumerate(perm):
        inv[a] = k
    return inv


def _identity(perm: Sequence[int]) -> bool:
    return list(perm) == list(range(len(perm)))


def moves_only_ones(shape, perm: Sequence[int]) -> bool:
    """Transposing ``shape`` by ``perm`` keeps every dim that may not be 1 in its order (the
    same element order: a Reshape does it)."""
    if shape is None or len(shape) != len(perm):
        return False
    others = [a for a in perm if shape[a] != 1]
    return others == sorted(others)


def by_reshape(shape, perm: Sequence[int]) -> bool:
    """Whether a value of ``shape`` (ones added in front up to ``perm``'s rank) transposed by
    ``perm`` is a Reshape of it."""
    if shape is None or len(shape) > len(perm):
        return False
    full = (1,) * (len(perm) - len(shape)) + tuple(shape)
    return moves_only_ones(full, perm) and _reshape_target([full[a] for a in perm]) is not None


def _reshape_target(shape) -> Optional[List[int]]:
    """``shape`` as a Reshape's target (-1 for one unknown dim), or None with more unknowns
    (or an unknown beside a 0, which -1 could not recover)."""
    unknown = sum(d is None for d in shape) if shape is not None else 2
    if unknown > 1 or (unknown and 0 in shape):
        return None
    return [-1 if d is None else int(d) for d in shape]


def _data_users(out: Output) -> List[Node]:
    """The nodes reading ``out`` as data, each once."""
    return [u for u in out.node.users if any(i == out for i in u.inputs)]


def _only_read_by(out: Output, user: Node) -> bool:
    """``user`` is the only node that reads ``out`` (as data; nothing waits on it by a
    control edge) and ``out``'s node has no other output in use."""
    node = out.node
    return (node.num_outputs == 1 and set(node.users) == {user}
            and node not in user.control_inputs)


# --- the operands of a rewritten node --------------------------------------------------------
@dataclass
class Operand:
    """How input ``i`` of the pushed-through node is had in the source layout.

    kind: "source" (``value`` already is), "keep" (``value`` is all ones in shape: either
    layout), "const" (``array`` replaces a constant), "relayout" (``value`` gets the inverse
    Transpose, a Reshape when it moves only dims of size 1)."""
    kind: str
    value: Optional[Output] = None
    array: Optional[np.ndarray] = None
    perm: Optional[List[int]] = None
    like: Optional[Output] = None           # the constant replaced (its control inputs, dtype)

    @property
    def cost(self) -> int:
        """1 for a Transpose to add; a Reshape (a view) or nothing costs 0."""
        return 1 if self.kind == "relayout" and not by_reshape(self.value.shape, self.perm) else 0


@dataclass
class Plan:
    """A push of Transposes through ``node``: its inputs in the source layout, its attrs
    there, and per output the perm that brings it back (None: the output is the same)."""
    node: Node
    operands: List[Operand]
    attrs: Dict
    out_perms: List[Optional[List[int]]]
    dead: Set[Node] = field(default_factory=set)     # Transposes no longer read after it

    def cost(self) -> int:
        total = sum(o.cost for o in self.operands) - len(self.dead)
        for i, q in enumerate(self.out_perms):
            if q is None or _identity(q):
                continue
            users = _data_users(self.node.output(i))
            cancel = [u for u in users if u.inputs[0] == self.node.output(i)
                      and perm_of(u) == inverse(q)]
            shape = self.node.output_types[i].shape        # in the destination layout
            source = None if shape is None else [shape[a] for a in inverse(q)]
            if len(users) > len(cancel) and not by_reshape(source, q):
                total += 1
            total -= len(cancel)
        return total


def _operand(value: Output, perm: List[int], pushed: Node, user: Node,
             dead: Set[Node]) -> Optional[Operand]:
    """Operand ``value`` of ``user`` (which reads ``pushed``, a Transpose by ``perm``) in
    the Transpose's source layout; None when it cannot be had."""
    r = len(perm)
    node = value.node
    if node is pushed:
        return Operand("source", node.inputs[0])
    if node.op == "Transpose" and perm_of(node) == perm:
        if _only_read_by(value, user):
            dead.add(node)
        return Operand("source", node.inputs[0])
    shape = value.shape
    if shape is None or len(shape) > r:
        return None
    if all(d == 1 for d in shape):
        return Operand("keep", value)
    inv = inverse(perm)
    c = constant_value(value)
    if c is not None:
        c = np.asarray(c).reshape((1,) * (r - c.ndim) + tuple(np.shape(c)))
        return Operand("const", array=np.ascontiguousarray(np.transpose(c, inv)), like=value)
    if len(shape) < r and not by_reshape(shape, inv):    # a lower rank: only by a Reshape
        return None
    return Operand("relayout", value, perm=inv)


def _layout_operands(node: Node, pushed: Node, perm: List[int], indices: Sequence[int],
                     dead: Set[Node]) -> Optional[List[Operand]]:
    """Operands for the data inputs ``indices`` of ``node``; the others are kept."""
    ops: List[Operand] = []
    for i, value in enumerate(node.inputs):
        if i in indices:
            o = _operand(value, perm, pushed, node, dead)
            if o is None:
                return None
        else:
            o = Operand("keep", value)
        ops.append(o)
    return ops


def _int_values(out: Output) -> Optional[List[int]]:
    v = constant_value(out)
    if v is None or np.asarray(v).dtype.kind not in "iu":
        return None
    return [int(a) for a in np.reshape(v, -1)]


def _const_like(values, like: Output) -> Operand:
    return Operand("const", array=np.asarray(values, dtype=like.dtype.np).reshape(
        np.shape(constant_value(like))), like=like)


# --- plans, per kind of user -------------------------------------------------------------
def _plan(user: Node, pushed: Node, perm: List[int]) -> Optional[Plan]:
    """How ``user`` (reading ``pushed``, a Transpose by ``perm``) would run on the
    Transpose's input; None when it cannot."""
    if not has_op(user.op) or user.op == "Transpose":
        return None
    op = get_op(user.op)
    if op.stateful or op.is_control_flow or op.is_communication:
        return None
    out = pushed.output(0)
    r = len(perm)
    reads = [i for i, v in enumerate(user.inputs) if v == out]
    dead: Set[Node] = {pushed} if _only_read_by(out, user) else set()
    attrs = dict(user.attrs)
    if user.op in PASS_THROUGH:
        if user.device and user.device != pushed.device:
            return None
        ops = _layout_operands(user, pushed, perm, [0], dead)
        return Plan(user, ops, attrs, [perm], dead) if ops else None
    if user.op == "BiasAdd":
        if reads != [0] or attrs.get("data_format", "NHWC") != "NHWC" or perm[-1] != r - 1:
            return None
        ops = _layout_operands(user, pushed, perm, [0], dead)
        return Plan(user, ops, attrs, [perm], dead) if ops else None
    if op.group == "elementwise":
        t = user.output_types[0] if user.num_outputs == 1 else None
        if t is None or t.shape is None or len(t.shape) != r:
            return None
        ops = _layout_operands(user, pushed, perm, range(len(user.inputs)), dead)
        return Plan(user, ops, attrs, [perm], dead) if ops else None
    if user.op in REDUCTIONS:
        return _plan_reduction(user, pushed, perm, reads, dead)
    if user.op == "ConcatV2":
        axis = _int_values(user.inputs[-1])
        if axis is None or len(axis) != 1 or reads and reads[-1] == len(user.inputs) - 1:
            return None
        values = range(len(user.inputs) - 1)
        ops = _layout_operands(user, pushed, perm, values, dead)
        if ops is None:
            return None
        ops[-1] = _const_like([perm[axis[0] % r]], user.inputs[-1])
        return Plan(user, ops, attrs, [perm], dead)
    if user.op in ("Split", "SplitV"):
        value_at, dim_at = (1, 0) if user.op == "Split" else (0, 2)
        dim = _int_values(user.inputs[dim_at])
        if reads != [value_at] or dim is None or len(dim) != 1:
            return None
        ops = _layout_operands(user, pushed, perm, [value_at], dead)
        if ops is None:
            return None
        ops[dim_at] = _const_like([perm[dim[0] % r]], user.inputs[dim_at])
        return Plan(user, ops, attrs, [perm] * user.num_outputs, dead)
    if user.op in ("Pad", "Slice"):
        rows = [_int_values(v) for v in user.inputs[1:]]
        if reads != [0] or any(v is None for v in rows):
            return None
        ops = _layout_operands(user, pushed, perm, [0], dead)
        if ops is None:
            return None
        inv = inverse(perm)
        for k, v in enumerate(user.inputs[1:], start=1):
            table = np.asarray(constant_value(v))
            if table.shape[:1] != (r,):
                return None
            ops[k] = Operand("const", array=np.ascontiguousarray(table[inv]), like=v)
        return Plan(user, ops, attrs, [perm], dead)
    return None


def _plan_reduction(user: Node, pushed: Node, perm: List[int], reads: List[int],
                    dead: Set[Node]) -> Optional[Plan]:
    axes = _int_values(user.inputs[1])
    r = len(perm)
    if reads != [0] or axes is None or any(not -r <= a < r for a in axes):
        return None
    axes = sorted({a % r for a in axes})
    ops = _layout_operands(user, pushed, perm, [0], dead)
    if ops is None:
        return None
    ops[1] = Operand("const", array=np.asarray(sorted(perm[a] for a in axes),
                                               dtype=user.inputs[1].dtype.np),
                     like=user.inputs[1])
    if user.attrs.get("keep_dims"):
        return Plan(user, ops, dict(user.attrs), [perm], dead)
    kept = [k for k in range(r) if k not in axes]
    x_kept = sorted(perm[k] for k in kept)
    return Plan(user, ops, dict(user.attrs), [[x_kept.index(perm[k]) for k in kept]], dead)


# --- rewriting ---------------------------------------------------------------------------
class _Rewriter:
    """The graph edits of the pass, with the node that each new node stands next to."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self._made: Dict[Tuple[Output, Tuple[int, ...]], Node] = {}
        self._perms: Dict[tuple, Output] = {}

    def shared_transpose(self, value: Output, perm: Sequence[int], near: Node,
                         name: str) -> Output:
        """``value`` transposed by ``perm`` before ``near``: the Transpose made for an
        earlier node (earlier in the graph) when there is one."""
        key = (value, tuple(perm))
        made = self._made.get(key)
        if made is None or made not in self.graph:
            made = self._made[key] = self.transpose(value, perm, near, name)
        return made.output(0)

    def const(self, array: np.ndarray, dtype: DType, near: Node, name: str,
              control: Sequence[Node] = ()) -> Output:
        with self.graph.inserting_before(near):
            c = make_node(self.graph, "Const", [], {"value": np.array(array, dtype=dtype.np,
                                                                      order="C"),
                                                    "dtype": dtype},
                          name=name, control_inputs=list(control), device=near.device,
                          location=near.location,
                          output_types=[TensorType(dtype, tuple(np.shape(array)))])
        c.assigned_device = near.assigned_device
        return c.output(0)

    def perm(self, perm: Sequence[int], near: Node, name: str) -> Output:
        """A constant ``perm`` for Transposes on ``near``'s device (one per perm and device)."""
        key = (tuple(perm), near.device, near.assigned_device)
        made = self._perms.get(key)
        if made is None or made.node not in self.graph:
            first = next(iter(self.graph))
            made = self._perms[key] = self.const(np.asarray(perm, np.int32), DType.i32, first,
                                                 name)
            made.node.device, made.node.assigned_device = near.device, near.assigned_device
            made.node.location = near.location
        return made

    def transpose(self, value: Output, perm: Sequence[int], near: Node, name: str,
                  after: bool = False) -> Node:
        """Transpose ``value`` by ``perm``, placed before ``near`` (after it: ``after``)."""
        p = self.perm(perm, near, f"{name}/perm")
        where = self.graph.inserting_after(near) if after else self.graph.inserting_before(near)
        with where:
            t = make_node(self.graph, "Transpose", [value, p], {}, name=name,
                          device=near.device, location=near.location)
        t.assigned_device = near.assigned_device
        return t

    def reshape(self, value: Output, target: List[int], near: Node, name: str,
                after: bool = False) -> Node:
        s = self.const(np.asarray(target, np.int32), DType.i32, near, f"{name}/shape")
        where = self.graph.inserting_after(near) if after else self.graph.inserting_before(near)
        with where:
            t = make_node(self.graph, "Reshape", [value, s], {}, name=name, device=near.device,
                          location=near.location)
        t.assigned_device = near.assigned_device
        return t

    def relayout(self, value: Output, perm: List[int], near: Node, name: str) -> Output:
        """``value`` (rank r, or lower: ones in front) transposed by ``perm``."""
        shape = value.shape
        if by_reshape(shape, perm):
            full = (1,) * (len(perm) - len(shape)) + tuple(shape)
            target = _reshape_target([full[a] for a in perm])
            return self.reshape(value, target, near, name).output(0)
        return self.transpose(value, perm, near, name).output(0)

    def operand(self, o: Operand, near: Node, name: str) -> Output:
        if o.kind in ("source", "keep"):
            return o.value
        if o.kind == "const":
            return self.const(o.array, o.like.dtype, near, name, o.like.node.control_inputs)
        return self.relayout(o.value, o.perm, near, name)

    def apply(self, plan: Plan) -> List[Node]:
        """Carry out ``plan`` on its node, in place; returns the Transposes it put after it."""
        g, node = self.graph, plan.node
        inputs = [self.operand(o, node, f"{node.name}/in{i}") for i, o in enumerate(plan.operands)]
        producers = [v.node for v in node.inputs]
        node.set_inputs(inputs)
        node.attrs = dict(plan.attrs)
        node.output_types = infer_types(node)
        created: List[Node] = []
        anchor = node
        for i, q in enumerate(plan.out_perms):
            if q is None or _identity(q) or not _data_users(node.output(i)):
                continue
            t = self.transpose(node.output(i), q, anchor, f"{node.name}/back{i}", after=True)
            g.replace_all_uses_with(node.output(i), t.output(0))     # all but t itself
            anchor = t
            created.append(t)
        erase_if_unused(g, producers + sorted(plan.dead, key=lambda n: n.name))
        return created


def _compose(graph: Graph, first: Node, second: Node, perm: List[int],
             rw: _Rewriter) -> Tuple[bool, Optional[Node]]:
    """``second`` (a Transpose of ``first``'s output) reads ``first``'s input instead;
    an identity disappears. Returns whether it changed, and ``second`` when it is still a
    Transpose."""
    q = perm_of(second)
    if q is None or second.control_inputs or len(q) != len(perm):
        return False, None
    composed = [perm[a] for a in q]
    source = first.inputs[0]
    if _identity(composed):
        graph.replace_all_uses_with(second.output(0), source)
        for user in list(second.users):
            user.remove_control_input(second)
            user.add_control_input(source.node)
        erase_if_unused(graph, [second])
        return True, None
    p = rw.perm(composed, second, f"{second.name}/perm")
    old = second.inputs[1].node
    second.set_input(0, source)
    second.set_input(1, p)
    second.attrs["Tperm"] = DType.i32
    erase_if_unused(graph, [old])
    return True, second


def _fold_constant_transposes(graph: Graph, limit: int, rw: "_Rewriter") -> bool:
    """Transposes of constants become constants: at any size when the constant has no other
    use (the result is no larger), else up to ``limit`` elements."""
    changed = False
    for node in graph:
        perm = perm_of(node) if node in graph else None
        if perm is None or node.control_inputs:
            continue
        src = node.inputs[0]
        value = constant_value(src)
        if value is None:
            continue
        if not _only_read_by(src, node) and np.size(value) > limit:
            continue
        # (``const`` copies the transposed view into a new C-order array: one copy, not two)
        c = rw.const(np.transpose(value, perm), node.output_types[0].dtype,
                     node, f"{node.name}/folded", src.node.control_inputs)
        graph.replace_all_uses_with(node.output(0), c)
        for user in list(node.users):
            user.remove_control_input(node)
            user.add_control_input(c.node)
        name = node.name
        erase_if_unused(graph, [node])
        if graph.get(name) is None:
            graph.rename(c.node, name)
        changed = True
    return changed


def _nhwc_attrs(node: Node, spec: NchwOp) -> Dict:
    attrs = dict(node.attrs, data_format="NHWC")
    for a in spec.dims:
        if a in attrs and attrs[a] is not None and len(attrs[a]) == 4:
            attrs[a] = [attrs[a][k] for k in TO_NHWC]
    pads = attrs.get("explicit_paddings")
    if pads and len(pads) == 8:
        attrs["explicit_paddings"] = [v for k in TO_NHWC for v in pads[2 * k:2 * k + 2]]
    return attrs


def _nhwc_sizes(value: Output, node: Node, rw: _Rewriter) -> Output:
    """A 4-vector of NCHW sizes in NHWC order: a constant, or a gather at run time."""
    c = constant_value(value)
    if c is not None:
        c = np.asarray(c).reshape(-1)
        return rw.const(c[list(TO_NHWC)], value.dtype, node, f"{node.name}/nhwc_sizes")
    order = rw.const(np.asarray(TO_NHWC, np.int32), DType.i32, node, f"{node.name}/order")
    axis = rw.const(np.asarray(0, np.int32), DType.i32, node, f"{node.name}/axis")
    with rw.graph.inserting_before(node):
        g = make_node(rw.graph, "GatherV2", [value, order, axis], {},
                      name=f"{node.name}/nhwc_sizes", device=node.device, location=node.location)
    g.assigned_device = node.assigned_device
    return g.output(0)


def _to_nhwc(graph: Graph, rw: "_Rewriter") -> bool:
    """Every NCHW op of ``NCHW_OPS`` as its NHWC form between Transposes."""
    changed = False
    for node in graph:
        spec = NCHW_OPS.get(node.op)
        if spec is None or node.attrs.get("data_format") != "NCHW":
            continue
        if any(node.inputs[i].shape is None or len(node.inputs[i].shape) != 4
               for i in spec.inputs):
            continue
        inputs = list(node.inputs)
        for i in spec.inputs:
            inputs[i] = rw.shared_transpose(inputs[i], TO_NHWC, node,
                                            f"{node.name}/to_nhwc{i or ''}")
        for i in spec.sizes:
            inputs[i] = _nhwc_sizes(inputs[i], node, rw)
        with graph.inserting_before(node):
            new = graph.add_node(node.op, inputs, _nhwc_attrs(node, spec),
                                 name=f"{node.name}/nhwc", control_inputs=node.control_inputs,
                                 device=node.device, location=node.location,
                                 output_types=node.output_types)
        new.output_types = infer_types(new)
        new.assigned_device = node.assigned_device
        anchor = new
        for i in range(node.num_outputs):
            out = new.output(i)
            if i in spec.outputs and node.output_users(i):
                anchor = rw.transpose(out, TO_NCHW, anchor, f"{node.name}/to_nchw{i or ''}",
                                      after=True)
                out = anchor.output(0)
            graph.replace_all_uses_with(node.output(i), out)
        for user in list(node.users):
            user.remove_control_input(node)
            user.add_control_input(new)
        name = node.name
        graph.erase_node(node)
        graph.rename(new, name)
        changed = True
    return changed


def _push_transposes(graph: Graph, rw: "_Rewriter") -> bool:
    """Push every Transpose forward while that removes Transposes (or keeps their count)."""
    work = deque(n for n in graph if n.op == "Transpose")
    budget = MAX_PUSHES_PER_NODE * max(len(graph), 1)
    changed = False
    while work and budget > 0:
        t = work.popleft()
        if t not in graph:
            continue
        perm = perm_of(t)
        if perm is None or t.control_inputs or _identity(perm) or t.inputs[0].shape is None:
            continue
        budget -= 1
        new_work: List[Node] = []
        for user in _data_users(t.output(0)):
            if t not in graph:
                break
            if user not in graph:
                continue
            if user.op == "Transpose" and user.inputs[0] == t.output(0):
                did, kept = _compose(graph, t, user, perm, rw)
                changed |= did
                if kept is not None:
                    new_work.append(kept)
                continue
            plan = _plan(user, t, perm)
            if plan is None or plan.cost() > 0:
                continue
            new_work.extend(rw.apply(plan))
            changed = True
        if t in graph and not t.users:
            erase_if_unused(graph, [t])
        work.extendleft(reversed(new_work))
    return changed


def _cleanup(graph: Graph, rw: "_Rewriter") -> bool:
    """Transposes that move only dims of size 1 become Reshapes; Reshape and Transpose
    chains the pushes left collapse (simplify's rules)."""
    changed = False
    for node in graph:
        if node not in graph:
            continue
        perm = perm_of(node)
        if perm is None or node.control_inputs:
            continue
        target = _reshape_target(node.output_types[0].shape)
        if target is None or not moves_only_ones(node.inputs[0].shape, perm):
            continue
        r = rw.reshape(node.inputs[0], target, node, f"{node.name}/reshape")
        graph.replace_all_uses_with(node.output(0), r.output(0))
        for user in list(node.users):
            user.remove_control_input(node)
            user.add_control_input(r)
        name = node.name
        erase_if_unused(graph, [node])
        if graph.get(name) is None:
            graph.rename(r, name)
        changed = True
    rules = {op: SIMPLIFY_RULES.get(op, []) for op in ("Transpose", "Reshape")}
    for _ in range(SIMPLIFY_SWEEPS):
        swept = False
        for node in graph:
            rewrite = find_rewrite(node, rules) if node in graph else None
            if rewrite is not None:
                apply_rewrite(graph, node, rewrite)
                swept = True
        changed |= swept
        if not swept:
            break
    return changed


_PADDED_CONVS = ("Conv2D", "DepthwiseConv2dNative")
# What a MaxPool's zero Pad may pad for the pool to take the padding itself: ops whose
# results are never negative (MaxPool's explicit padding takes no part in a window's max).
_NON_NEGATIVE = ("Relu", "Relu6")


def _foldable_into(node: Node, pad: Node, pads: np.ndarray) -> bool:
    """Whether ``node`` (reading ``pad``'s output as its input 0) can take the spatial
    ``pads`` as explicit padding: a convolution always, a MaxPool when ``pad`` pads a value
    that is never negative and every pad (with the pool's own) is narrower than the window."""
    if node.op in _PADDED_CONVS:
        return True
    if node.op != "MaxPool" or pad.inputs[0].node.op not in _NON_NEGATIVE:
        return False
    ksize = list(node.attrs.get("ksize") or [])
    old = list(node.attrs.get("explicit_paddings") or [0] * 8) \
        if node.attrs.get("padding") == "EXPLICIT" else [0] * 8
    if len(ksize) != 4 or len(old) != 8:
        return False
    return all(old[2 * d] + pads[d][0] < ksize[d] and old[2 * d + 1] + pads[d][1] < ksize[d]
               for d in (1, 2))


def _fold_pads(graph: Graph) -> bool:
    """A ``Pad`` (zeros) of the spatial dims read only by an NHWC convolution
    with VALID or EXPLICIT padding becomes that convolution's explicit padding: the
    ZeroPadding2D + VALID convolution that Keras models (and TensorFlow graphs written for
    ONNX-style padding) put before a strided convolution, with no padded copy of the
    activations. The same for a MaxPool where ``_foldable_into`` says so."""
    changed = False
    for conv in graph:
        if conv not in graph or conv.op not in _PADDED_CONVS + ("MaxPool",) \
                or conv.control_inputs \
                or conv.attrs.get("data_format", "NHWC") != "NHWC" \
                or conv.attrs.get("padding") not in ("VALID", "EXPLICIT"):
            continue
        pad = conv.inputs[0].node
        if pad.op != "Pad" or pad.control_inputs \
                or _data_users(pad.output(0)) != [conv] \
                or sum(1 for i in conv.inputs if i == pad.output(0)) != 1:
            continue
        pads = constant_value(pad.inputs[1])
        if pads is None:
            continue
        pads = np.asarray(pads)
        if pads.shape != (4, 2) or np.any(pads < 0) or np.any(pads[0] != 0) \
                or np.any(pads[3] != 0) or not _foldable_into(conv, pad, pads):
            continue
        old = list(conv.attrs.get("explicit_paddings") or [0] * 8) \
            if conv.attrs.get("padding") == "EXPLICIT" else [0] * 8
        added = [int(v) for v in pads.reshape(-1)]
        attrs = dict(conv.attrs, padding="EXPLICIT",
                     explicit_paddings=[a + b for a, b in zip(old, added)])
        conv.attrs = attrs
        conv.set_input(0, pad.inputs[0])
        erase_if_unused(graph, [pad])
        changed = True
    return changed


def layout(graph: Graph, fold_limit: int) -> bool:
    """Run the pass on ``graph``; whether it changed."""
    rw = _Rewriter(graph)
    changed = _to_nhwc(graph, rw)
    changed |= _fold_constant_transposes(graph, fold_limit, rw)
    changed |= _push_transposes(graph, rw)
    changed |= _cleanup(graph, rw)
    changed |= _fold_pads(graph)
    return changed


@register_pass("layout")
class Layout(Pass):
    """NCHW models computed in NHWC: Transposes pushed forward until they cancel."""

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return layout(graph, ctx.options.fold_max_elements)
