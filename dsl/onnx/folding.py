"""Values known at import time: a tensor computed only from constants (an ONNX exporter's
``Shape -> Gather -> Concat`` chain feeding a Reshape) is evaluated with the reference kernels,
so lowerings that need a compile-time value (shapes, axes, pads) get it."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from compiler.errors import CompileError
from compiler.ir.construct import constant_value, run_reference
from compiler.ir.graph import Node, Output
from compiler.ir.op_registry import get_op
from runtime.errors import FlowcError

_NOT_FOLDABLE = {"Placeholder", "PlaceholderWithDefault"}
MAX_FOLDED_NODES = 10_000


def static_value(out: Output) -> Optional[np.ndarray]:
    """The value of ``out`` when it depends on constants only, or on dims of shapes known at
    import time (a Swin pad computed from ``Shape(x)[2]`` where only the batch is dynamic),
    else None."""
    value = constant_value(out)
    if value is not None:
        return value
    needed = _constant_ancestors(out.node)
    if needed is None:
        value = _from_known_dims(out)
        return value if isinstance(value, np.ndarray) else None
    values: Dict[Node, List[np.ndarray]] = {}
    for node in out.node.graph:
        if node not in needed:
            continue
        direct = constant_value(node.output(0)) if node.num_outputs == 1 else None
        if direct is not None:
            values[node] = [direct]
            continue
        try:
            values[node] = run_reference(node, [values[i.node][i.index] for i in node.inputs])
        except (FlowcError, CompileError, ValueError, TypeError, IndexError, ArithmeticError):
            return None                  # the kernel refuses: leave the error to run time
    return values[out.node][out.index]


def _constant_ancestors(node: Node):
    """Every node ``node`` depends on, or None when one is fed, stateful or too many."""
    seen = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if n is not node and n.num_outputs == 1 and constant_value(n.output(0)) is not None:
            seen.add(n)                  # known without its inputs (Shape of a static shape)
            continue
        if n.op in _NOT_FOLDABLE or n.control_inputs or get_op(n.op).stateful \
                or get_op(n.op).is_control_flow:
            return None                  # (a loop variable is not its initial value)
        seen.add(n)
        if len(seen) > MAX_FOLDED_NODES:
            return None
        stack.extend(i.node for i in n.inputs)
    return seen


# Ops whose value depends on their input's shape only, never on its values.
_SHAPE_ONLY = {"Shape", "ShapeN", "Size", "Rank"}


def fed_ancestors(out: Output, through_shapes: bool = True) -> List[Node]:
    """The placeholders ``out``'s value depends on (through nodes not known at compile time),
    in graph order: the graph inputs to bind so that the value becomes static. Control flow
    stops the walk: a value of a loop's iteration stays a run-time value whatever is bound.
    ``through_shapes=False``: only the placeholders whose values (not just their shapes, as
    ``Shape(input_ids)`` on a dynamic sequence axis) it depends on."""
    found, seen, stack = set(), set(), [out.node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.num_outputs == 1 and constant_value(n.output(0)) is not None:
            continue
        if n.op in _NOT_FOLDABLE:
            found.add(n)
            continue
        if get_op(n.op).is_control_flow or (not through_shapes and n.op in _SHAPE_ONLY):
            continue
        stack.extend(i.node for i in n.inputs)
    return [n for n in out.node.graph if n in found]


# --- values read from the known dims of partially known shapes ---------------------------------
class _Partial(list):
    """A 1-D integer value with some elements unknown (None): ``Shape(x)`` of an ``x`` whose
    batch is dynamic, and what Gather, Slice, StridedSlice and Concat make of it."""
    dtype: np.dtype


def _partial(elements, dtype) -> object:
    """A full array when every element is known, else a ``_Partial``."""
    if None not in elements:
        return np.array(elements, dtype=dtype)
    p = _Partial(elements)
    p.dtype = np.dtype(dtype)
    return p


def _pick(whole: _Partial, index: np.ndarray) -> object:
    """``whole[index]`` for a scalar or 1-D index (negative counts from the end)."""
    n = len(whole)
    flat = [int(i) + n if int(i) < 0 else int(i) for i in np.reshape(index, -1)]
    if any(not 0 <= i < n for i in flat):
        return None
    picked = [whole[i] for i in flat]
    if np.ndim(index) == 0:
        return None if picked[0] is None else np.array(picked[0], dtype=whole.dtype)
    return _partial(picked, whole.dtype) if np.ndim(index) == 1 else None


def _strided(whole: _Partial, node: Node, bounds) -> object:
    """A 1-D StridedSlice of a partial value (masks as TensorFlow defines them)."""
    if any(node.attrs.get(m, 0) for m in ("ellipsis_mask", "new_axis_mask")):
        return None
    begin, end, stride = (int(np.reshape(b, -1)[0]) for b in bounds)
    if stride == 0:
        return None
    if node.attrs.get("shrink_axis_mask", 0) & 1:
        return _pick(whole, np.array(begin))
    return _partial(whole[slice(None if node.attrs.get("begin_mask", 0) & 1 else begin,
                                None if node.attrs.get("end_mask", 0) & 1 else end, stride)],
                    whole.dtype)


def _known_dims_step(node: Node, values: list) -> object:
    """One node's value from its inputs' (arrays, partials or None): a partial in, a partial
    or an array out where the op only moves elements; other ops need every input known."""
    if node.op == "Shape" and node.inputs and node.inputs[0].shape is not None:
        return _partial(list(node.inputs[0].shape), node.output(0).dtype.np)
    if not any(isinstance(v, _Partial) for v in values):
        if any(v is None for v in values):
            return None
        try:
            return run_reference(node, values)[0]
        except (FlowcError, CompileError, ValueError, TypeError, IndexError, ArithmeticError):
            return None
    first = values[0]
    rest_known = all(isinstance(v, np.ndarray) for v in values[1:])
    if node.op in ("Identity", "StopGradient") and isinstance(first, _Partial):
        return first
    if node.op == "Cast" and isinstance(first, _Partial):
        return _partial(list(first), node.output(0).dtype.np)
    if node.op == "GatherV2" and isinstance(first, _Partial) and rest_known \
            and int(np.reshape(values[2], -1)[0]) in (0, -1):
        return _pick(first, values[1])
    if node.op == "StridedSlice" and isinstance(first, _Partial) and rest_known \
            and all(np.size(v) == 1 for v in values[1:4]):
        return _strided(first, node, values[1:4])
    if node.op == "Slice" and isinstance(first, _Partial) and rest_known \
            and all(np.size(v) == 1 for v in values[1:3]):
        begin, size = (int(np.reshape(v, -1)[0]) for v in values[1:3])
        end = len(first) if size == -1 else begin + size
        if not 0 <= begin <= end <= len(first):
            return None
        return _partial(first[begin:end], first.dtype)
    if node.op == "ConcatV2" and isinstance(values[-1], np.ndarray) \
            and int(np.reshape(values[-1], -1)[0]) in (0, -1):
        joined = []
        for v in values[:-1]:
            if v is None or (not isinstance(v, _Partial) and np.ndim(v) != 1):
                return None
            joined += list(v) if isinstance(v, _Partial) else [int(e) for e in v]
        return _partial(joined, node.output(0).dtype.np)
    return None


# Values this small at most are evaluated from known dims (shape arithmetic, not weights).
_MAX_SHAPE_VALUE = 64


def _small(out: Output) -> bool:
    """Rank 2 at most, with at most ``_MAX_SHAPE_VALUE`` elements in its known dims (a pads
    vector reshaped to [?, 2] and reversed, as PyTorch's exporter writes F.pad's)."""
    shape = out.shape
    return shape is not None and len(shape) <= 2 \
        and int(np.prod([d for d in shape if d is not None])) <= _MAX_SHAPE_VALUE


def _from_known_dims(out: Output) -> object:
    """``out``'s value (an array, a ``_Partial`` or None) evaluated from constants and the
    known dims of shapes, for nodes that are neither fed, stateful nor control flow."""
    values: Dict[Node, object] = {}
    stack = [(out.node, False)]
    while stack:
        n, ready = stack.pop()
        if n in values:
            continue
        direct = constant_value(n.output(0)) if n.num_outputs == 1 else None
        if direct is not None:
            values[n] = direct
            continue
        if n.op in _NOT_FOLDABLE or n.control_inputs or n.num_outputs != 1 \
                or not _small(n.output(0)) or get_op(n.op).stateful \
                or get_op(n.op).is_control_flow:
            values[n] = None
            continue
        if n.op == "Shape":
            values[n] = _known_dims_step(n, [])
            continue
        if not ready:
            if len(values) > MAX_FOLDED_NODES:
                return None
            stack.append((n, True))
            stack.extend((i.node, False) for i in n.inputs if i.node not in values)
            continue
        values[n] = _known_dims_step(n, [values[i.node] for i in n.inputs])
    return values[out.node]


def partial_value(out: Output) -> Optional[List[Optional[int]]]:
    """The elements of 1-D integer ``out`` known at import time (None for the others), or None
    when not even its length is: ``Concat(Shape(x)[:2], [64, 64])`` with a dynamic batch is
    ``[None, 3, 64, 64]``."""
    value = static_value(out)
    if value is None:
        value = _from_known_dims(out)
    if isinstance(value, _Partial):
        return list(value)
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu":
        return [int(v) for v in value]
    return None
