"""``_MatMulAccumulate``: ``acc + op(a) @ op(b)`` as one BLAS gemm into ``acc``'s buffer.

Made by the ``fuse-accumulate`` pass (``compiler/passes/fuse_accumulate.py``) inside a loop, where
the gradient of a weight that every iteration reads is summed: the backward loop's variable
``acc`` takes ``AddV2(acc, MatMul(a, b))`` each iteration. The gemm adds into the variable's
own buffer (``beta = 1``): the iteration's weight gradient is never written out and never read
back by an add (for the LSTM benchmark's [1024, 2048] weight, 8 MB written and 24 MB moved
by the add per iteration, no more). The output is the accumulator's buffer (``c_alias``):
the pass only fuses an accumulator nothing else reads. The numpy reference computes the sum
as written; results agree to rounding.
"""
from __future__ import annotations

from compiler.errors import ExecutionError
from compiler.ir.types import shape_str
from compiler.ops.nn import _matmul_ref
from compiler.ir.op_registry import register_op


def _product_dims(transpose_a: bool, transpose_b: bool, a, b):
    m, k_a = (a[1], a[0]) if transpose_a else (a[0], a[1])
    k_b, n = (b[1], b[0]) if transpose_b else (b[0], b[1])
    return m, k_a, k_b, n


def _matrix(ctx, i: int):
    """Input ``i``'s shape, which must be a matrix's where known."""
    s = ctx.input_shape(i)
    if s is not None and len(s) != 2:
        raise ctx.error(f"input {i} must be a matrix (rank 2), got shape {shape_str(s)}")
    return s


def _product_shape(ctx, a, b):
    """(m, n) of op(a) @ op(b) with the inner dimensions checked; None if a shape is unknown."""
    if a is None or b is None:
        return None
    m, k_a, k_b, n = _product_dims(ctx.attr("transpose_a"), ctx.attr("transpose_b"), a, b)
    if k_a is not None and k_b is not None and k_a != k_b:
        raise ctx.error(f"matrix size-incompatible: inner dimensions {k_a} and {k_b} differ")
    return m, n


def _shape(ctx) -> list:
    acc, a, b = _matrix(ctx, 0), _matrix(ctx, 1), _matrix(ctx, 2)
    product = _product_shape(ctx, a, b)
    if product is None:
        return [acc]
    m, n = product
    if acc is not None and any(d is not None and e is not None and d != e
                               for d, e in zip(acc, (m, n))):
        raise ctx.error(f"the product has shape {shape_str((m, n))}; the accumulator has "
                        f"{shape_str(acc)}")
    return [acc if acc is not None else (m, n)]


def _kernel(ctx, acc, a, b):
    product = _matmul_ref(ctx, a, b)
    if acc.shape != product.shape:
        raise ExecutionError(f"the product's shape {list(product.shape)} does not match the "
                             f"accumulator's {list(acc.shape)}", ctx.node)
    return (acc + product).astype(acc.dtype)


register_op("_MatMulAccumulate", inputs=["acc: T", "a: T", "b: T"], outputs=["sum: T"],
            attrs=["transpose_a: bool = false", "transpose_b: bool = false", "T: {f32, f64}"],
            shape=_shape, kernel=_kernel, c_alias=0, group="other",
            doc="acc + op(a) @ op(b), written into acc's buffer (one gemm with beta = 1).")


# --- _MatMulBiasAdd: op(a) @ op(b) + bias, the bias written first and the gemm adding to it ---
def _bias_shape(ctx) -> list:
    a, b, bias = _matrix(ctx, 0), _matrix(ctx, 1), ctx.input_shape(2)
    if bias is not None and len(bias) != 1:
        raise ctx.error(f"bias must be a vector (rank 1), got shape {shape_str(bias)}")
    product = _product_shape(ctx, a, b)
    if product is None:
        return [None]
    m, n = product
    if bias is not None and bias[0] is not None and n is not None and bias[0] != n:
        raise ctx.error(f"bias has {bias[0]} elements but the product has {n} columns")
    return [(m, n)]


def _bias_kernel(ctx, a, b, bias):
    product = _matmul_ref(ctx, a, b)
    if bias.shape[0] != product.shape[1]:
        raise ExecutionError(f"bias has {bias.shape[0]} elements but the product has "
                             f"{product.shape[1]} columns", ctx.node)
    return (product + bias).astype(product.dtype)


register_op("_MatMulBiasAdd", inputs=["a: T", "b: T", "bias: T"], outputs=["product: T"],
            attrs=["transpose_a: bool = false", "transpose_b: bool = false", "T: {f32, f64}"],
            shape=_bias_shape, kernel=_bias_kernel, group="matmul",
            doc="op(a) @ op(b) + bias (a vector over the columns): the bias is written into "
                "the output and one gemm adds the product to it (beta = 1).")
