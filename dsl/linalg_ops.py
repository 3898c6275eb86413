"""TensorFlow-named linalg functions: ``matmul`` (MatMul, or BatchMatMulV2 above rank 2),
``matrix_determinant`` and ``matrix_inverse``."""
from __future__ import annotations

from typing import Optional

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor, static_shape

__all__ = ["matmul", "matrix_determinant", "matrix_inverse"]


def _operands(a, b):
    """Tensors for ``a`` and ``b``; a non-tensor side takes the tensor side's dtype."""
    if isinstance(a, Tensor) and not isinstance(b, Tensor):
        return a, convert_to_tensor(b, dtype=a.dtype)
    if isinstance(b, Tensor) and not isinstance(a, Tensor):
        return convert_to_tensor(a, dtype=b.dtype), b
    return convert_to_tensor(a), convert_to_tensor(b)


def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False, adjoint_a: bool = False,
           adjoint_b: bool = False, a_is_sparse: bool = False, b_is_sparse: bool = False,
           name: Optional[str] = None) -> Tensor:
    """``a @ b`` as ``tf.matmul``: MatMul for matrices, BatchMatMulV2 when a rank exceeds 2
    (or is unknown). The ``*_is_sparse`` flags are hints only, as in TensorFlow."""
    if transpose_a and adjoint_a:
        raise ValueError("only one of transpose_a and adjoint_a can be True")
    if transpose_b and adjoint_b:
        raise ValueError("only one of transpose_b and adjoint_b can be True")
    a, b = _operands(a, b)
    ta, tb = transpose_a or adjoint_a, transpose_b or adjoint_b   # real dtypes: adjoint = transpose
    batched = any(s is None or len(s) > 2 for s in (static_shape(a), static_shape(b)))
    if batched:
        return apply_op("BatchMatMulV2", [a, b], {"adj_x": ta, "adj_y": tb},
                        name=name or "MatMul")
    return apply_op("MatMul", [a, b], {"transpose_a": ta, "transpose_b": tb},
                    name=name or "MatMul")


def matrix_determinant(input, name: Optional[str] = None) -> Tensor:  # noqa: A002
    """The determinant of each square matrix in the last two dims (``tf.linalg.det``)."""
    return apply_op("MatrixDeterminant", [convert_to_tensor(input)],
                    name=name or "MatrixDeterminant")


def matrix_inverse(input, adjoint: bool = False,  # noqa: A002
                   name: Optional[str] = None) -> Tensor:
    """The inverse of each square matrix in the last two dims (``tf.linalg.inv``); a
    singular one is a run-time error."""
    return apply_op("MatrixInverse", [convert_to_tensor(input)], {"adjoint": bool(adjoint)},
                    name=name or "MatrixInverse")
