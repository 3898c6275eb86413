"""The C lowering of the selection ops (``compiler/ops/selection.py``): Where, TopKV2 and the
Unique family.

Where and Unique have data-dependent output sizes: their kernels count first, then allocate
their outputs (``c_owns_outputs``). TopKV2's ``k`` is read from its tensor at run time and
checked (a scalar in [0, last dim]) before the outputs are allocated (``topk.c.j2``).
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.reduction import module_helper
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import set_c_kernel


def _check_once(kc: KernelContext, condition: str, fmt: str, *args: str) -> None:
    """A run-time check, emitted once however often the dims and the kernel ask for it."""
    before = list(kc.checks)
    kc.check(condition, fmt, *args)
    if len(kc.checks) > len(before) and kc.checks[-1] in before:
        kc.checks.pop()


# --- Where -------------------------------------------------------------------------------------
def _where_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    rank = x.rank
    test = "x[i]" if x.dtype.is_bool else "x[i] != 0"
    dims = ", ".join(x.dims) or "1"
    return "\n".join([
        f"const {x.ctype} *x = {x.data};",
        f"const int64_t total = {x.size};",
        "int64_t count = 0;",
        f"for (int64_t i = 0; i < total; i++) count += ({test}) ? 1 : 0;",
        f"memset(&{out.var}, 0, sizeof {out.var});",
        f"{out.var}.rank = 2; {out.var}.dtype = {out.dtype.code};",
        f"{out.var}.dims[0] = count; {out.var}.dims[1] = {rank};",
        f"{out.var}.data = flowc_alloc((size_t)(count * {rank}) * sizeof(int64_t) + 1);",
        f"if (!{out.var}.data) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        "{",
        f"    int64_t *o = (int64_t *){out.var}.data;",
        *([] if rank == 0 else [
            f"    const int64_t dims[{rank}] = {{{dims}}};",
            f"    int64_t at[{rank}] = {{0}};",
            "    for (int64_t i = 0; i < total; i++) {",
            f"        if ({test}) for (int d = 0; d < {rank}; d++) *o++ = at[d];",
            f"        for (int d = {rank - 1}; d >= 0; d--) {{",
            "            if (++at[d] < dims[d]) break;",
            "            at[d] = 0;",
            "        }",
            "    }"]),
        "    (void)o;",
        "}"])


set_c_kernel("Where", _where_c, c_owns_outputs=True)


# --- TopKV2 ------------------------------------------------------------------------------------
def _topk_k(kc: KernelContext) -> str:
    """C for k, with its checks (a scalar, 0 <= k <= the last dim)."""
    x, k = kc.inputs
    kc.check_scalar(1, "k")
    value = constant_value(kc.node.inputs[1])
    expr = str(int(value.reshape(-1)[0])) if value is not None else f"((int64_t){k.data}[0])"
    n = x.dim(-1)
    _check_once(kc, f"{expr} >= 0", "Need k >= 0, got %lld", f"(long long){expr}")
    _check_once(kc, f"{n} >= {expr}", "input must have at least k=%lld columns, got %lld",
                f"(long long){expr}", f"(long long)({n})")
    return expr


def _topk_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    dims = x.dims[:-1] + [_topk_k(kc)]
    return [dims, dims]


def _topk_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    k = _topk_k(kc)
    values, indices = kc.outputs
    fn = f"flowc_topk_{x.dtype.ir_name}_{indices.dtype.ir_name}"
    module_helper(kc, fn, kc.render("topk.c.j2", part="helper", fn=fn, T=x.ctype,
                                    I=indices.ctype, floating=x.dtype.is_floating))
    return kc.render("topk.c.j2", part="body", fn=fn, T=x.ctype, I=indices.ctype,
                     rows=x.dim_product(0, x.rank - 1), n=x.dim(-1), k=k)


set_c_kernel("TopKV2", _topk_c, _topk_dims)


# --- Unique family -----------------------------------------------------------------------------
def _unique_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    axis = None
    if kc.node.op in ("UniqueV2", "UniqueWithCountsV2"):
        value = constant_value(kc.node.inputs[1])
        if value is None:
            raise kc.static_error("the C backend needs the axis of a UniqueV2 known at compile "
                                  "time")
        value = value.reshape(-1)
        if value.size > 1:
            raise kc.error("axis does not support input tensors larger than 1 elements")
        if value.size == 1:
            axis = int(value[0])
            if not -x.rank <= axis < x.rank:
                raise kc.error(f"axis has to be between [0, {x.rank})")
            axis = axis + x.rank if axis < 0 else axis
    if axis is None:
        if x.rank != 1:
            raise kc.error(f"unique expects a 1D vector, got rank {x.rank}")
        axis = 0
    y_dims = ["uniq" if d == axis else x.dim(d) for d in range(x.rank)]
    return kc.render("unique.c.j2", outer=x.dim_product(0, axis), n=x.dim(axis),
                     inner=x.dim_product(axis + 1), y_dims=y_dims,
                     floating=x.dtype.is_floating)


for _name in ("Unique", "UniqueV2", "UniqueWithCounts", "UniqueWithCountsV2"):
    set_c_kernel(_name, _unique_c, c_owns_outputs=True)
