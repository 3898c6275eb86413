"""TF1 math functions that TensorFlow itself builds from other ops: ``log_sigmoid``,
``reduce_variance``, ``reduce_std``, ``reduce_euclidean_norm``, ``scalar_mul``,
``accumulate_n``, ``xlogy``, ``xdivy``, ``sort``, ``argsort`` and ``confusion_matrix``, with
TF's signatures; their gradients are those of the ops they are made of."""
from __future__ import annotations

from typing import Optional

import numpy as np

from dsl.array_ops import reshape, shape, transpose, zeros_like
from dsl.indexing_ops import top_k
from dsl.math_ops import cast, equal, unsorted_segment_sum, where_v2
from dsl.ops import apply_op, convert_to_tensor
from dsl.reduction_ops import reduce_max, reduce_mean, reduce_sum
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["log_sigmoid", "reduce_variance", "reduce_std", "reduce_euclidean_norm",
           "scalar_mul", "accumulate_n", "xlogy", "xdivy", "sort", "argsort",
           "confusion_matrix"]


def _float(x, what: str) -> Tensor:
    x = convert_to_tensor(x)
    if not x.dtype.is_floating:
        raise TypeError(f"{what} takes a floating-point tensor, got {x.dtype.ir_name}")
    return x


def log_sigmoid(x, name: Optional[str] = None) -> Tensor:
    """``log(1 / (1 + exp(-x)))`` as ``-softplus(-x)`` (no overflow), as ``tf.log_sigmoid``."""
    x = _float(x, "log_sigmoid")
    return apply_op("Neg", [apply_op("Softplus", [apply_op("Neg", [x])])],
                    name=name or "LogSigmoid")


def reduce_variance(input_tensor, axis=None, keepdims: bool = False,
                    name: Optional[str] = None) -> Tensor:
    """The (biased) variance over ``axis``, as ``tf.math.reduce_variance``."""
    x = _float(input_tensor, "reduce_variance")
    centred = x - reduce_mean(x, axis, keepdims=True)
    return reduce_mean(centred * centred, axis, keepdims=keepdims, name=name)


def reduce_std(input_tensor, axis=None, keepdims: bool = False,
               name: Optional[str] = None) -> Tensor:
    """The standard deviation over ``axis`` (the square root of ``reduce_variance``)."""
    variance = reduce_variance(input_tensor, axis, keepdims)
    return apply_op("Sqrt", [variance], name=name or "reduce_std")


def reduce_euclidean_norm(input_tensor, axis=None, keepdims: bool = False,
                          name: Optional[str] = None) -> Tensor:
    """``sqrt(sum(x**2))`` over ``axis``, as ``tf.math.reduce_euclidean_norm``."""
    x = _float(input_tensor, "reduce_euclidean_norm")
    return apply_op("Sqrt", [reduce_sum(x * x, axis, keepdims=keepdims)],
                    name=name or "reduce_euclidean_norm")


def scalar_mul(scalar, x, name: Optional[str] = None) -> Tensor:
    """``scalar * x`` for a scalar, as ``tf.scalar_mul`` (a non-scalar is a ValueError)."""
    x = convert_to_tensor(x)
    s = convert_to_tensor(scalar, dtype=x.dtype)
    if static_shape(s) not in (None, ()):
        raise ValueError(f"Only scalar multiply works, got shape {static_shape(s)}")
    return apply_op("Mul", [s, x], name=name or "scalar_mul")


def accumulate_n(inputs, shape=None, tensor_dtype=None, name: Optional[str] = None) -> Tensor:
    """The sum of ``inputs``, as ``tf.accumulate_n`` (one AddN)."""
    inputs = [convert_to_tensor(t, dtype=tensor_dtype) for t in inputs]
    if not inputs:
        raise ValueError("inputs must be a non-empty list of tensors")
    if len(inputs) == 1:
        return apply_op("Identity", inputs, name=name or "accumulate_n")
    return apply_op("AddN", [inputs], name=name or "accumulate_n")


def xlogy(x, y, name: Optional[str] = None) -> Tensor:
    """``x * log(y)``, 0 where ``x`` is 0 (also for y = 0), as ``tf.math.xlogy``; its
    gradients are finite there too."""
    x = _float(x, "xlogy")
    y = convert_to_tensor(y, dtype=x.dtype)
    zero = equal(x, 0.0)
    safe_y = where_v2(zero, apply_op("OnesLike", [y]), y)
    product = x * apply_op("Log", [safe_y])
    return where_v2(zero, zeros_like(product), product, name=name or "xlogy")


def xdivy(x, y, name: Optional[str] = None) -> Tensor:
    """``x / y``, 0 where ``x`` is 0 (also for y = 0), as ``tf.math.xdivy``."""
    x = _float(x, "xdivy")
    y = convert_to_tensor(y, dtype=x.dtype)
    zero = equal(x, 0.0)
    safe_y = where_v2(zero, apply_op("OnesLike", [y]), y)
    quotient = x / safe_y
    return where_v2(zero, zeros_like(quotient), quotient, name=name or "xdivy")


def _sorted_along(values, axis: int, direction: str, what: str):
    """(top_k's values, indices) of ``values`` along ``axis``, in ``direction``."""
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"{what}: direction must be 'ASCENDING' or 'DESCENDING', got "
                         f"{direction!r}")
    values = convert_to_tensor(values)
    dims = static_shape(values)
    if dims is None:
        raise ValueError(f"{what} needs a tensor of known rank")
    rank = len(dims)
    if rank == 0:
        raise ValueError(f"{what} needs a tensor of rank 1 or more")
    if not -rank <= axis < rank:
        raise ValueError(f"{what}: axis {axis} is out of range for a tensor of rank {rank}")
    axis %= rank
    perm = None
    if axis != rank - 1:                       # top_k works on the last axis
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        values = transpose(values, perm)
    n = shape(values)[-1] if static_shape(values)[-1] is None else \
        convert_to_tensor(np.int32(static_shape(values)[-1]))
    ascending = direction == "ASCENDING"
    dtype = values.dtype
    if ascending:
        # the largest of the negated values (bitwise not for integers: no overflow)
        flipped = apply_op("Neg", [values]) if dtype.is_floating else \
            apply_op("Invert", [values]) if dtype.is_integer else None
        if flipped is None:
            raise TypeError(f"{what} takes numbers, got {dtype.ir_name}")
        top, idx = top_k(flipped, n)
        top = apply_op("Neg", [top]) if dtype.is_floating else apply_op("Invert", [top])
    else:
        top, idx = top_k(values, n)
    if perm is not None:
        top, idx = transpose(top, perm), transpose(idx, perm)
    return top, idx


def sort(values, axis: int = -1, direction: str = "ASCENDING",
         name: Optional[str] = None) -> Tensor:
    """``values`` sorted along ``axis``, as ``tf.sort``."""
    top, _ = _sorted_along(values, axis, direction, "sort")
    return apply_op("Identity", [top], name=name or "sort")


def argsort(values, axis: int = -1, direction: str = "ASCENDING", stable: bool = False,
            name: Optional[str] = None) -> Tensor:
    """The int32 indices that sort ``values`` along ``axis``, as ``tf.argsort`` (equal values
    keep their order, so ``stable`` holds too)."""
    _, idx = _sorted_along(values, axis, direction, "argsort")
    return apply_op("Identity", [idx], name=name or "argsort")


def confusion_matrix(labels, predictions, num_classes=None, weights=None, dtype=DType.i32,
                     name: Optional[str] = None) -> Tensor:
    """``[num_classes, num_classes]``: entry (i, j) counts (or sums the weights of) the
    examples of label i predicted as j, as ``tf.math.confusion_matrix``. ``num_classes``
    None: one more than the largest label or prediction. A label or prediction outside
    [0, num_classes) is an error of the segment sum that counts it."""
    dtype = as_dtype(dtype)
    labels = cast(convert_to_tensor(labels), DType.i64)
    predictions = cast(convert_to_tensor(predictions), DType.i64)
    for what, t in (("labels", labels), ("predictions", predictions)):
        if static_shape(t) is not None and len(static_shape(t)) != 1:
            raise ValueError(f"confusion_matrix: {what} must be a vector, got shape "
                             f"{static_shape(t)}")
    if num_classes is None:
        num_classes = reduce_max(apply_op("Maximum", [labels, predictions])) + 1
    n = cast(convert_to_tensor(num_classes), DType.i64)
    cells = labels * n + predictions
    counts = apply_op("OnesLike", [cells]) if weights is None else \
        convert_to_tensor(weights)
    counts = cast(counts, dtype)
    flat = unsorted_segment_sum(counts, cells, n * n)
    return reshape(flat, apply_op("Pack", [[n, n]]), name=name or "confusion_matrix")
