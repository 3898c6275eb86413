"""The C lowering of MatrixDeterminant and MatrixInverse (``compiler/ops/linalg.py``): LU
decomposition with partial pivoting per matrix, in double precision (``linalg.c.j2``)."""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _linalg_c(kc: KernelContext, inverse: bool) -> str:
    x = kc.inputs[0]
    n = x.dim(-1)
    kc.check_dims_equal(x.dim(-2), n, "input must be a square matrix (or a batch of them)")
    return kc.render("linalg.c.j2", count=x.dim_product(0, x.rank - 2), n=n, inverse=inverse,
                     adjoint=inverse and kc.attr("adjoint"))


set_c_kernel("MatrixDeterminant", lambda kc: _linalg_c(kc, False),
             lambda kc: [kc.inputs[0].dims[:-2]])
set_c_kernel("MatrixInverse", lambda kc: _linalg_c(kc, True), lambda kc: [kc.inputs[0].dims])
