"""TensorFlow-named band and diagonal functions: ``matrix_band_part``, ``matrix_diag``,
``matrix_diag_part``, ``matrix_set_diag`` (``tf.linalg.band_part``, ``diag``, ``diag_part``,
``set_diag``), ``diag``, ``diag_part``, ``eye``, ``trace`` and ``matrix_transpose``, built
over ops as TensorFlow builds them (the V3 diagonal ops, ``eye`` from ones and MatrixDiag or
MatrixSetDiag)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from dsl.array_ops import _as_index, concat, ones, rank, transpose, zeros
from dsl.context import name_scope
from dsl.math_ops import minimum
from dsl.ops import apply_op, convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["matrix_band_part", "matrix_diag", "matrix_diag_part", "matrix_set_diag", "diag",
           "diag_part", "eye", "trace", "matrix_transpose"]


def _index(value, dtype: DType) -> Tensor:
    return value if isinstance(value, Tensor) else convert_to_tensor(
        np.asarray(value, dtype=dtype.np))


def _padding(value, like: Tensor) -> Tensor:
    if like.dtype is DType.bool and not isinstance(value, Tensor):
        value = bool(value)
    return convert_to_tensor(value, dtype=like.dtype)


def matrix_band_part(input, num_lower, num_upper,  # noqa: A002
                     name: Optional[str] = None) -> Tensor:
    """``input`` with everything outside the central band of each matrix set to zero:
    ``num_lower`` subdiagonals and ``num_upper`` superdiagonals are kept (negative: all)."""
    x = convert_to_tensor(input)
    dtype = next((v.dtype for v in (num_lower, num_upper) if isinstance(v, Tensor)), DType.i64)
    return apply_op("MatrixBandPart", [x, _index(num_lower, dtype), _index(num_upper, dtype)],
                    name=name or "MatrixBandPart")


def matrix_diag(diagonal, name: str = "diag", k=0, num_rows=-1, num_cols=-1,
                padding_value=0, align: str = "RIGHT_LEFT") -> Tensor:
    """Matrices with the diagonals ``k`` (an int, or a band ``(lo, hi)``) taken from
    ``diagonal`` and ``padding_value`` elsewhere (``tf.linalg.diag``)."""
    d = convert_to_tensor(diagonal)
    return apply_op("MatrixDiagV3", [d, _index(k, DType.i32), _index(num_rows, DType.i32),
                                     _index(num_cols, DType.i32), _padding(padding_value, d)],
                    {"align": align}, name=name)


def matrix_diag_part(input, name: str = "diag_part", k=0, padding_value=0,  # noqa: A002
                     align: str = "RIGHT_LEFT") -> Tensor:
    """The diagonals ``k`` of each matrix in the last two dims (``tf.linalg.diag_part``)."""
    x = convert_to_tensor(input)
    return apply_op("MatrixDiagPartV3", [x, _index(k, DType.i32), _padding(padding_value, x)],
                    {"align": align}, name=name)


def matrix_set_diag(input, diagonal, name: str = "set_diag", k=0,  # noqa: A002
                    align: str = "RIGHT_LEFT") -> Tensor:
    """``input`` with the diagonals ``k`` of each matrix replaced by ``diagonal``
    (``tf.linalg.set_diag``)."""
    x = convert_to_tensor(input)
    return apply_op("MatrixSetDiagV3", [x, convert_to_tensor(diagonal, dtype=x.dtype),
                                        _index(k, DType.i32)], {"align": align}, name=name)


def diag(diagonal, name: Optional[str] = None) -> Tensor:
    """A tensor of shape ``D + D`` with ``diagonal`` (shape ``D``) on its diagonal."""
    return apply_op("Diag", [convert_to_tensor(diagonal)], name=name or "Diag")


def diag_part(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """The diagonal of a tensor of shape ``D + D`` (``diag``'s inverse)."""
    return apply_op("DiagPart", [convert_to_tensor(input)], name=name or "DiagPart")


def eye(num_rows, num_columns=None, batch_shape=None, dtype=DType.f32,
        name: Optional[str] = None) -> Tensor:
    """Identity matrices ``[*batch_shape, num_rows, num_columns]`` (``tf.eye``): ones made
    into a diagonal (MatrixDiag, square) or set into zeros (MatrixSetDiag)."""
    dtype = as_dtype(dtype)
    with name_scope(name or "eye"):
        is_square = num_columns is None
        batch_shape = [] if batch_shape is None else batch_shape
        num_columns = num_rows if num_columns is None else num_columns
        if isinstance(num_rows, Tensor) or isinstance(num_columns, Tensor):
            diag_size = minimum(num_rows, num_columns)
        else:
            if not isinstance(num_rows, (int, np.integer)) or \
                    not isinstance(num_columns, (int, np.integer)) or isinstance(num_rows, bool):
                raise TypeError("num_rows and num_columns must be positive integer values.")
            num_rows, num_columns = int(num_rows), int(num_columns)
            is_square = num_rows == num_columns
            diag_size = min(num_rows, num_columns)
        if isinstance(batch_shape, Tensor):
            diag_shape = concat([batch_shape, _as_index([diag_size], batch_shape.dtype)], 0)
            shape = None if is_square else concat(
                [batch_shape, _as_index([num_rows, num_columns], batch_shape.dtype)], 0)
        else:
            diag_shape = list(batch_shape) + [diag_size]
            shape = None if is_square else list(batch_shape) + [num_rows, num_columns]
        diag_ones = ones(diag_shape, dtype=dtype)
        if is_square:
            return matrix_diag(diag_ones)
        return matrix_set_diag(zeros(shape, dtype=dtype), diag_ones)


def trace(x, name: Optional[str] = None) -> Tensor:
    """The sum of each matrix's main diagonal (``tf.linalg.trace``)."""
    with name_scope(name or "Trace"):
        x = convert_to_tensor(x)
        return reduce_sum(matrix_diag_part(x), [-1])


def matrix_transpose(a, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    """Each matrix in the last two dims transposed (``tf.linalg.matrix_transpose``)."""
    with name_scope(name):
        a = convert_to_tensor(a)
        shape = static_shape(a)
        if shape is not None:
            if len(shape) < 2:
                raise ValueError(f"Argument 'a' should be a (batch) matrix with rank >= 2.  "
                                 f"Received: {a}")
            perm = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
        else:
            r = rank(a)
            perm = concat([apply_op("Range", [0, r - 2, 1]), [r - 1, r - 2]], 0)
        return transpose(a, perm)
