"""Creating nodes from an op name, inputs and attrs: the one path the builder, the IR parser
and the passes share. It fills attr defaults, infers type attrs (``T``) and list lengths
(``N``) from the inputs, checks dtypes against the signature and computes output types."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from compiler.errors import OpError, ShapeError
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import TensorType
from compiler.ir.op_registry import (REQUIRED, ReferenceContext, OpDef, ShapeContext, coerce_attr,
                                   computes_half_in_f32, f32_type_attrs, get_op)
from runtime.dtypes import DType, f32_to_half, half_to_f32


def constant_value(out: Output) -> Optional[np.ndarray]:
    """The value of ``out`` if it is known without running the graph (Const and friends)."""
    node = out.node
    if node.op == "Const":
        return node.attrs["value"]
    if node.op in ("Identity", "StopGradient") and node.inputs:
        return constant_value(node.inputs[0])
    if node.op == "Shape" and node.inputs and node.inputs[0].type.is_fully_defined:
        return np.array(node.inputs[0].type.shape, dtype=node.attrs.get("out_type", DType.i32).np)
    if node.op == "Size" and node.inputs and node.inputs[0].type.is_fully_defined:
        return np.array(node.inputs[0].type.num_elements, dtype=node.attrs.get("out_type", DType.i32).np)
    if node.op == "Rank" and node.inputs and node.inputs[0].type.rank is not None:
        return np.array(node.inputs[0].type.rank, dtype=np.int32)
    if node.op == "Cast" and node.inputs:
        v = constant_value(node.inputs[0])
        # the op's own kernel: it defines NaN / out-of-range float->int casts
        return None if v is None else run_reference(node, [v])[0]
    if node.op == "Pack" and node.inputs:
        vals = [constant_value(i) for i in node.inputs]
        if all(v is not None for v in vals):
            return np.stack(vals, axis=node.attrs.get("axis", 0))
    if node.op == "Range" and len(node.inputs) == 3:
        # the axes of a reduction over all dims (``range(rank(x))``), as TensorFlow's shape
        # refiner evaluates small constant subgraphs; only when the result is small
        vals = [constant_value(i) for i in node.inputs]
        if all(v is not None and np.size(v) == 1 for v in vals):
            start, limit, delta = (float(np.reshape(v, -1)[0]) for v in vals)
            if delta != 0 and 0 <= (limit - start) / delta <= _SMALL_RANGE:
                return run_reference(node, vals)[0]
    return None


_SMALL_RANGE = 64


def infer_types(node: Node, input_types: Optional[Sequence[TensorType]] = None,
                op: Optional[OpDef] = None) -> List[TensorType]:
    """Run the op's shape function for ``node``; returns its output types."""
    op = op or get_op(node.op, node)
    if input_types is None:
        input_types = [o.node.output_types[o.index] for o in node._inputs]
    if op.shape_fn is None:
        if node.output_types:
            return list(node.output_types)
        raise ShapeError("op has no shape function and no declared output types", node)
    ctx = ShapeContext(node, input_types, node.attrs, _ConstantInputs(node), op)
    try:
        result = op.shape_fn(ctx)
        out = []
        for i, r in enumerate(result):
            if isinstance(r, TensorType):
                out.append(r)
            else:
                dtype = _single_output_dtype(op, node.attrs) if i == 0 else None
                out.append(TensorType(dtype or ctx.output_dtype(i), r))
    except ShapeError:
        raise
    except KeyError as e:
        raise ShapeError(f"missing attr {e}", node) from None
    except (ValueError, TypeError, IndexError) as e:
        raise ShapeError(str(e), node) from None
    return out


def _single_output_dtype(op: OpDef, attrs: Dict[str, Any]) -> Optional[DType]:
    """The dtype of an op's only output, when it has one (None: ``output_dtype`` decides)."""
    if len(op.outputs) != 1:
        return None
    arg = op.outputs[0]
    if arg.is_list:
        return None
    return arg.dtype if arg.dtype is not None else attrs.get(arg.type_attr)


class _ConstantInputs:
    """The constant values of a node's inputs, each found when a shape function asks (most
    never ask, and a graph of thousands of nodes is built one shape function at a time)."""

    __slots__ = ("node",)

    def __init__(self, node: Node):
        self.node = node

    def __getitem__(self, i: int) -> Optional[np.ndarray]:
        return constant_value(self.node._inputs[i])

    def __len__(self) -> int:
        return len(self.node._inputs)


def resolve_signature(op: OpDef, inputs: Sequence, attrs: Dict[str, Any], node_desc=None):
    """Flatten list inputs, infer type and length attrs, fill defaults and coerce attrs.

    ``inputs`` holds one entry per declared input arg (a list for ``N * T`` args).
    Returns (flat input outputs, completed attrs).
    """
    if len(inputs) != len(op.inputs):
        names = ", ".join(a.name for a in op.inputs) or "none"
        raise OpError(f"{op.name} takes {len(op.inputs)} inputs ({names}), got {len(inputs)}", node_desc)
    given, attrs = attrs, {}
    for k, v in given.items():
        attrs[k] = coerce_attr(op, k, v, node_desc)
    flat: List[Output] = []
    for arg, value in zip(op.inputs, inputs):
        if arg.is_list:
            values = list(value)
            if arg.number_attr:
                n = attrs.setdefault(arg.number_attr, len(values))
                if n != len(values):
                    raise OpError(f"input {arg.name} has {len(values)} tensors but "
                                  f"{arg.number_attr}={n}", node_desc)
            if arg.type_list_attr:
                attrs.setdefault(arg.type_list_attr, [v.dtype for v in values])
        else:
            values = (value,)
        for v in values:
            if type(v) is not Output and not isinstance(v, Output):
                raise OpError(f"input {arg.name} of {op.name} must be a tensor, got {v!r}", node_desc)
            dtype = v.node.output_types[v.index].dtype
            if arg.dtype is not None and dtype != arg.dtype:
                raise OpError(f"input {arg.name} of {op.name} must be {arg.dtype}, got {dtype} "
                              f"(from %{v.node.name})", node_desc)
            if arg.type_attr is not None:
                have = attrs.get(arg.type_attr)
                if have is None:
                    attrs[arg.type_attr] = coerce_attr(op, arg.type_attr, dtype, node_desc)
                elif have != dtype:
                    raise OpError(f"input {arg.name} of {op.name} is {dtype} but {arg.type_attr}={have} "
                                  f"(from other inputs or attrs; %{v.node.name})", node_desc)
            flat.append(v)
    for name, a in op.attrs.items():
        if name not in attrs:
            if a.default is REQUIRED:
                raise OpError(f"{op.name} needs attr '{name}' ({a.kind})", node_desc)
            attrs[name] = a.default
    return flat, attrs


def make_node(graph: Graph, op_name: str, inputs: Sequence = (), attrs: Optional[Dict[str, Any]] = None,
              *, name: Optional[str] = None, control_inputs=(), device: str = "", location=None,
              output_types: Optional[Sequence[TensorType]] = None,
              exact_name: bool = False) -> Node:
    """Create a fully checked node; output types come from the shape function.

    ``name`` is made unique (``add``, ``add_1``, ...) unless ``exact_name``.
    """
    desc = _Desc(name or op_name, op_name, location)
    op = get_op(op_name, desc)
    flat, full_attrs = resolve_signature(op, inputs, attrs or {}, desc)
    node = graph.add_node(op_name, flat, full_attrs, name=name, control_inputs=control_inputs,
                          device=device, location=location, output_types=output_types or (),
                          exact_name=exact_name)
    if output_types is None:
        try:
            node.output_types = infer_types(node, op=op)
        except Exception:
            graph.erase_node(node)
            raise
    return node


class _Desc:
    """Stands in for a node in error messages before the node exists."""

    __slots__ = ("name", "op", "location")

    def __init__(self, name, op, location):
        self.name, self.op, self.location = name, op, location


def run_reference(node: Node, values: Sequence[np.ndarray], state=None) -> List[np.ndarray]:
    """Run the op's numpy kernel on ``values``; returns one array per output, exact dtypes.

    A node that computes f16/bf16 in f32 (``computes_half_in_f32``) runs as the compiled code
    does after ``legalize-types``: its half inputs made f32 (exactly), the kernel run with f32
    type attrs, its half outputs rounded back to nearest even."""
    op = get_op(node.op, node)
    if op.kernel is None:
        raise OpError("op has no reference kernel", node)
    half = computes_half_in_f32(node, op)
    if half:
        values = [half_to_f32(v, o.dtype) if o.dtype.is_half else v
                  for v, o in zip(values, node.inputs)]
        types = [TensorType(DType.f32, t.shape) if t.dtype.is_half else t
                 for t in node.output_types]
        ctx = ReferenceContext(node, f32_type_attrs(op, node.attrs), types, state)
    else:
        ctx = ReferenceContext(node, node.attrs, node.output_types, state)
    result = op.kernel(ctx, *values)
    if not isinstance(result, (list, tuple)):
        result = [result]
    out = []
    for i, r in enumerate(result):
        t = node.output_types[i] if i < len(node.output_types) else None
        if t is not None and t.dtype is not DType.resource:
            r = np.asarray(r)
            if half and t.dtype.is_half:          # computed in f32: f32 first, then rounded
                r = f32_to_half(r.astype(np.float32, copy=False), t.dtype)
            elif r.dtype != t.dtype.np:
                r = r.astype(t.dtype.np)
        out.append(r)
    return out
