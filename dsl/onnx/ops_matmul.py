"""MatMul (numpy's matmul: 1-D operands, broadcast batch dims) and Gemm."""
from __future__ import annotations

from dsl.onnx.values import binary, index_scalar, rank_of, scalar
from dsl.ops import apply_op


def matmul(a, b, ctx):
    ra, rb = rank_of(a, ctx), rank_of(b, ctx)
    if ra == 0 or rb == 0:
        raise ctx.error("MatMul operands must have rank 1 or more")
    if ra == 1:
        a = apply_op("ExpandDims", [a, index_scalar(0)])
    if rb == 1:
        b = apply_op("ExpandDims", [b, index_scalar(-1)])
    if ra <= 2 and rb <= 2:
        y = apply_op("MatMul", [a, b])
    else:
        y = apply_op("BatchMatMulV2", [a, b])
    squeeze = ([-2] if ra == 1 else []) + ([-1] if rb == 1 else [])
    if squeeze:
        y = apply_op("Squeeze", [y], {"squeeze_dims": squeeze})
    return y


def lower_matmul(ctx):
    return matmul(ctx.input(0), ctx.input(1), ctx)


def lower_gemm(ctx):
    a, b = ctx.input(0), ctx.input(1)
    y = apply_op("MatMul", [a, b], {"transpose_a": bool(ctx.attr("transA", 0)),
                                    "transpose_b": bool(ctx.attr("transB", 0))})
    alpha, beta = ctx.attr("alpha", 1.0), ctx.attr("beta", 1.0)
    if alpha != 1.0:
        y = binary("Mul", y, scalar(alpha, y))
    c = ctx.optional_input(2)
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = binary("Mul", c, scalar(beta, c))
        y = binary("AddV2", y, c)
    return y


LOWERINGS = {
    "MatMul": [(9, None, lower_matmul)],
    "Gemm": [(7, None, lower_gemm)],
}
