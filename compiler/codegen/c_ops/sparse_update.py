"""The C lowering of ``_ResourceScatterSubScaled`` (``compiler/ops/sparse_update.py``):
``ResourceScatterSub``'s row scatter (``codegen_templates/c/sparse_rows.c.j2``) with the scale
applied to each row as it is subtracted.
"""
from __future__ import annotations

from compiler.codegen.c_ops.state import (_rows_checks, _var_expr, render_sparse_rows,
                                          scatter_shape_checks, static_row_elements)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _emit(kc: KernelContext) -> str:
    ind, upd, scale = kc.inputs[1], kc.inputs[2], kc.inputs[3]
    bad = _rows_checks(kc)
    scatter_shape_checks(kc, _var_expr(kc))
    inner = static_row_elements(upd.shape, ind.rank) if upd.rank else None
    return render_sparse_rows(kc, "scatter", indices=ind, updates=upd, mode="sub", scale=scale,
                              bad_index=bad, inner=inner)


set_c_kernel("_ResourceScatterSubScaled", _emit)
