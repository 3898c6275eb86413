"""Gradients of the band and diagonal ops, as TensorFlow's ``array_grad.py`` defines them:
each op's gradient is its partner op (the diagonals taken, put in, or cleared) of the same
version, k and align; k, num_rows, num_cols and padding_value get none."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op, constant
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]


def _align(op: Operation) -> dict:
    return {"align": op.get_attr("align")} if op.type.endswith("V3") else {}


def _version(op: Operation) -> str:
    return op.type[-2:] if op.type[-2:] in ("V2", "V3") else ""


@RegisterGradient("MatrixBandPart")
def _band_part_grad(op: Operation, g: Tensor) -> Grads:
    return [apply_op("MatrixBandPart", [g, op.inputs[1], op.inputs[2]]), None, None]


def _diag_grad(op: Operation, g: Tensor) -> Grads:
    v = _version(op)
    if not v:
        return [apply_op("MatrixDiagPart", [g])]
    zero = apply_op("ZerosLike", [op.inputs[4]])
    return [apply_op("MatrixDiagPart" + v, [g, op.inputs[1], zero], _align(op)),
            None, None, None, None]


def _diag_part_grad(op: Operation, g: Tensor) -> Grads:
    v = _version(op)
    zeros = apply_op("ZerosLike", [op.inputs[0]])
    if not v:
        return [apply_op("MatrixSetDiag", [zeros, g])]
    return [apply_op("MatrixSetDiag" + v, [zeros, g, op.inputs[1]], _align(op)), None, None]


def _set_diag_grad(op: Operation, g: Tensor) -> Grads:
    v = _version(op)
    cleared = apply_op("ZerosLike", [op.inputs[1]])
    if not v:
        return [apply_op("MatrixSetDiag", [g, cleared]), apply_op("MatrixDiagPart", [g])]
    k = op.inputs[2]
    zero = constant(0, dtype=g.dtype)
    return [apply_op("MatrixSetDiag" + v, [g, cleared, k], _align(op)),
            apply_op("MatrixDiagPart" + v, [g, k, zero], _align(op)), None]


for _v in ("", "V2", "V3"):
    RegisterGradient("MatrixDiag" + _v)(_diag_grad)
    RegisterGradient("MatrixDiagPart" + _v)(_diag_part_grad)
    RegisterGradient("MatrixSetDiag" + _v)(_set_diag_grad)


@RegisterGradient("Diag")
def _diag_full_grad(op: Operation, g: Tensor) -> Grads:
    return [apply_op("DiagPart", [g])]


@RegisterGradient("DiagPart")
def _diag_part_full_grad(op: Operation, g: Tensor) -> Grads:
    return [apply_op("Diag", [g])]
