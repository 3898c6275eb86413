"""Gradients of Cumsum and Cumprod (``compiler/ops/scan.py``), as TensorFlow's: a running
sum's gradient is the running sum of the incoming gradient in the other direction."""
from __future__ import annotations

from dsl.gradients import RegisterGradient
from dsl.grad.math_grad import Grads, _op
from dsl.tensor import Operation, Tensor


def _cumsum(x: Tensor, axis: Tensor, exclusive: bool, reverse: bool) -> Tensor:
    return _op("Cumsum", x, axis, exclusive=exclusive, reverse=reverse)


@RegisterGradient("Cumsum")
def _cumsum_grad(op: Operation, g: Tensor) -> Grads:
    axis = op.inputs[1]
    return [_cumsum(g, axis, op.get_attr("exclusive"), not op.get_attr("reverse")), None]


@RegisterGradient("Cumprod")
def _cumprod_grad(op: Operation, g: Tensor) -> Grads:
    # d out_j / d x_i = out_j / x_i for every j the product includes x_i in: a reverse
    # running sum of g * out, divided by x (0 where x is 0, as TF's div_no_nan)
    x, axis = op.inputs
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    summed = _cumsum(_op("Mul", op.outputs[0], g), axis, exclusive, not reverse)
    zero = _op("Equal", x, 0.0)
    safe_x = _op("SelectV2", zero, _op("OnesLike", x), x)
    return [_op("SelectV2", zero, _op("ZerosLike", x), _op("RealDiv", summed, safe_x)), None]
