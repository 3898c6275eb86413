"""TensorFlow-named reduction functions: ``reduce_sum`` ... ``reduce_any``,
``reduce_logsumexp``, ``argmax``, ``argmin``."""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.ir.op_registry import has_op
from dsl.ops import apply_op, constant, convert_to_tensor
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_all",
           "reduce_any", "reduce_logsumexp", "argmax", "argmin"]


def _reduction_axes(x: Tensor, axis) -> Tensor:
    """``axis`` as a tensor; ``None`` means every axis of ``x``."""
    if axis is None:
        if static_shape(x) is not None:
            return convert_to_tensor(np.arange(len(static_shape(x)), dtype=np.int32))
        if has_op("Range"):
            rank = apply_op("Rank", [x])
            return apply_op("Range", [0, rank, 1], name="reduction_axes")
        raise ValueError(f"cannot reduce over all axes of {x.name}: its rank is unknown")
    if isinstance(axis, Tensor):
        return axis
    if type(axis) is int:                 # the usual ``axis=1``
        return constant(axis, dtype=DType.i32)
    arr = np.asarray(axis)
    if arr.size == 0:
        arr = arr.astype(np.int32)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"reduction axis must be integers, got {axis!r}")
    wide = isinstance(axis, np.ndarray) and arr.dtype == np.int64
    return convert_to_tensor(arr.astype(np.int64 if wide else np.int32))


def _keep(keepdims, keep_dims) -> bool:
    if keepdims is not None and keep_dims is not None:
        raise ValueError("cannot specify both 'keepdims' and 'keep_dims'")
    value = keepdims if keepdims is not None else keep_dims
    return bool(value) if value is not None else False


def _axis(axis, reduction_indices):
    if axis is not None and reduction_indices is not None:
        raise ValueError("cannot specify both 'axis' and 'reduction_indices'")
    return axis if axis is not None else reduction_indices


def _reduce(op: str, input_tensor, axis, keepdims, name, reduction_indices, keep_dims,
            dtype: Optional[DType] = None) -> Tensor:
    x = convert_to_tensor(input_tensor, dtype=dtype)
    axes = _reduction_axes(x, _axis(axis, reduction_indices))
    return apply_op(op, [x, axes], {"keep_dims": _keep(keepdims, keep_dims)}, name=name or op)


def reduce_sum(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """Sum over ``axis`` (all axes when None), as ``tf.reduce_sum``."""
    return _reduce("Sum", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_mean(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
                reduction_indices=None, keep_dims=None) -> Tensor:
    """Mean over ``axis`` (all axes when None), as ``tf.reduce_mean``."""
    return _reduce("Mean", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_max(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """Maximum over ``axis`` (all axes when None), as ``tf.reduce_max``."""
    return _reduce("Max", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_min(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """Minimum over ``axis`` (all axes when None), as ``tf.reduce_min``."""
    return _reduce("Min", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_prod(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
                reduction_indices=None, keep_dims=None) -> Tensor:
    """Product over ``axis`` (all axes when None), as ``tf.reduce_prod``."""
    return _reduce("Prod", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_all(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """Logical and over ``axis`` of a bool tensor, as ``tf.reduce_all``."""
    return _reduce("All", input_tensor, axis, keepdims, name, reduction_indices, keep_dims,
                   dtype=DType.bool)


def reduce_any(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
               reduction_indices=None, keep_dims=None) -> Tensor:
    """Logical or over ``axis`` of a bool tensor, as ``tf.reduce_any``."""
    return _reduce("Any", input_tensor, axis, keepdims, name, reduction_indices, keep_dims,
                   dtype=DType.bool)


def reduce_logsumexp(input_tensor, axis=None, keepdims=None, name: Optional[str] = None,
                     reduction_indices=None, keep_dims=None) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis`` (all axes when None), as ``tf.reduce_logsumexp``:
    shifted by the maximum (its gradient stopped, and 0 where it is not finite) so that it
    neither overflows nor underflows."""
    x = convert_to_tensor(input_tensor)
    axes = _reduction_axes(x, _axis(axis, reduction_indices))
    keep = _keep(keepdims, keep_dims)

    def finite_peak(kept: bool) -> Tensor:
        peak = apply_op("Max", [x, axes], {"keep_dims": kept})
        finite = apply_op("IsFinite", [peak])
        return apply_op("StopGradient", [apply_op("SelectV2", [
            finite, peak, apply_op("ZerosLike", [peak])])])
    shifted = apply_op("Exp", [apply_op("Sub", [x, finite_peak(True)])])
    total = apply_op("Sum", [shifted, axes], {"keep_dims": keep})
    return apply_op("AddV2", [apply_op("Log", [total]), finite_peak(keep)],
                    name=name or "ReduceLogSumExp")


def _arg(op: str, input, axis, name, dimension, output_type) -> Tensor:
    if axis is not None and dimension is not None:
        raise ValueError("cannot specify both 'axis' and 'dimension'")
    axis = axis if axis is not None else (dimension if dimension is not None else 0)
    x = convert_to_tensor(input)
    if not isinstance(axis, Tensor):
        axis = convert_to_tensor(np.asarray(axis, dtype=np.int32))
    return apply_op(op, [x, axis], {"output_type": as_dtype(output_type)}, name=name or op)


def argmax(input, axis=None, name: Optional[str] = None, dimension=None,
           output_type=DType.i64) -> Tensor:
    """Index of the largest value along ``axis`` (0 when None), as ``tf.argmax``."""
    return _arg("ArgMax", input, axis, name, dimension, output_type)


def argmin(input, axis=None, name: Optional[str] = None, dimension=None,
           output_type=DType.i64) -> Tensor:
    """Index of the smallest value along ``axis`` (0 when None), as ``tf.argmin``."""
    return _arg("ArgMin", input, axis, name, dimension, output_type)
