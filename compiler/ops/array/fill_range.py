"""Fill, ZerosLike, OnesLike, OneHot, Range: new tensors."""
from __future__ import annotations

from typing import Callable

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ops.array.common import (INT64_MAX, _check_fits, _check_scalar_input,
                                       _partial_vector, _reference, _scalar_value,
                                       _vector_length)


def _shape_from_dims_input(ctx, i: int):
    """The output shape that the 1-D dims input ``i`` describes, as far as it is known."""
    n = _vector_length(ctx, i)
    dims = _partial_vector(ctx, i)
    if dims is None:
        return None if n is None else (None,) * n
    for d in dims:
        if d is not None and d < 0:
            raise ctx.error(f"Dimension {d} must be >= 0")
    return tuple(dims)


def _fill_shape(ctx):
    _check_scalar_input(ctx, 1)
    return [_shape_from_dims_input(ctx, 0)]


@_reference
def _fill_kernel(ctx, dims, value):
    if dims.ndim != 1:
        raise ValueError(f"dims must be a vector, got shape {list(dims.shape)}")
    if value.ndim != 0:
        raise ValueError(f"value must be a scalar, got shape {list(value.shape)}")
    shape = [int(d) for d in dims]
    for d in shape:
        if d < 0:
            raise ValueError(f"Dimension {d} must be >= 0")
    _check_fits(shape, value.dtype.itemsize)
    return np.full(shape, value, dtype=value.dtype)


register_op("Fill", inputs=["dims: index_type", "value: T"], outputs=["output: T"],
            attrs=["T: {all}", "index_type: {i32, i64} = i32"], shape=_fill_shape,
            kernel=_fill_kernel,
            group="other", half_native=True,
            doc="A tensor of shape ``dims`` with every element ``value``.")


def _like(name: str, value: int, np_fn: Callable) -> None:
    register_op(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: {all}"],
                shape=lambda ctx: [ctx.input_shape(0)], kernel=lambda ctx, x: np_fn(x),
                group="other", doc=f"A tensor of {value}s with the shape and dtype of ``x``.")


_like("ZerosLike", 0, np.zeros_like)
_like("OnesLike", 1, np.ones_like)


def _one_hot_axis(axis: int, rank: int) -> int:
    if not -1 <= axis <= rank:
        raise ValueError(f"Expected axis to be -1 or between [0, {rank}]. But received: {axis}")
    return rank if axis == -1 else axis


def _one_hot_shape(ctx):
    for i in (1, 2, 3):
        _check_scalar_input(ctx, i)
    depth = _scalar_value(ctx, 1)
    if depth is not None and depth < 0:
        raise ctx.error(f"depth must be non-negative, got: {depth}")
    s = ctx.input_shape(0)
    if s is None:
        return [None]
    a = _one_hot_axis(ctx.attr("axis"), len(s))
    return [s[:a] + (depth,) + s[a:]]


@_reference
def _one_hot_kernel(ctx, indices, depth, on_value, off_value):
    for name, v in (("depth", depth), ("on_value", on_value), ("off_value", off_value)):
        if v.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got shape {list(v.shape)}")
    depth = int(depth)
    if depth < 0:
        raise ValueError(f"depth must be non-negative, got: {depth}")
    a = _one_hot_axis(ctx.attrs["axis"], indices.ndim)
    _check_fits(list(indices.shape) + [depth], on_value.dtype.itemsize)
    ids = np.expand_dims(indices.astype(np.int64), a)
    positions = np.arange(depth).reshape([depth if k == a else 1 for k in range(indices.ndim + 1)])
    return np.where(ids == positions, on_value, off_value).astype(on_value.dtype)


register_op("OneHot", inputs=["indices: TI", "depth: i32", "on_value: T", "off_value: T"],
            outputs=["output: T"],
            attrs=["axis: int = -1", "T: {all}", "TI: {u8, i8, i32, i64} = i64"],
            shape=_one_hot_shape, kernel=_one_hot_kernel, group="other",
            doc="One-hot vectors of ``depth`` along ``axis``; indices outside [0, depth) give "
                "all off_value.")


def _range_count(start, limit, delta) -> int:
    """Range's element count, TensorFlow's rules (computed in the element type for floats)."""
    if delta == 0:
        raise ValueError(f"Requires delta != 0: {delta}")
    if delta > 0:
        if not start <= limit:
            raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    elif not start >= limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if isinstance(start, (int, np.integer)):
        span, step = abs(int(limit) - int(start)), abs(int(delta))
        count = -(-span // step)
    else:
        with np.errstate(all="ignore"):
            n = np.ceil(np.abs((limit - start) / delta))
        if not (n >= 0 and float(n) < 2.0**63):
            raise ValueError(f"Requires ((limit - start) / delta) <= {INT64_MAX}")
        count = int(n)
    if count > INT64_MAX:
        raise ValueError(f"Requires ((limit - start) / delta) <= {INT64_MAX}")
    return count


def _scalar(v: np.ndarray):
    """A numpy scalar of the array's dtype (ints as Python ints)."""
    x = v.reshape(-1)[0]
    return int(x) if v.dtype.kind in "iu" else x


def _range_shape(ctx):
    for i in range(3):
        _check_scalar_input(ctx, i)
    values = [ctx.input_value(i) for i in range(3)]
    if any(v is None for v in values):
        return [(None,)]
    return [(_range_count(*[_scalar(v) for v in values]),)]


@_reference
def _range_kernel(ctx, start, limit, delta):
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got shape {list(v.shape)}")
    s, l, d = _scalar(start), _scalar(limit), _scalar(delta)
    count = _range_count(s, l, d)
    _check_fits([count], start.dtype.itemsize)
    if start.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            values = np.int64(s) + np.arange(count, dtype=np.int64) * np.int64(d)
        return values.astype(start.dtype)
    steps = np.arange(count, dtype=np.int64).astype(start.dtype)
    return start.reshape(()) + steps * delta.reshape(())


register_op("Range", inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"], outputs=["output: Tidx"],
            attrs=["Tidx: {float, i32, i64} = i32"], shape=_range_shape, kernel=_range_kernel,
            group="other",
            doc="start, start + delta, ... up to (not including) limit.")
