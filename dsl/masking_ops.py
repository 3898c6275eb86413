"""TF1 composites over masks and counts, built from existing ops: ``sequence_mask``,
``boolean_mask``, ``count_nonzero`` and ``nn.in_top_k``."""
from __future__ import annotations

from typing import Optional

import numpy as np

from dsl.array_ops import concat, expand_dims, gather, range as range_, reshape, shape, squeeze, stack
from dsl.clip_ops import clip_by_value
from dsl.context import name_scope
from dsl.indexing_ops import gather_nd
from dsl.math_ops import cast, greater, less, logical_and, not_equal
from dsl.math_special import is_finite
from dsl.ops import apply_op, convert_to_tensor
from dsl.reduction_ops import reduce_all, reduce_max, reduce_sum
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["sequence_mask", "boolean_mask", "count_nonzero"]


def sequence_mask(lengths, maxlen=None, dtype=DType.bool, name: Optional[str] = None) -> Tensor:
    """``mask[i..., j] = j < lengths[i...]`` (``tf.sequence_mask``); ``maxlen`` defaults to
    the largest length."""
    with name_scope(name or "SequenceMask"):
        lengths = convert_to_tensor(lengths)
        if maxlen is None:
            maxlen = reduce_max(lengths)
        maxlen = cast(convert_to_tensor(maxlen), lengths.dtype)
        steps = range_(0, maxlen, 1)
        mask = less(steps, expand_dims(lengths, -1))
        dtype = as_dtype(dtype)
        return mask if dtype is DType.bool else cast(mask, dtype)


def boolean_mask(tensor, mask, name: str = "boolean_mask", axis=None) -> Tensor:
    """The entries of ``tensor`` where ``mask`` is true (``tf.boolean_mask``): the mask's k dims
    (from ``axis``, default 0) are flattened into one of the selected entries."""
    with name_scope(name):
        tensor, mask = convert_to_tensor(tensor), convert_to_tensor(mask)
        mshape, tshape = static_shape(mask), static_shape(tensor)
        if mshape is None:
            raise ValueError("Number of mask dimensions must be specified, even if some "
                             "dimensions are None.  E.g. shape=[None] is ok, but shape=None is not.")
        k = len(mshape)
        if k == 0:
            raise ValueError("mask cannot be scalar.")
        axis = 0 if axis is None else int(axis)
        if tshape is not None:
            if axis < 0:
                axis += len(tshape)
            for a, b in zip(tshape[axis:axis + k], mshape):
                if a is not None and b is not None and a != b:
                    raise ValueError(f"Shapes {tuple(tshape[axis:axis + k])} and {tuple(mshape)} "
                                     f"are incompatible")
        dims = shape(tensor)
        flat = reshape(tensor, concat([dims[:axis], [-1], dims[axis + k:]], 0))
        where = apply_op("Where", [reshape(mask, [-1])], {"T": DType.bool})
        return gather(flat, squeeze(where, axis=[1]), axis=axis)


def count_nonzero(input_tensor=None, axis=None, keepdims=None, dtype=DType.i64,
                  name: Optional[str] = None, reduction_indices=None, keep_dims=None,
                  input=None) -> Tensor:  # noqa: A002
    """How many entries are not zero, along ``axis`` (``tf.count_nonzero``)."""
    x = convert_to_tensor(input if input_tensor is None else input_tensor)
    axis = reduction_indices if axis is None else axis
    keepdims = keep_dims if keepdims is None else keepdims
    with name_scope(name or "count_nonzero"):
        zero = np.zeros((), x.dtype.np)
        nonzero = cast(not_equal(x, zero), DType.i64)
        return cast(reduce_sum(nonzero, axis=axis, keepdims=bool(keepdims)), as_dtype(dtype))


def in_top_k(predictions, targets, k, name: Optional[str] = None) -> Tensor:
    """Whether each target class is among the ``k`` largest predictions of its row
    (``tf.nn.in_top_k``): classes tied with the k-th all count; a row with a non-finite
    prediction, or a target out of range, gives False."""
    with name_scope(name or "in_top_k"):
        predictions, targets = convert_to_tensor(predictions), convert_to_tensor(targets)
        classes = shape(predictions, out_type=targets.dtype)[1]
        in_range = logical_and(greater(targets, -1), less(targets, classes))
        safe = clip_by_value(targets, 0, classes - 1)
        rows = range_(0, shape(targets, out_type=targets.dtype)[0], 1)
        target_value = gather_nd(predictions, stack([rows, safe], axis=1))
        above = reduce_sum(cast(greater(predictions, expand_dims(target_value, 1)), DType.i32), 1)
        finite = reduce_all(is_finite(predictions), 1)
        return logical_and(logical_and(less(above, k), in_range), finite)
