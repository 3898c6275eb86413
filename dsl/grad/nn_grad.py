"""Gradients of MatMul, BatchMatMulV2, BiasAdd, Softmax, LogSoftmax, the losses, convolution
and pooling, and of their gradient ops (second derivatives)."""
from __future__ import annotations

from typing import List, Optional

from compiler.ir.op_registry import has_op
from dsl.grad._util import need_rank, reduce_sum, shape_tuple, unbroadcast
from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs) -> Tensor:
    return apply_op(name, list(inputs), attrs)


def _matmul_pair(op_name: str, a: Tensor, b: Tensor, g: Tensor, ta: bool, tb: bool, ka: str,
                 kb: str) -> Grads:
    """Gradients of (op a^ta b^tb) w.r.t. a and b; ka/kb are the op's transpose attr names."""
    def mm(p: Tensor, q: Tensor, tp: bool, tq: bool) -> Tensor:
        return _op(op_name, p, q, **{ka: tp, kb: tq})
    if not ta and not tb:
        return [mm(g, b, False, True), mm(a, g, True, False)]
    if not ta and tb:
        return [mm(g, b, False, False), mm(g, a, True, False)]
    if ta and not tb:
        return [mm(b, g, False, True), mm(a, g, False, False)]
    return [mm(b, g, True, True), mm(g, a, True, True)]


@RegisterGradient("MatMul")
def _matmul_grad(op: Operation, g: Tensor) -> Grads:
    a, b = op.inputs
    return _matmul_pair("MatMul", a, b, g, op.get_attr("transpose_a"), op.get_attr("transpose_b"),
                        "transpose_a", "transpose_b")


@RegisterGradient("BatchMatMulV2")
def _batch_matmul_grad(op: Operation, g: Tensor) -> Grads:
    x, y = op.inputs
    gx, gy = _matmul_pair("BatchMatMulV2", x, y, g, op.get_attr("adj_x"), op.get_attr("adj_y"),
                          "adj_x", "adj_y")
    xs, ys = shape_tuple(x), shape_tuple(y)
    out = shape_tuple(op.outputs[0])
    # only the batch dims broadcast: compare them with the matrix dims of each input kept
    x_peer = None if ys is None else ys[:-2] + (1, 1)
    y_peer = None if xs is None else xs[:-2] + (1, 1)
    gx_out = None if out is None or xs is None else out[:-2] + xs[-2:]
    gy_out = None if out is None or ys is None else out[:-2] + ys[-2:]
    return [unbroadcast(op, gx, x, [x_peer], gx_out), unbroadcast(op, gy, y, [y_peer], gy_out)]


@RegisterGradient("BiasAdd")
def _bias_add_grad(op: Operation, g: Tensor) -> Grads:
    fmt = op.get_attr("data_format")
    if has_op("BiasAddGrad"):
        return [g, _op("BiasAddGrad", g, data_format=fmt)]
    rank = need_rank(op, op.inputs[0])
    channel = 1 if fmt == "NCHW" else rank - 1
    return [g, reduce_sum(g, [k for k in range(rank) if k != channel])]


@RegisterGradient("Softmax")
def _softmax_grad(op: Operation, g: Tensor) -> Grads:
    y = op.outputs[0]
    dot = _op("Sum", _op("Mul", g, y), [-1], keep_dims=True)
    return [_op("Mul", _op("Sub", g, dot), y)]


@RegisterGradient("LogSoftmax")
def _log_softmax_grad(op: Operation, g: Tensor) -> Grads:
    y = op.outputs[0]
    total = _op("Sum", g, [-1], keep_dims=True)
    return [_op("Sub", g, _op("Mul", total, _op("Exp", y)))]


@RegisterGradient("L2Loss")
def _l2_loss_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Mul", op.inputs[0], g)]


def _xent_features_grad(op: Operation, g_loss: Optional[Tensor],
                        g_back: Optional[Tensor]) -> Optional[Tensor]:
    """d/d features of loss (via the backprop output) and of backprop (via the softmax)."""
    back = op.outputs[1]
    out = None if g_loss is None else _op("Mul", _op("ExpandDims", g_loss, -1), back)
    if g_back is not None:
        sm = _op("Softmax", op.inputs[0])
        dot = _op("Sum", _op("Mul", g_back, sm), [-1], keep_dims=True)
        term = _op("Mul", _op("Sub", g_back, dot), sm)
        out = term if out is None else _op("AddV2", out, term)
    return out


@RegisterGradient("SoftmaxCrossEntropyWithLogits")
def _xent_grad(op: Operation, g_loss: Optional[Tensor], g_back: Optional[Tensor]) -> Grads:
    features = _xent_features_grad(op, g_loss, g_back)
    labels = None
    if g_loss is not None:
        labels = _op("Mul", _op("ExpandDims", g_loss, -1),
                     _op("Neg", _op("LogSoftmax", op.inputs[0])))
    if g_back is not None:          # backprop = softmax - labels
        labels = _op("Neg", g_back) if labels is None else _op("Sub", labels, g_back)
    return [features, labels]


@RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_grad(op: Operation, g_loss: Optional[Tensor],
                      g_back: Optional[Tensor]) -> Grads:
    return [_xent_features_grad(op, g_loss, g_back), None]


def _attrs_for(op: Operation, grad_op: str) -> dict:
    """The attrs of ``op`` that ``grad_op`` also takes (strides, padding, ...)."""
    from compiler.ir.op_registry import get_op
    wanted = get_op(grad_op).attrs
    return {k: v for k, v in op.node.attrs.items() if k in wanted and k != "T"}


@RegisterGradient("Conv2D")
def _conv2d_grad(op: Operation, g: Tensor) -> Grads:
    x, f = op.inputs
    i32 = {"out_type": "i32"}
    return [apply_op("Conv2DBackpropInput", [apply_op("Shape", [x], i32), f, g],
                     _attrs_for(op, "Conv2DBackpropInput")),
            apply_op("Conv2DBackpropFilter", [x, apply_op("Shape", [f], i32), g],
                     _attrs_for(op, "Conv2DBackpropFilter"))]


@RegisterGradient("MaxPool")
def _max_pool_grad(op: Operation, g: Tensor) -> Grads:
    return [apply_op("MaxPoolGrad", [op.inputs[0], op.outputs[0], g],
                     _attrs_for(op, "MaxPoolGrad"))]


@RegisterGradient("AvgPool")
def _avg_pool_grad(op: Operation, g: Tensor) -> Grads:
    shape = apply_op("Shape", [op.inputs[0]], {"out_type": "i32"})
    return [apply_op("AvgPoolGrad", [shape, g], _attrs_for(op, "AvgPoolGrad"))]


for _name in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt",
              "BroadcastGradientArgs"):
    NotDifferentiable(_name)


# --- gradients of gradient ops (second derivatives) ---------------------------------------------
@RegisterGradient("ReluGrad")
def _relu_grad_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("ReluGrad", g, op.inputs[1]), _op("ZerosLike", op.inputs[1])]


@RegisterGradient("Relu6Grad")
def _relu6_grad_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("Relu6Grad", g, op.inputs[1]), _op("ZerosLike", op.inputs[1])]


@RegisterGradient("EluGrad")
def _elu_grad_grad(op: Operation, g: Tensor) -> Grads:
    dy, y = op.inputs
    negative = _op("Less", y, 0)
    return [_op("EluGrad", g, y), _op("SelectV2", negative, _op("Mul", g, dy), _op("ZerosLike", y))]


@RegisterGradient("SoftplusGrad")
def _softplus_grad_grad(op: Operation, g: Tensor) -> Grads:
    dy, x = op.inputs
    s = _op("Sigmoid", x)
    return [_op("SoftplusGrad", g, x),
            _op("Mul", _op("Mul", g, dy), _op("Mul", s, _op("Sub", 1.0, s)))]


@RegisterGradient("SigmoidGrad")
def _sigmoid_grad_grad(op: Operation, g: Tensor) -> Grads:
    y, dy = op.inputs
    return [_op("Mul", _op("Mul", g, dy), _op("Sub", 1.0, _op("Mul", y, 2.0))),
            _op("SigmoidGrad", y, g)]


@RegisterGradient("TanhGrad")
def _tanh_grad_grad(op: Operation, g: Tensor) -> Grads:
    y, dy = op.inputs
    return [_op("Mul", _op("Mul", g, dy), _op("Mul", y, -2.0)), _op("TanhGrad", y, g)]


@RegisterGradient("SqrtGrad")
def _sqrt_grad_grad(op: Operation, g: Tensor) -> Grads:
    y, dy = op.inputs
    return [_op("Neg", _op("RealDiv", _op("Mul", g, op.outputs[0]), y)), _op("SqrtGrad", y, g)]


@RegisterGradient("RsqrtGrad")
def _rsqrt_grad_grad(op: Operation, g: Tensor) -> Grads:
    y, dy = op.inputs
    return [_op("Mul", _op("Mul", g, dy), _op("Mul", _op("Square", y), -1.5)),
            _op("RsqrtGrad", y, g)]


@RegisterGradient("ReciprocalGrad")
def _reciprocal_grad_grad(op: Operation, g: Tensor) -> Grads:
    y, dy = op.inputs
    return [_op("Mul", _op("Mul", g, dy), _op("Mul", y, -2.0)), _op("ReciprocalGrad", y, g)]


@RegisterGradient("BiasAddGrad")
def _bias_add_grad_grad(op: Operation, g: Tensor) -> Grads:
    ob = op.inputs[0]
    return [_op("BiasAdd", _op("ZerosLike", ob), g, data_format=op.get_attr("data_format"))]


@RegisterGradient("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op: Operation, g: Tensor) -> Grads:
    _, f, dy = op.inputs
    shape = apply_op("Shape", [f], {"out_type": "i32"})
    return [None,
            apply_op("Conv2DBackpropFilter", [g, shape, dy],
                     _attrs_for(op, "Conv2DBackpropFilter")),
            apply_op("Conv2D", [g, f], _attrs_for(op, "Conv2D"))]


@RegisterGradient("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op: Operation, g: Tensor) -> Grads:
    x, _, dy = op.inputs
    shape = apply_op("Shape", [x], {"out_type": "i32"})
    return [apply_op("Conv2DBackpropInput", [shape, g, dy], _attrs_for(op, "Conv2DBackpropInput")),
            None,
            apply_op("Conv2D", [x, g], _attrs_for(op, "Conv2D"))]


@RegisterGradient("AvgPoolGrad")
def _avg_pool_grad_grad(op: Operation, g: Tensor) -> Grads:
    return [None, apply_op("AvgPool", [g], _attrs_for(op, "AvgPool"))]


@RegisterGradient("MaxPoolGrad")
def _max_pool_grad_grad(op: Operation, g: Tensor) -> Grads:
    """As TF: MaxPoolGrad is piecewise linear in grad and piecewise constant in the rest."""
    x, y, _ = op.inputs
    return [_op("ZerosLike", x), _op("ZerosLike", y),
            apply_op("MaxPoolGradGrad", [x, y, g], _attrs_for(op, "MaxPoolGradGrad"))]


@RegisterGradient("MaxPoolGradGrad")
def _max_pool_grad_grad_grad(op: Operation, g: Tensor) -> Grads:
    """As TF: the adjoint of MaxPoolGradGrad in its grad input is MaxPoolGrad."""
    x, y, _ = op.inputs
    return [_op("ZerosLike", x), _op("ZerosLike", y),
            apply_op("MaxPoolGrad", [x, y, g], _attrs_for(op, "MaxPoolGrad"))]
