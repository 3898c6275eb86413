"""Helpers shared by the gradient functions: building ops, static values, broadcasting."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from compiler.ir.construct import constant_value
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape
from dsl.gradients import GradientShapeError

Shape = Optional[Tuple[Optional[int], ...]]


def static_value(t: Tensor) -> Optional[np.ndarray]:
    """The compile-time value of ``t`` or None."""
    return constant_value(t.output)


def need_value(op: Operation, i: int, what: str) -> np.ndarray:
    """The constant value of input ``i`` of ``op``; GradientShapeError when it is not constant."""
    v = static_value(op.inputs[i])
    if v is None:
        raise GradientShapeError(f"the gradient of {op.type} '{op.name}' needs its {what} "
                                 f"(input {i}) to be a constant")
    return v


def need_rank(op: Operation, t: Tensor) -> int:
    """The static rank of ``t``; GradientShapeError when unknown."""
    if static_shape(t) is None:
        raise GradientShapeError(f"the gradient of {op.type} '{op.name}' needs the rank of "
                                 f"{t.name} to be known")
    return len(static_shape(t))


def shape_of(t: Tensor, out_type=None) -> Tensor:
    """``Shape(t)`` (folded to a constant when static)."""
    attrs = {} if out_type is None else {"out_type": out_type}
    return apply_op("Shape", [t], attrs)


def reshape_like(g: Tensor, x: Tensor) -> Tensor:
    """``g`` reshaped to the shape of ``x``."""
    return apply_op("Reshape", [g, shape_of(x)])


def reduce_sum(g: Tensor, axes: Sequence[int], keep_dims: bool = False) -> Tensor:
    """``Sum(g, axes)`` with constant axes."""
    return apply_op("Sum", [g, np.array(list(axes), dtype=np.int32)], {"keep_dims": keep_dims})


def _broadcast_axes(x_shape: tuple, out_shape: tuple,
                    peers: Sequence[Shape]) -> Optional[List[int]]:
    """Axes of the output that ``x`` was broadcast along; None when that is not known."""
    lead = len(out_shape) - len(x_shape)
    axes = list(range(lead))
    for k, d in enumerate(x_shape):
        od = out_shape[lead + k]
        if d == 1:
            if od != 1:
                axes.append(lead + k)
        elif d is None:
            for p in peers:
                if p is None:
                    return None
                j = len(p) - len(x_shape) + k
                if 0 <= j < len(p) and p[j] != 1:
                    return None
    return axes


def unbroadcast(op: Operation, g: Tensor, x: Tensor, peers: Sequence[Shape],
                out_shape: Shape = None) -> Tensor:
    """``g`` (of the op's broadcast output shape) summed down to the shape of ``x``."""
    x_shape = static_shape(x)
    out_shape = out_shape if out_shape is not None else static_shape(op.outputs[0])
    if x_shape is None or out_shape is None:       # a rank known only when the step runs
        return _unbroadcast_at_run_time(g, x)
    axes = None
    if all(p is not None for p in peers):
        axes = _broadcast_axes(x_shape, out_shape, peers)
    if axes is None:
        return _unbroadcast_dynamic(g, x, len(out_shape) - len(x_shape))
    if not axes:
        return g
    return reshape_like(reduce_sum(g, axes, keep_dims=True), x)


def _unbroadcast_at_run_time(g: Tensor, x: Tensor) -> Tensor:
    """``g`` summed over the axes ``x`` was broadcast along, found when the step runs
    (BroadcastGradientArgs of the two shapes, as TensorFlow's gradients do), reshaped to
    ``x``'s shape."""
    xs = shape_of(x)
    axes, _ = apply_op("BroadcastGradientArgs", [xs, shape_of(g)])
    summed = apply_op("Sum", [g, axes], {"keep_dims": False})
    return apply_op("Reshape", [summed, xs])


def _unbroadcast_dynamic(g: Tensor, x: Tensor, lead: int) -> Tensor:
    """Exact for unknown dims, with constant axes: each dim n of g is split into (x_k, n / x_k)
    (x_k is n or 1) and the second factor summed."""
    if lead:
        g = reduce_sum(g, range(lead))
    rank = len(static_shape(x))
    if not rank:
        return g
    xs = shape_of(x)
    factor = apply_op("FloorDiv", [shape_of(g), apply_op("Maximum", [xs, 1])])
    split = apply_op("Reshape", [apply_op("Pack", [[xs, factor]], {"axis": 1}),
                                 np.array([-1], dtype=np.int32)])
    return reduce_sum(apply_op("Reshape", [g, split]), range(1, 2 * rank, 2))


def shape_tuple(t: Tensor) -> Shape:
    """The static shape of ``t`` as a tuple (None for unknown rank)."""
    return None if static_shape(t) is None else tuple(static_shape(t))
