"""Comparisons, logical ops, Where, Cast."""
from __future__ import annotations


from dsl.onnx.dtypes import flowc_dtype, onnx_type_name
from dsl.onnx.values import binary, scalar, unary
from dsl.ops import apply_op


def _compare(op: str):
    def lower(ctx):
        return binary(op, ctx.input(0), ctx.input(1))
    lower.__name__ = f"lower_{op.lower()}"
    return lower


def lower_not(ctx):
    return unary("LogicalNot", ctx.input(0))


def lower_xor(ctx):
    return binary("NotEqual", ctx.input(0), ctx.input(1))


def lower_where(ctx):
    return apply_op("SelectV2", [ctx.input(0), ctx.input(1), ctx.input(2)])


def _cast(ctx, x, to):
    if to.is_bool and x.dtype.is_floating:
        return binary("NotEqual", x, scalar(0, x))
    if x.dtype == to:
        return apply_op("Identity", [x])
    return apply_op("Cast", [x], {"DstT": to})


def lower_cast(ctx):
    elem = ctx.attr("to")
    to = flowc_dtype(elem)
    if to is None:
        raise ctx.error(f"casts to {onnx_type_name(elem)}, which flowc does not have")
    return _cast(ctx, ctx.input(0), to)


def lower_cast_like(ctx):
    return _cast(ctx, ctx.input(0), ctx.input(1).dtype)


LOWERINGS = {
    "Equal": [(11, None, _compare("Equal"))],
    "Less": [(9, None, _compare("Less"))],
    "Greater": [(9, None, _compare("Greater"))],
    "LessOrEqual": [(12, None, _compare("LessEqual"))],
    "GreaterOrEqual": [(12, None, _compare("GreaterEqual"))],
    "And": [(7, None, _compare("LogicalAnd"))],
    "Or": [(7, None, _compare("LogicalOr"))],
    "Xor": [(7, None, lower_xor)],
    "Not": [(1, None, lower_not)],
    "Where": [(9, None, lower_where)],
    "Cast": [(6, None, lower_cast)],
    "CastLike": [(15, None, lower_cast_like)],
}
