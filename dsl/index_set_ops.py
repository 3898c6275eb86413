"""TF1's ``fl.invert_permutation``, ``fl.setdiff1d`` and ``fl.bincount``, over the raw ops
InvertPermutation, ListDiff and Bincount (``compiler/ops/index_sets.py``)."""
from __future__ import annotations

from collections import namedtuple
from typing import Optional

from dsl.array_ops import size
from dsl.math_ops import cast, greater, maximum, minimum, multiply
from dsl.ops import apply_op, constant, convert_to_tensor
from dsl.reduction_ops import reduce_max
from dsl.tensor import Tensor
from runtime.dtypes import DType, as_dtype

__all__ = ["invert_permutation", "setdiff1d", "bincount"]

# what setdiff1d returns, as TF's generated op wrapper names it
ListDiff = namedtuple("ListDiff", ["out", "idx"])


def invert_permutation(x, name: Optional[str] = None) -> Tensor:
    """The inverse of the permutation ``x``: ``y[x[i]] = i`` (tf.invert_permutation)."""
    return apply_op("InvertPermutation", [x], name=name or "InvertPermutation")


def setdiff1d(x, y, index_dtype=DType.i32, name: Optional[str] = None) -> ListDiff:
    """``(out, idx)`` (also ``.out``, ``.idx``): the values of ``x`` not in ``y``, in order, and their positions in ``x``
    (tf.setdiff1d)."""
    x = convert_to_tensor(x)
    y = convert_to_tensor(y, dtype=x.dtype)
    out, idx = apply_op("ListDiff", [x, y], {"out_idx": as_dtype(index_dtype)},
                        name=name or "ListDiff")
    return ListDiff(out, idx)


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=DType.i32,
             name: Optional[str] = None) -> Tensor:
    """How often each value of ``arr`` occurs (or its summed ``weights``), for values up to
    ``max(arr)``, at least ``minlength`` and at most ``maxlength`` bins (tf.bincount, TF1)."""
    from dsl.context import name_scope
    with name_scope(name or "bincount"):
        arr = cast(convert_to_tensor(arr), DType.i32)
        nonempty = cast(greater(size(arr), 0), DType.i32)
        length = multiply(nonempty, reduce_max(arr) + 1)
        if minlength is not None:
            length = maximum(convert_to_tensor(minlength, dtype=DType.i32), length)
        if maxlength is not None:
            length = minimum(convert_to_tensor(maxlength, dtype=DType.i32), length)
        if weights is not None:
            weights = convert_to_tensor(weights, dtype=as_dtype(dtype))
        else:
            weights = constant([], dtype=as_dtype(dtype))
        return apply_op("Bincount", [arr, length, weights])
