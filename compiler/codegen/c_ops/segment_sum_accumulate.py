"""The C lowering of ``_SegmentSumAccumulate`` (``compiler/ops/segment_sum_accumulate.py``):
each segment's rows added into the accumulator's own buffer, in place
(``codegen_templates/c/segment_sum_accumulate.c.j2``), the ids checked before anything is
written.
"""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _emit(kc: KernelContext) -> str:
    acc, data, ids = kc.inputs
    for k in range(ids.rank):
        kc.check_dims_equal(ids.dim(k), data.dim(k), f"segment_ids dim {k} differs from data")
    for k in range(1, acc.rank):
        kc.check_dims_equal(acc.dim(k), data.dim(ids.rank + k - 1),
                            f"data dim {ids.rank + k - 1} differs from the accumulator's dim {k}")
    fail = kc.fail("segment_ids[%lld] = %lld is out of range [0, %lld)", "(long long)r",
                   "(long long)s", "(long long)nseg")
    return kc.render("segment_sum_accumulate.c.j2", n=acc.dim(0), nrows=ids.size,
                     inner=data.dim_product(ids.rank), fail=fail)


set_c_kernel("_SegmentSumAccumulate", _emit, lambda kc: [kc.inputs[0].dims],
             c_in_place=True)
