"""ReverseV2: a tensor with the order of its elements along some axes reversed (TensorFlow's
``tf.reverse``; Keras runs ``go_backwards`` and ``Bidirectional`` RNNs through it)."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ops.array.common import _normalize_axis, _reference, _vector_length, _vector_value


def reverse_axes(axes: Sequence[int], rank: int) -> List[int]:
    """The axes made non-negative, with TensorFlow's checks (in range, none twice)."""
    out: List[int] = []
    for a in axes:
        d = _normalize_axis(int(a), rank)
        if d in out:
            raise ValueError(f"axis {d} specified more than once.")
        out.append(d)
    return out


def _reverse_shape(ctx):
    s = ctx.input_shape(0)
    axes = _vector_value(ctx, 1)
    _vector_length(ctx, 1)
    if s is not None and axes is not None:
        try:
            reverse_axes(axes, len(s))
        except ValueError as e:
            raise ctx.error(str(e)) from None
    return [ctx.input_type(0)]


@_reference
def _reverse_kernel(ctx, tensor, axis):
    axes = reverse_axes(np.reshape(axis, -1), tensor.ndim)
    return np.ascontiguousarray(np.flip(tensor, axis=tuple(axes)) if axes else tensor.copy())


register_op("ReverseV2", inputs=["tensor: T", "axis: Tidx"], outputs=["output: T"],
            attrs=["Tidx: {i32, i64} = i32", "T: {all}"],
            shape=_reverse_shape, kernel=_reverse_kernel, group="movement",
            doc="tensor with the order of its elements along each of axis reversed.")
