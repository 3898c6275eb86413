"""Gradients of the trigonometric, hyperbolic and error functions, Expm1 and Atan2
(``compiler/ops/math_special.py``), with TensorFlow's formulas."""
from __future__ import annotations

import math

from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.grad.math_grad import Grads, _binary_grads, _op
from dsl.tensor import Operation, Tensor

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _one_minus_square(x: Tensor) -> Tensor:
    return _op("Sub", 1.0, _op("Square", x))


@RegisterGradient("Sin")
def _sin_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Cos", op.inputs[0]))]


@RegisterGradient("Cos")
def _cos_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Neg", _op("Mul", g, _op("Sin", op.inputs[0])))]


@RegisterGradient("Tan")
def _tan_grad(op: Operation, g: Tensor) -> Grads:
    sec = _op("Reciprocal", _op("Cos", op.inputs[0]))
    return [_op("Mul", g, _op("Square", sec))]


@RegisterGradient("Asin")
def _asin_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Rsqrt", _one_minus_square(op.inputs[0])))]


@RegisterGradient("Acos")
def _acos_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Neg", _op("Mul", g, _op("Rsqrt", _one_minus_square(op.inputs[0]))))]


@RegisterGradient("Atan")
def _atan_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("RealDiv", g, _op("AddV2", _op("Square", op.inputs[0]), 1.0))]


@RegisterGradient("Sinh")
def _sinh_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Cosh", op.inputs[0]))]


@RegisterGradient("Cosh")
def _cosh_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Sinh", op.inputs[0]))]


@RegisterGradient("Asinh")
def _asinh_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("RealDiv", g, _op("Cosh", op.outputs[0]))]


@RegisterGradient("Acosh")
def _acosh_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("RealDiv", g, _op("Sinh", op.outputs[0]))]


@RegisterGradient("Atanh")
def _atanh_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("RealDiv", g, _one_minus_square(op.inputs[0]))]


def _gaussian(x: Tensor, scale: float) -> Tensor:
    """``scale * exp(-x^2)``: the derivative of erf (scale 2/sqrt(pi)) and erfc."""
    return _op("Mul", _op("Exp", _op("Neg", _op("Square", x))), scale)


@RegisterGradient("Erf")
def _erf_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _gaussian(op.inputs[0], _TWO_OVER_SQRT_PI))]


@RegisterGradient("Erfc")
def _erfc_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _gaussian(op.inputs[0], -_TWO_OVER_SQRT_PI))]


@RegisterGradient("Expm1")
def _expm1_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Exp", op.inputs[0]))]


@RegisterGradient("Atan2")
def _atan2_grad(op: Operation, g: Tensor) -> Grads:
    y, x = op.inputs
    scaled = _op("RealDiv", g, _op("AddV2", _op("Square", x), _op("Square", y)))
    return _binary_grads(op, _op("Mul", x, scaled), _op("Neg", _op("Mul", y, scaled)))


for _name in ("IsNan", "IsInf", "IsFinite"):
    NotDifferentiable(_name)
