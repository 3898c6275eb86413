"""Gradients of reductions (Sum, Mean, Max, Min, Prod); ArgMax/ArgMin/All/Any have none."""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

import numpy as np

from dsl.grad._util import need_rank, need_value, shape_of, static_value
from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.ops import apply_op, constant
from dsl.tensor import Operation, Tensor, static_shape
from runtime.dtypes import DType

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs) -> Tensor:
    return apply_op(name, list(inputs), attrs)


def _kept_shape(op: Operation) -> Tuple[Tensor, Union[np.ndarray, Tensor]]:
    """The shape of the output with keep_dims=True, and the reduced axes (constants when the
    input's rank and the axes are known when the graph is built, else tensors computed when
    the step runs, as TensorFlow's reduced_shape does)."""
    x = op.inputs[0]
    if static_shape(x) is None or static_value(op.inputs[1]) is None:
        return _kept_shape_at_run_time(x, op.inputs[1])
    rank = need_rank(op, x)
    axes = np.unique(np.reshape(need_value(op, 1, "reduction axes"), -1) % max(rank, 1))
    axes = axes.astype(np.int32) if rank else np.zeros(0, np.int32)
    if static_shape(x) is not None and all(d is not None for d in static_shape(x)):
        kept = np.array(static_shape(x), dtype=np.int32)
        kept[axes] = 1
        return constant(kept), axes
    mask = np.ones(rank, dtype=np.int32)
    mask[axes] = 0
    return _op("AddV2", _op("Mul", shape_of(x), mask), 1 - mask), axes


def _kept_shape_at_run_time(x: Tensor, axes: Tensor) -> Tuple[Tensor, Tensor]:
    """``_kept_shape`` of an input of unknown rank or of fed axes: each dim of Shape(x) whose
    position is one of the axes (taken modulo the rank) becomes 1."""
    shape = shape_of(x)
    rank = _op("Size", shape)
    wrapped = _op("FloorMod", _op("Reshape", _op("Cast", axes, DstT=DType.i32),
                                  constant(np.array([-1], np.int32))), rank)
    positions = _op("Range", constant(np.int32(0)), rank, constant(np.int32(1)))
    hit = _op("Any", _op("Equal", _op("ExpandDims", positions, constant(np.int32(1))),
                         _op("ExpandDims", wrapped, constant(np.int32(0)))),
              constant(np.array([1], np.int32)))
    return _op("SelectV2", hit, _op("OnesLike", shape), shape), wrapped


def _broadcast_back(op: Operation, t: Tensor, kept: Tensor, axes: np.ndarray) -> Tensor:
    """``t`` (of the reduced shape) reshaped with kept dims and broadcast to the input shape.
    With the input's shape static it is one Tile, which writes the result once; otherwise a
    product with OnesLike(input), whose shape keeps the input's known dims (the ones are a
    buffer of the input's size: the embedding step's Mean spent 28 us writing them)."""
    x = op.inputs[0]
    shaped = _op("Reshape", t, kept)
    if static_shape(x) is not None and len(static_shape(x)) > 0 and all(d is not None for d in static_shape(x)):
        multiples = np.ones(len(static_shape(x)), np.int32)
        multiples[axes] = np.asarray(static_shape(x), np.int64)[axes]
        return _op("Tile", shaped, constant(multiples))
    return _op("Mul", shaped, _op("OnesLike", x))


@RegisterGradient("Sum")
def _sum_grad(op: Operation, g: Tensor) -> Grads:
    kept, axes = _kept_shape(op)
    return [_broadcast_back(op, g, kept, axes), None]


@RegisterGradient("Mean")
def _mean_grad(op: Operation, g: Tensor) -> Grads:
    """The output's gradient over the count of each mean, divided before it is broadcast."""
    kept, axes = _kept_shape(op)
    x, y = op.inputs[0], op.outputs[0]
    count = _op("RealDiv", _op("Cast", _op("Size", x), DstT=x.dtype),
                _op("Cast", _op("Size", y), DstT=x.dtype))
    return [_broadcast_back(op, _op("RealDiv", g, count), kept, axes), None]


def _extremum_grad(op: Operation, g: Tensor) -> Grads:
    """The gradient is split evenly between the elements equal to the extremum."""
    kept, axes = _kept_shape(op)
    x, y = op.inputs[0], op.outputs[0]
    hits = _op("Cast", _op("Equal", x, _op("Reshape", y, kept)), DstT=x.dtype)
    count = _op("Sum", hits, axes, keep_dims=True)
    return [_op("RealDiv", _op("Mul", _op("Reshape", g, kept), hits), count), None]


RegisterGradient("Max")(_extremum_grad)
RegisterGradient("Min")(_extremum_grad)


@RegisterGradient("Prod")
def _prod_grad(op: Operation, g: Tensor) -> Grads:
    """d prod / d x_i = product of the others, exact when some x_j are zero."""
    kept, axes = _kept_shape(op)
    x = op.inputs[0]
    is_zero = _op("Equal", x, 0)
    zeros = _op("Sum", _op("Cast", is_zero, DstT=x.dtype), axes, keep_dims=True)
    safe_x = _op("SelectV2", is_zero, _op("OnesLike", x), x)
    nonzero_prod = _op("Prod", safe_x, axes, keep_dims=True)
    zero = _op("ZerosLike", nonzero_prod)
    at_nonzero = _op("SelectV2", _op("Equal", zeros, 0), _op("RealDiv", nonzero_prod, safe_x),
                     _op("ZerosLike", x))
    at_zero = _op("SelectV2", _op("Equal", zeros, 1), nonzero_prod, zero)
    others = _op("SelectV2", is_zero, at_zero, at_nonzero)
    return [_op("Mul", _op("Reshape", g, kept), others), None]


for _name in ("ArgMax", "ArgMin", "All", "Any"):
    NotDifferentiable(_name)
