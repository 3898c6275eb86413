"""The C lowering of GatherV2 (``array_gather.c.j2``; an out-of-range index is an error naming
it)."""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.c_ops.array.common import (_c, _constant_axis, _contiguous_strides, _mul,
                                                 _values)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.array.gather import _gather_dims


def _gather_plan(kc: KernelContext) -> Tuple[int, int]:
    p, ind = kc.inputs[0], kc.inputs[1]
    try:
        a = _constant_axis(kc, 2, p.rank)
        return _gather_dims(p.rank, ind.rank, a, kc.attr("batch_dims"))
    except ValueError as e:
        raise kc.error(str(e)) from None


def _gather_c_dims(kc: KernelContext) -> List[List[str]]:
    p, ind = kc.inputs[0], kc.inputs[1]
    a, bd = _gather_plan(kc)
    return [p.dims[:a] + ind.dims[bd:] + p.dims[a + 1:]]


def _gather_c(kc: KernelContext) -> str:
    p, ind = kc.inputs[0], kc.inputs[1]
    a, bd = _gather_plan(kc)
    for k in range(bd):
        if p.shape[k] is None or ind.shape[k] is None:
            kc.check_dims_equal(p.dim(k), ind.dim(k),
                                f"params and indices batch dim {k} must match")
    pdims, idims = _values(p), _values(ind)
    istrides = _contiguous_strides(idims)
    position = [f"(long long)n" if ind.rank == 1 else
                f"(long long)((n / {_c(s)}) % {_c(d)})" for s, d in zip(istrides, idims)]
    limit = _c(pdims[a])
    bad = kc.fail("indices[" + ",".join("%lld" for _ in position) + "] = %lld is not in [0, %lld)",
                  *position, "(long long)idx[n]", f"(long long){limit}")
    return kc.render("array_gather.c.j2", params=p, indices=ind, num_indices=ind.size,
                     bad_index=bad, limit=limit, batch=_c(_mul(pdims[:bd])),
                     outer=_c(_mul(pdims[bd:a])), inner=_c(_mul(pdims[a + 1:])),
                     count=_c(_mul(idims[bd:])))


set_c_kernel("GatherV2", _gather_c, _gather_c_dims)
