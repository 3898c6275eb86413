"""Square-matrix ops, as TensorFlow defines them: MatrixDeterminant and MatrixInverse, over
the last two dims (``[..., M, M]``), for f32 and f64.

Both factor each matrix by LU decomposition with partial pivoting (in double precision, as
numpy's LAPACK path does for f64). A singular matrix has determinant 0; inverting it is an
error ("Input is not invertible.", TensorFlow's words). The C kernels are
``compiler/codegen/c_ops/linalg.py``'s.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str


def _square(ctx, s, what: str = "input"):
    if s is None:
        return
    if len(s) < 2:
        raise ctx.error(f"{what} must have rank >= 2, got shape {shape_str(s)}")
    if s[-1] is not None and s[-2] is not None and s[-1] != s[-2]:
        raise ctx.error(f"{what} must be a square matrix (or a batch of them), got shape "
                        f"{shape_str(s)}")


def _det_shape(ctx) -> list:
    s = ctx.input_shape(0)
    _square(ctx, s)
    return [None if s is None else tuple(s[:-2])]


def _check_square(ctx, x: np.ndarray) -> None:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ExecutionError(f"input must be a square matrix (or a batch of them), got shape "
                             f"{list(x.shape)}", ctx.node)


def _det_ref(ctx, x: np.ndarray) -> np.ndarray:
    _check_square(ctx, x)
    if x.shape[-1] == 0:
        return np.ones(x.shape[:-2], x.dtype)
    return np.asarray(np.linalg.det(x.astype(np.float64)), dtype=x.dtype)


register_op("MatrixDeterminant", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: {f16, f32, f64}"], shape=_det_shape, kernel=_det_ref, group="other",
            doc="The determinant of each square matrix in the last two dims.")


def _inverse_shape(ctx) -> list:
    s = ctx.input_shape(0)
    _square(ctx, s)
    return [s]


def _inverse_ref(ctx, x: np.ndarray) -> np.ndarray:
    _check_square(ctx, x)
    a = x.astype(np.float64)
    if ctx.attrs["adjoint"]:
        a = np.swapaxes(a, -1, -2)
    if x.shape[-1] == 0:
        return np.zeros(x.shape, x.dtype)
    flat = a.reshape((-1,) + a.shape[-2:])
    out = np.empty_like(flat)
    for k, m in enumerate(flat):
        _, _, singular = lu_factor(m)
        if singular:
            raise ExecutionError("Input is not invertible.", ctx.node)
        out[k] = np.linalg.solve(m, np.eye(len(m)))
    return out.reshape(x.shape).astype(x.dtype)


def lu_factor(m: np.ndarray):
    """(LU, pivots, singular): LU decomposition of ``m`` with partial pivoting, as the C
    kernels do it (a zero pivot: singular)."""
    a = np.array(m, dtype=np.float64, copy=True)
    n = len(a)
    pivots = np.arange(n)
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return a, pivots, True
        if p != k:
            a[[k, p]] = a[[p, k]]
            pivots[[k, p]] = pivots[[p, k]]
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return a, pivots, False


register_op("MatrixInverse", inputs=["input: T"], outputs=["output: T"],
            attrs=["adjoint: bool = false", "T: {f16, f32, f64}"],
            shape=_inverse_shape, kernel=_inverse_ref, group="other",
            doc="The inverse (of the adjoint, with adjoint) of each square matrix in the last "
                "two dims; a singular one is an error.")
