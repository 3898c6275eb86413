"""The C lowering of ``_MatMulAssignSub`` (``compiler/ops/matmul_update.py``): one BLAS gemm
into the variable's buffer (``codegen_templates/c/matmul.c.j2``, part ``assign_sub``) with
``alpha = -scale`` and ``beta = 1``, after the variable's state is checked as an
``AssignSubVariableOp``'s is.
"""
from __future__ import annotations

from compiler.codegen.c_ops.state import _check_initialized, _check_value_dims, _var_expr
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.codegen.c_ops.nn import _blas_fits, blas_routines


def _emit(kc: KernelContext) -> str:
    _, a, b, _ = kc.inputs
    ta, tb = kc.attr("transpose_a"), kc.attr("transpose_b")
    m = a.dim(-1) if ta else a.dim(-2)
    k_a = a.dim(-2) if ta else a.dim(-1)
    k_b = b.dim(-1) if tb else b.dim(-2)
    n = b.dim(-2) if tb else b.dim(-1)
    kc.check_dims_equal(k_a, k_b, "matrix size-incompatible: inner dimensions differ")
    _check_initialized(kc)
    _check_value_dims(kc, 2, [m, n], "the update")
    kc.require("blas")
    _blas_fits(kc, [m, n, k_a, a.dim(-1), b.dim(-1)])
    return kc.render("matmul.c.j2", part="assign_sub", v=_var_expr(kc), ta=ta, tb=tb,
                     **blas_routines(kc, a.dtype, [m, n, k_a]), m=m, n=n, k=k_a, lda=a.dim(-1),
                     ldb=b.dim(-1))


set_c_kernel("_MatMulAssignSub", _emit)
