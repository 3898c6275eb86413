"""Elementwise arithmetic and activations (numpy broadcasting, as ONNX has since opset 7)."""
from __future__ import annotations

from functools import reduce

import dsl as fl
from dsl.onnx.values import binary, scalar, unary
from dsl.ops import apply_op


def _same_op(op: str):
    def lower(ctx):
        return unary(op, ctx.input(0))
    lower.__name__ = f"lower_{op.lower()}"
    return lower


def _binary_op(op: str):
    def lower(ctx):
        return binary(op, ctx.input(0), ctx.input(1))
    lower.__name__ = f"lower_{op.lower()}"
    return lower


def _is_float(x) -> bool:
    return x.dtype.is_floating


def lower_div(ctx):
    a, b = ctx.input(0), ctx.input(1)
    if _is_float(a):
        return binary("RealDiv", a, b)
    q = binary("FloorDiv", a, b)
    if a.dtype.is_unsigned:
        return q
    zero = scalar(0, a)
    rem = binary("FloorMod", a, b)
    signs_differ = binary("NotEqual", binary("Less", a, zero), binary("Less", b, zero))
    adjust = binary("LogicalAnd", binary("NotEqual", rem, zero), signs_differ)
    return binary("AddV2", q, fl.cast(adjust, a.dtype))          # round toward zero, as C


def lower_mod(ctx):
    a, b = ctx.input(0), ctx.input(1)
    if not ctx.attr("fmod", 0):
        return binary("FloorMod", a, b)
    # fmod: the remainder takes the sign of the dividend
    r = binary("FloorMod", unary("Abs", a), unary("Abs", b))
    return binary("Mul", unary("Sign", a), r) if not a.dtype.is_unsigned else r


def lower_pow(ctx):
    base, exponent = ctx.input(0), ctx.input(1)
    return binary("Pow", base, fl.cast(exponent, base.dtype))


def _variadic(op: str):
    def lower(ctx):
        xs = [ctx.input(i) for i in range(len(ctx.inputs))]
        return reduce(lambda a, b: binary(op, a, b), xs[1:], xs[0]) if len(xs) > 1 \
            else apply_op("Identity", [xs[0]])
    lower.__name__ = f"lower_{op.lower()}"
    return lower


def lower_mean(ctx):
    xs = [ctx.input(i) for i in range(len(ctx.inputs))]
    total = reduce(lambda a, b: binary("AddV2", a, b), xs[1:], xs[0])
    return binary("RealDiv", total, scalar(len(xs), total))


def lower_clip(ctx):
    x = ctx.input(0)
    if ctx.opset < 11:
        lo, hi = ctx.attr("min", None), ctx.attr("max", None)
        lo = None if lo is None else scalar(lo, x)
        hi = None if hi is None else scalar(hi, x)
    else:
        lo, hi = ctx.optional_input(1), ctx.optional_input(2)
    if lo is not None:
        x = binary("Maximum", x, lo)
    if hi is not None:
        x = binary("Minimum", x, hi)
    return x if (lo is not None or hi is not None) else apply_op("Identity", [x])


def lower_prelu(ctx):
    x, slope = ctx.input(0), ctx.input(1)
    return fl.where_v2(binary("Less", x, scalar(0, x)), binary("Mul", x, slope), x)


def lower_elu(ctx):
    x = ctx.input(0)
    alpha = ctx.attr("alpha", 1.0)
    expm1 = binary("Sub", unary("Exp", x), scalar(1, x))
    return fl.where_v2(binary("Greater", x, scalar(0, x)), x,
                       binary("Mul", expm1, scalar(alpha, x)))


def lower_celu(ctx):
    x = ctx.input(0)
    alpha = ctx.attr("alpha", 1.0)
    neg = binary("Mul", binary("Sub", unary("Exp", binary("RealDiv", x, scalar(alpha, x))),
                               scalar(1, x)), scalar(alpha, x))
    return binary("AddV2", unary("Relu", x), binary("Minimum", scalar(0, x), neg))


def lower_thresholded_relu(ctx):
    x = ctx.input(0)
    alpha = ctx.attr("alpha", 1.0)
    return fl.where_v2(binary("Greater", x, scalar(alpha, x)), x, scalar(0, x))


def _hard_sigmoid(x, alpha, beta):
    y = binary("AddV2", binary("Mul", x, scalar(alpha, x)), scalar(beta, x))
    return binary("Minimum", binary("Maximum", y, scalar(0, x)), scalar(1, x))


def lower_hard_sigmoid(ctx):
    return _hard_sigmoid(ctx.input(0), ctx.attr("alpha", 0.2), ctx.attr("beta", 0.5))


def lower_hard_swish(ctx):
    x = ctx.input(0)
    return binary("Mul", x, _hard_sigmoid(x, 1.0 / 6, 0.5))


def lower_mish(ctx):
    x = ctx.input(0)
    return binary("Mul", x, unary("Tanh", unary("Softplus", x)))


def lower_swish(ctx):
    x = ctx.input(0)
    return binary("Mul", x, unary("Sigmoid", binary("Mul", x, scalar(ctx.attr("alpha", 1.0), x))))


def lower_shrink(ctx):
    x = ctx.input(0)
    lambd, bias = ctx.attr("lambd", 0.5), ctx.attr("bias", 0.0)
    low = binary("Less", x, scalar(-lambd, x))
    high = binary("Greater", x, scalar(lambd, x))
    return fl.where_v2(low, binary("AddV2", x, scalar(bias, x)),
                    fl.where_v2(high, binary("Sub", x, scalar(bias, x)), scalar(0, x)))


def lower_identity(ctx):
    return apply_op("Identity", [ctx.input(0)])


def lower_sum(ctx):
    return _variadic("AddV2")(ctx)


LOWERINGS = {
    "Add": [(7, None, _binary_op("AddV2"))],
    "Sub": [(7, None, _binary_op("Sub"))],
    "Mul": [(7, None, _binary_op("Mul"))],
    "Div": [(7, None, lower_div)],
    "Mod": [(10, None, lower_mod)],
    "Pow": [(7, None, lower_pow)],
    "Max": [(8, None, _variadic("Maximum"))],
    "Min": [(8, None, _variadic("Minimum"))],
    "Sum": [(8, None, lower_sum)],
    "Mean": [(8, None, lower_mean)],
    "Neg": [(6, None, _same_op("Neg"))],
    "Abs": [(6, None, _same_op("Abs"))],
    "Exp": [(6, None, _same_op("Exp"))],
    "Log": [(6, None, _same_op("Log"))],
    "Sqrt": [(6, None, _same_op("Sqrt"))],
    "Reciprocal": [(6, None, _same_op("Reciprocal"))],
    "Floor": [(6, None, _same_op("Floor"))],
    "Ceil": [(6, None, _same_op("Ceil"))],
    "Round": [(11, None, _same_op("Round"))],
    "Sign": [(9, None, _same_op("Sign"))],
    "Relu": [(6, None, _same_op("Relu"))],
    "Sigmoid": [(6, None, _same_op("Sigmoid"))],
    "Tanh": [(6, None, _same_op("Tanh"))],
    "Softplus": [(1, None, _same_op("Softplus"))],
    "Elu": [(6, None, lower_elu)],
    "Celu": [(12, None, lower_celu)],
    "PRelu": [(7, None, lower_prelu)],
    "ThresholdedRelu": [(10, None, lower_thresholded_relu)],
    "HardSigmoid": [(6, None, lower_hard_sigmoid)],
    "HardSwish": [(14, None, lower_hard_swish)],
    "Mish": [(18, None, lower_mish)],
    "Clip": [(6, None, lower_clip)],
    "Swish": [(24, None, lower_swish)],
    "Shrink": [(9, None, lower_shrink)],
    "Identity": [(1, None, lower_identity)],
}
