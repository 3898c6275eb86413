"""Gradients of Softsign, Selu and LeakyRelu (``compiler/ops/activations.py``) through their
gradient ops, as TensorFlow builds them, and the gradients of those gradient ops (second
derivatives)."""
from __future__ import annotations

from dsl.gradients import RegisterGradient
from dsl.grad.math_grad import Grads, _op
from dsl.tensor import Operation, Tensor


@RegisterGradient("Softsign")
def _softsign_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("SoftsignGrad", g, op.inputs[0])]


@RegisterGradient("Selu")
def _selu_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("SeluGrad", g, op.outputs[0])]


@RegisterGradient("LeakyRelu")
def _leaky_relu_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("LeakyReluGrad", g, op.inputs[0], alpha=op.get_attr("alpha"))]


@RegisterGradient("LeakyReluGrad")
def _leaky_relu_grad_grad(op: Operation, g: Tensor) -> Grads:
    features = op.inputs[1]
    return [_op("LeakyReluGrad", g, features, alpha=op.get_attr("alpha")),
            _op("ZerosLike", features)]


@RegisterGradient("SeluGrad")
def _selu_grad_grad(op: Operation, g: Tensor) -> Grads:
    gradients, outputs = op.inputs
    negative = _op("Less", outputs, 0.0)
    return [_op("SeluGrad", g, outputs),
            _op("SelectV2", negative, _op("Mul", g, gradients), _op("ZerosLike", gradients))]


@RegisterGradient("SoftsignGrad")
def _softsign_grad_grad(op: Operation, g: Tensor) -> Grads:
    # d/dg [g / (1 + |f|)^2] = 1 / (1 + |f|)^2;  d/df = -2 g sign(f) / (1 + |f|)^3
    gradients, features = op.inputs
    denominator = _op("AddV2", _op("Abs", features), 1.0)
    d_features = _op("Mul", _op("Mul", g, -2.0), _op("RealDiv", _op(
        "Mul", gradients, _op("Sign", features)), _op("Mul", denominator, _op(
            "Square", denominator))))
    return [_op("SoftsignGrad", g, features), d_features]
