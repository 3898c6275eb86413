"""The C lowering of the fused matrix products of ``compiler/ops/matmul_accumulate.py``: one
BLAS gemm with ``beta = 1`` (``codegen_templates/c/matmul.c.j2``) into what the output already
holds, the accumulator's own buffer (``_MatMulAccumulate``, in place) or the bias written into
the output first (``_MatMulBiasAdd``).
"""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.matmul_accumulate import _product_dims
from compiler.codegen.c_ops.nn import _blas_fits, blas_routines


def _checked_product(kc: KernelContext, a, b):
    """(m, n, k) of op(a) @ op(b), the inner dimensions checked at run time."""
    m, k_a, k_b, n = _product_dims(kc.attr("transpose_a"), kc.attr("transpose_b"), a.dims,
                                   b.dims)
    kc.check_dims_equal(k_a, k_b, "matrix size-incompatible: inner dimensions differ")
    return m, n, k_a


def _gemm(kc: KernelContext, part: str, a, b, m: str, n: str, k: str) -> str:
    """matmul.c.j2's ``part``: one BLAS call with beta = 1 into what the output holds."""
    kc.require("blas")
    _blas_fits(kc, [m, n, k, a.dim(-1), b.dim(-1)])
    return kc.render("matmul.c.j2", part=part, ta=kc.attr("transpose_a"),
                     tb=kc.attr("transpose_b"),
                     **blas_routines(kc, a.dtype, [m, n, k]), m=m, n=n, k=k, lda=a.dim(-1),
                     ldb=b.dim(-1))


def _emit(kc: KernelContext) -> str:
    acc, a, b = kc.inputs
    m, n, k = _checked_product(kc, a, b)
    kc.check_dims_equal(acc.dim(0), m, "the accumulator's rows differ from the product's")
    kc.check_dims_equal(acc.dim(1), n, "the accumulator's columns differ from the product's")
    return _gemm(kc, "accumulate", a, b, m, n, k)


set_c_kernel("_MatMulAccumulate", _emit, lambda kc: [kc.inputs[0].dims], c_in_place=True)


# --- _MatMulBiasAdd: op(a) @ op(b) + bias, the bias written first and the gemm adding to it ---
def _bias_dims(kc: KernelContext):
    a, b, _ = kc.inputs
    m, _, _, n = _product_dims(kc.attr("transpose_a"), kc.attr("transpose_b"), a.dims, b.dims)
    return [[m, n]]


def _bias_emit(kc: KernelContext) -> str:
    a, b, bias = kc.inputs
    m, n, k = _checked_product(kc, a, b)
    kc.check_dims_equal(bias.dim(0), n, "bias size differs from the product's columns")
    return _gemm(kc, "bias", a, b, m, n, k)


set_c_kernel("_MatMulBiasAdd", _bias_emit, _bias_dims)
