"""BroadcastTo and LinSpace, as TensorFlow defines them: ``input`` broadcast (numpy's rules)
to a shape given as a tensor, and ``num`` evenly spaced values from start to stop. The C
kernels are ``compiler/codegen/c_ops/broadcast_to.py``'s."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import (_check_fits, _check_scalar_input, _partial_vector,
                                       _reference, _vector_length)


def broadcast_error(in_shape: Sequence, out_shape: Sequence) -> Optional[str]:
    """Why ``in_shape`` does not broadcast to ``out_shape`` (None when it does; unknown dims
    pass)."""
    if len(in_shape) > len(out_shape):
        return (f"Rank of input ({len(in_shape)}) must be no greater than rank of output shape "
                f"({len(out_shape)}): cannot broadcast {shape_str(in_shape)} to "
                f"{shape_str(out_shape)}")
    lead = len(out_shape) - len(in_shape)
    for k, d in enumerate(in_shape):
        o = out_shape[lead + k]
        if d is not None and o is not None and d != 1 and d != o:
            return (f"Unable to broadcast tensor of shape {shape_str(in_shape)} to tensor of "
                    f"shape {shape_str(out_shape)}")
    return None


def _broadcast_to_shape(ctx):
    s = ctx.input_shape(0)
    n = _vector_length(ctx, 1)
    dims = _partial_vector(ctx, 1)
    if dims is None:
        return [None if n is None else (None,) * n]
    for d in dims:
        if d is not None and d < 0:
            raise ctx.error(f"Dimension {d} must be >= 0")
    if s is None:
        return [tuple(dims)]
    why = broadcast_error(s, dims)
    if why:
        raise ctx.error(why)
    out = list(dims)
    lead = len(dims) - len(s)
    for k, d in enumerate(s):
        if out[lead + k] is None and d is not None and d != 1:
            out[lead + k] = d
    return [tuple(out)]


@_reference
def _broadcast_to_kernel(ctx, x, shape):
    if shape.ndim != 1:
        raise ValueError(f"shape must be a vector, got shape {list(shape.shape)}")
    dims = [int(d) for d in shape]
    for d in dims:
        if d < 0:
            raise ValueError(f"Dimension {d} must be >= 0")
    why = broadcast_error(x.shape, dims)
    if why:
        raise ValueError(why)
    _check_fits(dims, x.dtype.itemsize)
    return np.ascontiguousarray(np.broadcast_to(x, dims))


register_op("BroadcastTo", inputs=["input: T", "shape: Tidx"], outputs=["output: T"],
            attrs=["T: {all}", "Tidx: {i32, i64} = i32"],
            shape=_broadcast_to_shape, kernel=_broadcast_to_kernel, group="movement",
            doc="input broadcast to shape (numpy's rules: dims of 1 stretch, leading dims "
                "are added).")


def _lin_space_shape(ctx):
    for i in range(3):
        _check_scalar_input(ctx, i)
    v = ctx.input_value(2)
    if v is None:
        return [(None,)]
    num = int(np.reshape(v, -1)[0])
    if num <= 0:
        raise ctx.error(f"Requires num > 0: {num}")
    return [(num,)]


def lin_space(start, stop, num: int, dtype: np.dtype) -> np.ndarray:
    """TensorFlow's LinSpace: start + i * step in the output's dtype, the last one stop."""
    start, stop = dtype.type(start), dtype.type(stop)
    if num == 1:
        return np.array([start], dtype)
    step = dtype.type((stop - start) / dtype.type(num - 1))
    out = (start + np.arange(num).astype(dtype) * step).astype(dtype)
    out[-1] = stop
    return out


@_reference
def _lin_space_kernel(ctx, start, stop, num):
    for name, v in (("start", start), ("stop", stop), ("num", num)):
        if v.size != 1:
            raise ValueError(f"{name} must be a scalar, got shape {list(v.shape)}")
    n = int(num.reshape(-1)[0])
    if n <= 0:
        raise ValueError(f"Requires num > 0: {n}")
    return lin_space(start.reshape(-1)[0], stop.reshape(-1)[0], n, start.dtype)


register_op("LinSpace", inputs=["start: T", "stop: T", "num: Tidx"], outputs=["output: T"],
            attrs=["T: {bf16, f16, f32, f64}", "Tidx: {i32, i64} = i32"],
            shape=_lin_space_shape, kernel=_lin_space_kernel, group="other",
            doc="num evenly spaced values from start to stop (both included).")
