"""Gradients of the special functions (``compiler/ops/math_special_functions.py``), with
TensorFlow's formulas (``math_grad.py``). Like TensorFlow, Igamma/Igammac/Betainc are
differentiated in x only, Zeta in q and Polygamma in x (the other inputs get None)."""
from __future__ import annotations

import math

import numpy as np

from dsl.gradients import RegisterGradient
from dsl.grad._util import shape_tuple, unbroadcast
from dsl.grad.math_grad import Grads, _binary_grads, _op
from dsl.ops import convert_to_tensor
from dsl.tensor import Operation, Tensor


@RegisterGradient("Lgamma")
def _lgamma_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Digamma", op.inputs[0]))]


@RegisterGradient("Digamma")
def _digamma_grad(op: Operation, g: Tensor) -> Grads:
    x = op.inputs[0]
    one = convert_to_tensor(1.0, dtype=x.dtype)
    return [_op("Mul", g, _op("Polygamma", one, x))]


@RegisterGradient("Polygamma")
def _polygamma_grad(op: Operation, g: Tensor) -> Grads:
    n, x = op.inputs
    return _binary_grads(op, None, _op("Mul", g, _op("Polygamma", _op("AddV2", n, 1.0), x)))


@RegisterGradient("Zeta")
def _zeta_grad(op: Operation, g: Tensor) -> Grads:
    x, q = op.inputs
    partial_q = _op("Neg", _op("Mul", x, _op("Zeta", _op("AddV2", x, 1.0), q)))
    return _binary_grads(op, None, _op("Mul", g, partial_q))


def _igamma_partial_x(op: Operation) -> Tensor:
    """d/dx P(a, x) = exp(-x + (a - 1) log x - lgamma(a))."""
    a, x = op.inputs
    log_density = _op("Sub", _op("Sub", _op("Mul", _op("Sub", a, 1.0), _op("Log", x)), x),
                      _op("Lgamma", a))
    return _op("Exp", log_density)


@RegisterGradient("Igamma")
def _igamma_grad(op: Operation, g: Tensor) -> Grads:
    return _binary_grads(op, None, _op("Mul", g, _igamma_partial_x(op)))


@RegisterGradient("Igammac")
def _igammac_grad(op: Operation, g: Tensor) -> Grads:
    return _binary_grads(op, None, _op("Neg", _op("Mul", g, _igamma_partial_x(op))))


@RegisterGradient("Betainc")
def _betainc_grad(op: Operation, g: Tensor) -> Grads:
    """d/dx I_x(a, b) = (1 - x)^(b - 1) x^(a - 1) / B(a, b); None for a and b, as TF."""
    a, b, x = op.inputs
    log_beta = _op("Sub", _op("AddV2", _op("Lgamma", a), _op("Lgamma", b)),
                   _op("Lgamma", _op("AddV2", a, b)))
    log_density = _op("Sub", _op("AddV2",
                                 _op("Mul", _op("Sub", b, 1.0), _op("Log1p", _op("Neg", x))),
                                 _op("Mul", _op("Sub", a, 1.0), _op("Log", x))), log_beta)
    gx = _op("Mul", g, _op("Exp", log_density))
    return [None, None, unbroadcast(op, gx, x, [shape_tuple(a), shape_tuple(b)])]


@RegisterGradient("Erfinv")
def _erfinv_grad(op: Operation, g: Tensor) -> Grads:
    scale = math.sqrt(math.pi) / 2.0
    return [_op("Mul", g, _op("Mul", _op("Exp", _op("Square", op.outputs[0])), scale))]


@RegisterGradient("Ndtri")
def _ndtri_grad(op: Operation, g: Tensor) -> Grads:
    half_square = _op("Mul", _op("Square", op.outputs[0]), 0.5)
    return [_op("Mul", g, _op("Mul", _op("Exp", half_square), math.sqrt(2.0 * math.pi)))]


@RegisterGradient("BesselI0e")
def _bessel_i0e_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs[0], op.outputs[0]
    return [_op("Mul", g, _op("Sub", _op("BesselI1e", x), _op("Mul", _op("Sign", x), y)))]


@RegisterGradient("BesselI1e")
def _bessel_i1e_grad(op: Operation, g: Tensor) -> Grads:
    """I0e(x) - y (sign(x) + 1/x), and 1/2 where |x| is below the dtype's tiniest normal."""
    x, y = op.inputs[0], op.outputs[0]
    tiny = float(np.finfo(x.dtype.np).tiny)
    not_tiny = _op("Greater", _op("Abs", x), convert_to_tensor(tiny, dtype=x.dtype))
    safe_x = _op("SelectV2", not_tiny, x, convert_to_tensor(tiny, dtype=x.dtype))
    dy_dx = _op("Sub", _op("BesselI0e", safe_x),
                _op("Mul", y, _op("AddV2", _op("Sign", safe_x), _op("Reciprocal", safe_x))))
    dy_dx = _op("SelectV2", not_tiny, dy_dx, convert_to_tensor(0.5, dtype=x.dtype))
    return [_op("Mul", g, dy_dx)]
