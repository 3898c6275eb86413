"""Gradients of MatrixDeterminant and MatrixInverse, as TensorFlow's ``linalg_grad.py``
defines them."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs) -> Tensor:
    return apply_op(name, list(inputs), attrs)


@RegisterGradient("MatrixDeterminant")
def _determinant_grad(op: Operation, g: Tensor) -> Grads:
    """d det(A) / dA = det(A) * inv(A)^T (a singular A's inverse is an error, as in TF)."""
    a, det = op.inputs[0], op.outputs[0]
    scale = _op("Mul", g, det)
    scale = _op("ExpandDims", _op("ExpandDims", scale, np.int64(-1)), np.int64(-1))
    return [_op("Mul", scale, _op("MatrixInverse", a, adjoint=True))]


@RegisterGradient("MatrixInverse")
def _inverse_grad(op: Operation, g: Tensor) -> Grads:
    """-inv^T g inv^T; with adjoint (inv = (A^T)^-1), -inv g^T inv."""
    inv = op.outputs[0]
    if op.get_attr("adjoint"):
        left = _op("BatchMatMulV2", inv, g, adj_y=True)
        return [_op("Neg", _op("BatchMatMulV2", left, inv))]
    left = _op("BatchMatMulV2", inv, g, adj_x=True)
    return [_op("Neg", _op("BatchMatMulV2", left, inv, adj_y=True))]
