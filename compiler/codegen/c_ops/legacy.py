"""The C lowering of TensorFlow's legacy ``Select`` (``codegen_templates/c/select.c.j2``) and
``Gather`` (GatherV2's ``array_gather.c.j2`` along axis 0); see ``compiler/ops/legacy.py``."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import _c, _contiguous_strides, _mul, _values
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.legacy import select_mode


def _select_c(kc: KernelContext) -> str:
    cond, t, e = kc.inputs
    try:
        mode = select_mode(cond.shape, t.shape)
    except ValueError as err:
        raise kc.error(str(err)) from None
    for d in range(t.rank):
        kc.check_dims_equal(t.dim(d), e.dim(d), f"t and e must have the same shape (dim {d})")
    if mode == "rows":
        kc.check_dims_equal(cond.dim(0), t.dim(0),
                            "a vector condition must have one element per row of t and e")
    elif mode == "elements":
        for d in range(t.rank):
            kc.check_dims_equal(cond.dim(d), t.dim(d),
                                f"condition, t and e must have the same shape (dim {d})")
    return kc.render("select.c.j2", cond=cond, t=t, e=e, mode=mode,
                     rows=t.dim(0) if t.rank else "1", inner=t.dim_product(1))


def _select_c_dims(kc: KernelContext) -> List[List[str]]:
    t = kc.inputs[1]
    dims = list(t.dims)
    out = kc.out
    for d in range(out.rank):                 # a dim only the condition knows
        if out.shape[d] is not None:
            dims[d] = str(out.shape[d])
    return [dims]


def _gather_c(kc: KernelContext) -> str:
    p, ind = kc.inputs
    if p.rank == 0:
        raise kc.error("params must be at least a vector")
    pdims, idims = _values(p), _values(ind)
    istrides = _contiguous_strides(idims)
    position = ["(long long)n" if ind.rank == 1 else f"(long long)((n / {_c(s)}) % {_c(d)})"
                for s, d in zip(istrides, idims)]
    fmt = "indices[" + ",".join("%lld" for _ in position) + "] = %lld is not in [0, %lld)"
    limit = _c(pdims[0])
    bad = kc.fail(fmt, *position, "(long long)idx[n]", f"(long long){limit}")
    return kc.render("array_gather.c.j2", params=p, indices=ind, num_indices=ind.size,
                     bad_index=bad, limit=limit, batch="1", outer="1",
                     inner=_c(_mul(pdims[1:])), count=ind.size)


def _gather_c_dims(kc: KernelContext) -> List[List[str]]:
    p, ind = kc.inputs
    return [ind.dims + p.dims[1:]]


set_c_kernel("Select", _select_c, _select_c_dims)
set_c_kernel("Gather", _gather_c, _gather_c_dims)
