"""Reshape, ExpandDims, Squeeze: views of their input (c_alias=0, no copy)."""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ops.array.common import (_check_scalar_input, _normalize_axis, _num_elements,
                                       _partial_vector, _reference, _scalar_value,
                                       _vector_length)


def _check_reshape_request(request: Sequence[int]) -> Optional[int]:
    """Validate sizes (>= 0, or a single -1); returns the index of the -1 or None."""
    unknown = None
    for k, r in enumerate(request):
        if r == -1:
            if unknown is not None:
                raise ValueError(f"Only one input size may be -1, not both {unknown} and {k}")
            unknown = k
        elif r < 0:
            raise ValueError(f"Size {k} must be non-negative, not {r}")
    return unknown


def _reshape_dims(request: Sequence[int], in_shape: Sequence[int]) -> Tuple[int, ...]:
    """TensorFlow's Reshape rule: one -1 is inferred, leaving zero sizes out of the inference."""
    unknown = _check_reshape_request(request)
    has_zero = 0 in request
    total = math.prod(in_shape)
    out = list(request)
    if unknown is not None:
        known = math.prod(r for r in request if r > 0)
        count = math.prod(d for d in in_shape if d > 0 or not has_zero)
        in_zero = has_zero and 0 in in_shape
        missing = count // known
        if not in_zero and missing * known != count:
            raise ValueError(f"Input to reshape is a tensor with {total} values, but the "
                             f"requested shape requires a multiple of {known}")
        out[unknown] = missing
    if math.prod(out) != total:
        raise ValueError(f"Input to reshape is a tensor with {total} values, but the requested "
                         f"shape has {math.prod(out)}")
    return tuple(out)


def _reshape_shape(ctx):
    n = _vector_length(ctx, 1)
    request = _partial_vector(ctx, 1)
    if request is None:
        return [None if n is None else (None,) * n]
    in_shape = ctx.input_shape(0)
    if None not in request and _num_elements(in_shape) is not None:
        return [_reshape_dims(request, in_shape)]
    _check_reshape_request([r for r in request if r is not None])
    return [tuple(None if r is None or r == -1 else r for r in request)]


@_reference
def _reshape_kernel(ctx, x, shape):
    if shape.ndim != 1:
        raise ValueError(f"shape must be a vector, got shape {list(shape.shape)}")
    return x.reshape(_reshape_dims([int(v) for v in shape], x.shape))


register_op("Reshape", inputs=["tensor: T", "shape: Tshape"], outputs=["output: T"],
            attrs=["T: {all}", "Tshape: {i32, i64} = i32"], shape=_reshape_shape,
            kernel=_reshape_kernel, c_alias=0, group="movement", half_native=True,
            doc="The tensor with a new shape (a view); one size may be -1 (inferred).")


def _expand_dims_shape(ctx):
    _check_scalar_input(ctx, 1)
    s = ctx.input_shape(0)
    axis = _scalar_value(ctx, 1)
    if s is None:
        return [None]
    if axis is None:
        return [(None,) * (len(s) + 1)]
    a = _normalize_axis(axis, len(s) + 1, "dim")
    return [s[:a] + (1,) + s[a:]]


@_reference
def _expand_dims_kernel(ctx, x, dim):
    if dim.size != 1:
        raise ValueError(f"dim must be a scalar, got shape {list(dim.shape)}")
    return np.expand_dims(x, _normalize_axis(int(dim.reshape(-1)[0]), x.ndim + 1, "dim"))


register_op("ExpandDims", inputs=["input: T", "dim: Tdim"], outputs=["output: T"],
            attrs=["T: {all}", "Tdim: {i32, i64} = i32"], shape=_expand_dims_shape,
            kernel=_expand_dims_kernel, c_alias=0,
            group="movement", half_native=True,
            doc="Inserts a dim of size 1 at index ``dim`` (a view).")


def _squeeze_axes(dims: Sequence[int], rank: int) -> List[int]:
    return sorted({_normalize_axis(a, rank, "squeeze dim") for a in dims})


def _squeeze_shape(ctx):
    s = ctx.input_shape(0)
    dims = ctx.attr("squeeze_dims")
    if s is None:
        return [None]
    if not dims:
        if any(d is None for d in s):
            return [None]            # which dims are 1 is known only at run time
        return [tuple(d for d in s if d != 1)]
    axes = _squeeze_axes(dims, len(s))
    for a in axes:
        if s[a] is not None and s[a] != 1:
            raise ctx.error(f"Can not squeeze dim[{a}], expected a dimension of 1, got {s[a]}")
    return [tuple(d for k, d in enumerate(s) if k not in axes)]


@_reference
def _squeeze_kernel(ctx, x):
    dims = ctx.attrs["squeeze_dims"]
    if not dims:
        return np.squeeze(x)
    axes = _squeeze_axes(dims, x.ndim)
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"Can not squeeze dim[{a}], expected a dimension of 1, got "
                             f"{x.shape[a]}")
    return np.squeeze(x, axis=tuple(axes))


register_op("Squeeze", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: {all}", "squeeze_dims: list(int) = []"], shape=_squeeze_shape,
            kernel=_squeeze_kernel, c_alias=0, group="movement", half_native=True,
            doc="Removes dims of size 1: those listed in ``squeeze_dims``, or all (a view).")
