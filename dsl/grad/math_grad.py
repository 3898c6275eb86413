"""Gradients of elementwise math: unary functions, broadcasting binary ops, Cast, AddN, SelectV2."""
from __future__ import annotations

from typing import List, Optional

from compiler.ir.op_registry import has_op
from dsl.grad._util import shape_tuple, unbroadcast
from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs) -> Tensor:
    return apply_op(name, list(inputs), attrs)


def _binary_grads(op: Operation, gx: Optional[Tensor], gy: Optional[Tensor]) -> Grads:
    """Partial gradients of a broadcasting binary op, each summed to its input's shape."""
    x, y = op.inputs
    return [None if gx is None else unbroadcast(op, gx, x, [shape_tuple(y)]),
            None if gy is None else unbroadcast(op, gy, y, [shape_tuple(x)])]


# --- unary --------------------------------------------------------------------------------------
@RegisterGradient("Neg")
def _neg_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Neg", g)]


@RegisterGradient("Abs")
def _abs_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Sign", op.inputs[0]))]


def _zero_grad(op: Operation, g: Tensor) -> Grads:
    """Piecewise-constant functions: the gradient is zero (almost everywhere)."""
    return [_op("ZerosLike", op.inputs[0])]


for _name in ("Sign", "Floor", "Ceil", "Round"):
    RegisterGradient(_name)(_zero_grad)


@RegisterGradient("Exp")
def _exp_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, op.outputs[0])]


@RegisterGradient("Log")
def _log_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("RealDiv", g, op.inputs[0])]


@RegisterGradient("Log1p")
def _log1p_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("RealDiv", g, _op("AddV2", op.inputs[0], 1.0))]


@RegisterGradient("Sqrt")
def _sqrt_grad(op: Operation, g: Tensor) -> Grads:
    if has_op("SqrtGrad"):
        return [_op("SqrtGrad", op.outputs[0], g)]
    return [_op("RealDiv", _op("Mul", g, 0.5), op.outputs[0])]


@RegisterGradient("Rsqrt")
def _rsqrt_grad(op: Operation, g: Tensor) -> Grads:
    y = op.outputs[0]
    if has_op("RsqrtGrad"):
        return [_op("RsqrtGrad", y, g)]
    return [_op("Mul", _op("Mul", g, -0.5), _op("Mul", _op("Square", y), y))]


@RegisterGradient("Square")
def _square_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", g, _op("Mul", op.inputs[0], 2.0))]


@RegisterGradient("Reciprocal")
def _reciprocal_grad(op: Operation, g: Tensor) -> Grads:
    if has_op("ReciprocalGrad"):
        return [_op("ReciprocalGrad", op.outputs[0], g)]
    return [_op("Neg", _op("Mul", g, _op("Square", op.outputs[0])))]


@RegisterGradient("Tanh")
def _tanh_grad(op: Operation, g: Tensor) -> Grads:
    y = op.outputs[0]
    if has_op("TanhGrad"):
        return [_op("TanhGrad", y, g)]
    return [_op("Mul", g, _op("Sub", 1.0, _op("Square", y)))]


@RegisterGradient("Sigmoid")
def _sigmoid_grad(op: Operation, g: Tensor) -> Grads:
    y = op.outputs[0]
    if has_op("SigmoidGrad"):
        return [_op("SigmoidGrad", y, g)]
    return [_op("Mul", g, _op("Mul", y, _op("Sub", 1.0, y)))]


@RegisterGradient("Relu")
def _relu_grad(op: Operation, g: Tensor) -> Grads:
    # relu(x) > 0 exactly where x > 0: reading the output, as TensorFlow does, leaves the
    # input with Relu as its only user, so bias_add + relu fuse into one kernel
    y = op.outputs[0]
    if has_op("ReluGrad"):
        return [_op("ReluGrad", g, y)]
    return [_op("SelectV2", _op("Greater", y, 0), g, _op("ZerosLike", g))]


@RegisterGradient("Relu6")
def _relu6_grad(op: Operation, g: Tensor) -> Grads:
    x = op.inputs[0]
    if has_op("Relu6Grad"):
        return [_op("Relu6Grad", g, x)]
    inside = _op("LogicalAnd", _op("Greater", x, 0), _op("Less", x, 6))
    return [_op("SelectV2", inside, g, _op("ZerosLike", g))]


@RegisterGradient("Elu")
def _elu_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs[0], op.outputs[0]
    if has_op("EluGrad"):
        return [_op("EluGrad", g, y)]
    return [_op("SelectV2", _op("Less", x, 0), _op("Mul", g, _op("AddV2", y, 1.0)), g)]


@RegisterGradient("Softplus")
def _softplus_grad(op: Operation, g: Tensor) -> Grads:
    x = op.inputs[0]
    if has_op("SoftplusGrad"):
        return [_op("SoftplusGrad", g, x)]
    return [_op("Mul", g, _op("Sigmoid", x))]


@RegisterGradient("Cast")
def _cast_grad(op: Operation, g: Tensor) -> Grads:
    src = op.inputs[0].dtype
    if src.is_floating and g.dtype.is_floating:
        return [_op("Cast", g, DstT=src)]
    return [None]


def _pass_through(op: Operation, g: Tensor) -> Grads:
    """Ops whose output is their input."""
    return [g]


for _name in ("Identity", "Snapshot", "PlaceholderWithDefault"):
    RegisterGradient(_name)(_pass_through)


@RegisterGradient("AddN")
def _addn_grad(op: Operation, g: Tensor) -> Grads:
    return [g] * len(op.inputs)


# --- binary (with broadcasting) -----------------------------------------------------------------
def _add_grad(op: Operation, g: Tensor) -> Grads:
    return _binary_grads(op, g, g)


for _name in ("Add", "AddV2"):
    RegisterGradient(_name)(_add_grad)


@RegisterGradient("Sub")
def _sub_grad(op: Operation, g: Tensor) -> Grads:
    return _binary_grads(op, g, _op("Neg", g))


@RegisterGradient("Mul")
def _mul_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs
    return _binary_grads(op, _op("Mul", g, y), _op("Mul", x, g))


@RegisterGradient("RealDiv")
def _realdiv_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs
    gy = _op("Mul", g, _op("Neg", _op("RealDiv", _op("RealDiv", x, y), y)))
    return _binary_grads(op, _op("RealDiv", g, y), gy)


def _extremum_grad(op: Operation, g: Tensor, compare: str) -> Grads:
    """The gradient goes to x where ``compare(x, y)`` holds (ties to x), else to y."""
    x, y = op.inputs
    pick_x = _op(compare, x, y)
    zeros = _op("ZerosLike", g)
    return _binary_grads(op, _op("SelectV2", pick_x, g, zeros), _op("SelectV2", pick_x, zeros, g))


@RegisterGradient("Maximum")
def _maximum_grad(op: Operation, g: Tensor) -> Grads:
    return _extremum_grad(op, g, "GreaterEqual")


@RegisterGradient("Minimum")
def _minimum_grad(op: Operation, g: Tensor) -> Grads:
    return _extremum_grad(op, g, "LessEqual")


@RegisterGradient("Pow")
def _pow_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs
    z = op.outputs[0]
    gx = _op("Mul", g, _op("Mul", y, _op("Pow", x, _op("Sub", y, 1.0))))
    positive = _op("Greater", x, 0)
    safe_x = _op("SelectV2", positive, x, _op("OnesLike", x))
    log_x = _op("SelectV2", positive, _op("Log", safe_x), _op("ZerosLike", x))
    gy = _op("Mul", g, _op("Mul", z, log_x))
    return _binary_grads(op, gx, gy)


@RegisterGradient("SquaredDifference")
def _squared_difference_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs
    d = _op("Mul", _op("Mul", g, 2.0), _op("Sub", x, y))
    return _binary_grads(op, d, _op("Neg", d))


@RegisterGradient("FloorMod")
def _floormod_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs
    return _binary_grads(op, g, _op("Mul", _op("Neg", g), _op("Floor", _op("RealDiv", x, y))))


@RegisterGradient("SelectV2")
def _select_grad(op: Operation, g: Tensor) -> Grads:
    c, t, e = op.inputs
    zeros = _op("ZerosLike", g)
    shapes = [shape_tuple(c), shape_tuple(t), shape_tuple(e)]
    return [None,
            unbroadcast(op, _op("SelectV2", c, g, zeros), t, [shapes[0], shapes[2]]),
            unbroadcast(op, _op("SelectV2", c, zeros, g), e, [shapes[0], shapes[1]])]


for _name in ("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
              "LogicalAnd", "LogicalOr", "LogicalNot", "FloorDiv", "ZerosLike", "OnesLike",
              "StopGradient", "Const", "Placeholder", "NoOp", "_Retval", "_Sink"):
    NotDifferentiable(_name)
