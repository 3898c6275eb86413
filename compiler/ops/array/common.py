"""Helpers shared by the array ops' shape functions and reference kernels: reading shape-like
inputs (constant or partially known), normalizing axes, naming inputs in errors, and the
allocation rule (``_check_fits``) that the C kernels check at run time too.
"""
from __future__ import annotations

import math
from typing import Callable, List, Optional, Sequence

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.construct import constant_value
from compiler.ir.graph import Output
from compiler.ir.types import merge_shapes, shape_str

Dim = Optional[int]

INT64_MAX = 2**63 - 1


def _reference(fn: Callable) -> Callable:
    """Wrap a numpy kernel so that a ValueError becomes an ExecutionError naming the node."""
    def kernel(ctx, *arrays):
        try:
            return fn(ctx, *arrays)
        except ValueError as e:
            raise ExecutionError(str(e), ctx.node) from None
    kernel.__name__ = fn.__name__
    kernel.__doc__ = fn.__doc__
    return kernel


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` in row-major order (0-d arrays stay 0-d, unlike np.ascontiguousarray)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else a.copy(order="C")


def _normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [-rank, rank) made non-negative; ValueError naming ``what`` otherwise."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} is out of range for a tensor of rank {rank} "
                         f"(expected [{-rank}, {rank}))")
    return axis + rank if axis < 0 else axis


def _input_name(node, i: int) -> str:
    """The signature name of flat input ``i`` of ``node`` (list args span several inputs)."""
    start = 0
    for arg in node.op_def.inputs:
        if arg.number_attr:
            n = node.attrs[arg.number_attr]
        elif arg.type_list_attr:
            n = len(node.attrs[arg.type_list_attr])
        else:
            n = 1
        if i < start + n:
            return arg.name
        start += n
    return f"input {i}"


def _num_elements(shape) -> Dim:
    if shape is None or any(d is None for d in shape):
        return None
    return math.prod(shape)


def _vector_value(ctx, i: int) -> Optional[List[int]]:
    """The elements of constant input ``i`` as ints (None when not a constant)."""
    v = ctx.input_value(i)
    return None if v is None else [int(x) for x in np.reshape(v, -1)]


def _partial_vector(ctx, i: int) -> Optional[List[Optional[int]]]:
    """Elements of 1-D input ``i`` known at compile time, None for the others (see
    ``_partial_elements``)."""
    v = _vector_value(ctx, i)
    if v is not None:
        return v
    return _partial_elements(ctx.node.inputs[i])


def _partial_elements(out: Output, depth: int = 0) -> Optional[List[Optional[int]]]:
    """The elements of a 1-D int tensor known at compile time (None for the others), or None
    when not even its length is known: a constant, the Shape of a partially known tensor, a
    Pack of scalars, a Cast, a ConcatV2 of such vectors, a GatherV2 of one by constant
    indices, or a plain 1-D StridedSlice of one
    (TensorFlow's ``constant_value_as_shape``: ``reshape(x, concat([shape(x)[:1], [16]], 0))``
    keeps the static 16)."""
    v = constant_value(out)
    if v is not None:
        return [int(x) for x in np.reshape(v, -1)] if np.ndim(v) == 1 else None
    src = out.node
    if depth > 16 or out.type.rank != 1:
        return None
    if src.op == "Shape" and src.inputs and src.inputs[0].shape is not None:
        return list(src.inputs[0].shape)
    if src.op == "Pack" and all(o.type.rank == 0 for o in src.inputs):
        values = [constant_value(o) for o in src.inputs]
        return [None if v is None else int(v) for v in values]
    if src.op == "Cast" and src.inputs and src.inputs[0].dtype.is_integer:
        return _partial_elements(src.inputs[0], depth + 1)
    if src.op == "ConcatV2" and len(src.inputs) >= 3:
        axis = constant_value(src.inputs[-1])
        if axis is None or int(np.reshape(axis, -1)[0]) not in (0, -1):
            return None
        joined: List[Optional[int]] = []
        for part in src.inputs[:-1]:
            elements = _partial_elements(part, depth + 1)
            if elements is None:
                n = part.shape[0] if part.shape is not None and len(part.shape) == 1 else None
                if n is None:
                    return None
                elements = [None] * n
            joined += elements
        return joined
    if src.op == "GatherV2" and len(src.inputs) == 3 and not src.attrs.get("batch_dims", 0):
        # a constant reordering of such a vector (the layout pass's NCHW -> NHWC sizes)
        indices, axis = constant_value(src.inputs[1]), constant_value(src.inputs[2])
        whole = _partial_elements(src.inputs[0], depth + 1)
        if whole is None or indices is None or axis is None or np.ndim(indices) != 1 \
                or int(np.reshape(axis, -1)[0]) not in (0, -1):
            return None
        picked = [int(k) for k in np.reshape(indices, -1)]
        if any(not 0 <= k < len(whole) for k in picked):
            return None
        return [whole[k] for k in picked]
    if src.op == "StridedSlice" and not any(src.attrs.get(m, 0) for m in (
            "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        bounds = [constant_value(o) for o in src.inputs[1:4]]
        whole = _partial_elements(src.inputs[0], depth + 1)
        if whole is None or any(b is None or np.size(b) != 1 for b in bounds):
            return None
        begin, end, stride = (int(np.reshape(b, -1)[0]) for b in bounds)
        if stride == 0:
            return None
        return whole[slice(None if src.attrs.get("begin_mask", 0) & 1 else begin,
                           None if src.attrs.get("end_mask", 0) & 1 else end, stride)]
    return None


def _scalar_value(ctx, i: int) -> Optional[int]:
    """Constant scalar (or one-element) input ``i`` as an int, checked; None when unknown."""
    v = ctx.input_value(i)
    if v is None:
        return None
    if np.size(v) != 1:
        raise ctx.error(f"input {_input_name(ctx.node, i)} must be a scalar, got shape "
                        f"{list(np.shape(v))}")
    return int(np.reshape(v, -1)[0])


def _vector_length(ctx, i: int) -> Dim:
    """Length of 1-D input ``i`` if known; error if its rank is known and not 1."""
    s = ctx.input_shape(i)
    if s is None:
        v = ctx.input_value(i)
        return None if v is None else int(np.size(v))
    if len(s) != 1:
        raise ctx.error(f"input {_input_name(ctx.node, i)} must be 1-D, got shape {shape_str(s)}")
    return s[0]


def _check_scalar_input(ctx, i: int) -> None:
    s = ctx.input_shape(i)
    if s is not None and len(s) != 0 and not (len(s) == 1 and s[0] in (1, None)):
        raise ctx.error(f"input {_input_name(ctx.node, i)} must be a scalar, got shape "
                        f"{shape_str(s)}")


def _check_fits(factors: Sequence[int], itemsize: int) -> None:
    """The C kernels' allocation rule: every prefix product of the dims, in bytes, fits int64."""
    p = itemsize
    for f in factors:
        if f < 0:
            raise ValueError(f"dimension {f} is negative")
        p *= f
        if p > INT64_MAX:
            raise ValueError("the output shape is too large (its byte size overflows int64)")


def _merged_shape(ctx, shapes: Sequence, what: str):
    """The most specific shape compatible with all ``shapes`` (error naming the first misfit)."""
    merged = None
    for i, s in enumerate(shapes):
        try:
            merged = merge_shapes(merged, s)
        except ValueError:
            raise ctx.error(f"{what}: shape of input {i} {shape_str(s)} does not match "
                            f"{shape_str(merged)}") from None
    return merged
