"""TensorFlow-named ``tensordot`` and ``norm``, composed as TensorFlow 1.x composes them:
``tensordot`` transposes and reshapes each operand to a matrix, multiplies them (MatMul) and
reshapes the product; ``norm`` is a reduction of abs, squares or powers."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from dsl.array_ops import _as_index, concat, gather, reshape, shape, squeeze, transpose
from dsl.context import name_scope
from dsl.linalg_ops import matmul
from dsl.math_ops import abs as _abs
from dsl.math_ops import pow as _pow
from dsl.math_ops import sqrt
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import reduce_max, reduce_prod, reduce_sum
from dsl.tensor import Tensor, static_shape

__all__ = ["tensordot", "norm"]


def _tensordot_axes(a: Tensor, axes) -> Tuple[List[int], List[int]]:
    rank = None if static_shape(a) is None else len(static_shape(a))
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        axes = int(axes)
        if axes < 0:
            raise ValueError("'axes' must be at least 0.")
        if rank is None:
            raise ValueError("tensordot with an integer 'axes' needs the rank of 'a' known")
        if axes > rank:
            raise ValueError(f"'axes' must not be larger than the number of dimensions of "
                             f"tensor {a}.")
        return list(range(rank - axes, rank)), list(range(axes))
    if isinstance(axes, (list, tuple)) or (isinstance(axes, np.ndarray) and axes.ndim):
        if len(axes) != 2:
            raise ValueError("'axes' must be an integer or have length 2.")
        a_axes, b_axes = axes[0], axes[1]
        if np.ndim(a_axes) == 0 and np.ndim(b_axes) == 0:
            a_axes, b_axes = [a_axes], [b_axes]
        a_axes, b_axes = [int(i) for i in a_axes], [int(i) for i in b_axes]
        if len(a_axes) != len(b_axes):
            raise ValueError(f"Different number of contraction axes 'a' and 'b', "
                             f"{len(a_axes)} != {len(b_axes)}.")
        return a_axes, b_axes
    raise TypeError(f"'axes' must be an int or a pair of axis lists, got {axes!r}")


def _tensordot_reshape(a: Tensor, axes: Sequence[int], flipped: bool = False):
    """``a`` as a matrix [free, contracted] ([contracted, free] when ``flipped``) and its
    free dims (a list of ints when static, else an int32 tensor)."""
    s = static_shape(a)
    if s is None:
        raise ValueError(f"tensordot needs the rank of {a} known")
    rank = len(s)
    axes = [i if i >= 0 else i + rank for i in axes]
    if any(not 0 <= i < rank for i in axes):
        raise ValueError(f"tensordot: an axis in {list(axes)} is out of range for rank {rank}")
    free = [i for i in range(rank) if i not in axes]
    perm = list(axes) + free if flipped else free + list(axes)
    a_trans = a if perm == list(range(rank)) else transpose(a, perm)
    if all(d is not None for d in s):
        free_dims = [s[i] for i in free]
        prod_free = int(np.prod(free_dims))
        prod_axes = int(np.prod([s[i] for i in axes]))
        new_shape = [prod_axes, prod_free] if flipped else [prod_free, prod_axes]
        if list(static_shape(a_trans)) != new_shape:
            a_trans = reshape(a_trans, new_shape)
        return a_trans, free_dims
    dims = shape(a)
    free_dims = gather(dims, _as_index(free))
    axes_dims = gather(dims, _as_index(list(axes)))
    prod_free, prod_axes = reduce_prod(free_dims), reduce_prod(axes_dims)
    new_shape = [prod_axes, prod_free] if flipped else [prod_free, prod_axes]
    return reshape(a_trans, new_shape), free_dims


def tensordot(a, b, axes, name: Optional[str] = None) -> Tensor:
    """The sum over the ``axes`` of ``a`` and ``b`` of their product (``tf.tensordot``):
    ``axes`` an int N (the last N of a with the first N of b) or a pair of axis lists."""
    with name_scope(name or "Tensordot"):
        a, b = convert_to_tensor(a), convert_to_tensor(b)
        a_axes, b_axes = _tensordot_axes(a, axes)
        a_matrix, a_free = _tensordot_reshape(a, a_axes)
        b_matrix, b_free = _tensordot_reshape(b, b_axes, True)
        product = matmul(a_matrix, b_matrix)
        if isinstance(a_free, list) and isinstance(b_free, list):
            if static_shape(product) is not None and list(static_shape(product)) == \
                    a_free + b_free:
                return product
            return reshape(product, a_free + b_free)
        parts = [f if isinstance(f, Tensor) else _as_index(f, a_free.dtype
                 if isinstance(a_free, Tensor) else b_free.dtype) for f in (a_free, b_free)]
        return reshape(product, concat(parts, 0))


_AXIS_ERROR = "'axis' must be None, an integer, or a tuple of 2 unique integers, got {}"


def norm(tensor, ord="euclidean", axis=None, keepdims=None,  # noqa: A002
         name: Optional[str] = None, keep_dims=None) -> Tensor:
    """The vector norm (``ord`` 'euclidean', 1, 2, inf or any p > 0) over ``axis`` (all
    elements when None), or the matrix norm ('fro'/'euclidean', 1, inf) over two axes
    (``tf.norm``). The matrix 2-norm needs a singular value decomposition, which flowc does
    not have: asking for it is an error."""
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    keepdims = bool(keepdims if keepdims is not None else keep_dims)
    is_matrix = isinstance(axis, (tuple, list)) and len(axis) == 2
    if is_matrix:
        axis = tuple(axis)
        if not all(isinstance(a, (int, np.integer)) for a in axis) or axis[0] == axis[1]:
            raise ValueError(_AXIS_ERROR.format(axis))
        supported = ["euclidean", "fro", 1, 2, np.inf]
        if not any(_same_ord(ord, s) for s in supported):
            raise ValueError(f"'ord' must be a supported matrix norm in {supported}, got {ord}")
        if _same_ord(ord, 2):
            raise NotImplementedError("the matrix 2-norm needs Svd, which flowc does not have")
    else:
        if not (axis is None or isinstance(axis, (int, np.integer))):
            raise ValueError(_AXIS_ERROR.format(axis))
        supported = ["euclidean", 1, 2, np.inf]
        numeric = not isinstance(ord, str) and np.isreal(ord) and ord > 0
        if not numeric and not any(_same_ord(ord, s) for s in supported):
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if axis is not None:
            axis = (int(axis),)
    with name_scope(name or "norm"):
        x = convert_to_tensor(tensor)
        axes = None if axis is None else list(axis)
        if any(_same_ord(ord, s) for s in ("fro", "euclidean", 2)):
            result = sqrt(reduce_sum(x * x, axes, keepdims=True))
        else:
            result = _abs(x)
            if _same_ord(ord, 1):
                result = reduce_sum(result, None if axis is None else axis[0], keepdims=True)
                if is_matrix:
                    result = reduce_max(result, axis[-1], keepdims=True)
            elif _same_ord(ord, np.inf):
                if is_matrix:
                    result = reduce_sum(result, axis[1], keepdims=True)
                result = reduce_max(result, None if axis is None else axis[0], keepdims=True)
            else:
                p = convert_to_tensor(np.asarray(ord), dtype=x.dtype)
                result = _pow(reduce_sum(_pow(result, p), axes, keepdims=True),
                              convert_to_tensor(np.asarray(1.0 / ord), dtype=x.dtype))
        if not keepdims:
            result = squeeze(result, axes)
        return result


def _same_ord(ord, value) -> bool:  # noqa: A002
    """``ord == value`` without comparing a string with a number."""
    if isinstance(ord, str) or isinstance(value, str):
        return ord == value
    return float(ord) == float(value)
