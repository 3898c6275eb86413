"""The C lowering of InplaceUpdate, InplaceAdd and InplaceSub (``compiler/ops/inplace.py``):
the rows written into the output, which is ``x``'s own buffer (``c_alias``, ``c_in_place``)
unless something else reads ``x``, when the emitter hands the kernel a copy
(``codegen_templates/c/inplace.c.j2``). Indices are checked before anything is written.
"""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.inplace import OPS


def _emit_for(mode: str):
    def emit(kc: KernelContext) -> str:
        x, i, v = kc.inputs
        if x.rank != v.rank or x.rank == 0:
            raise kc.error(f"x {x.type} and v {v.type} must have the same rank, 1 or more")
        for k in range(1, x.rank):
            kc.check_dims_equal(x.dim(k), v.dim(k), f"x and v differ at dim {k}")
        kc.check_dims_equal(i.dim(0), v.dim(0), "the number of indices differs from v's rows")
        bad = kc.fail("i[%lld] = %lld is not in [0, %lld)", "(long long)k",
                      "(long long)idx[k]", "(long long)rows")
        return kc.render("inplace.c.j2", mode=mode, rows=x.dim(0), n=i.dim(0),
                         inner=x.dim_product(1), bad_index=bad)
    emit.__name__ = f"_emit_{mode}"
    return emit


for _name, _mode in OPS.items():
    set_c_kernel(_name, _emit_for(_mode), lambda kc: [kc.inputs[0].dims], c_in_place=True)
