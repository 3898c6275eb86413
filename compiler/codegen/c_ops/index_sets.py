"""The C lowering of InvertPermutation, ListDiff, Bincount and DenseBincount
(``compiler/ops/index_sets.py``).
Every value used as an index is checked against its bound before it is used, and a failure
names the node."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import _check_alloc
from compiler.codegen.kernel_context import KernelContext, shape_printf
from compiler.ir.op_registry import set_c_kernel


# --- InvertPermutation ---------------------------------------------------------------------
def _invert_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    if x.rank != 1:
        raise kc.error(f"invert_permutation expects a 1D vector, got rank {x.rank}")
    return "\n".join([
        f"const {x.ctype} *x = {x.data};",
        f"{x.ctype} *y = {kc.out.data};",
        f"const int64_t n = {x.dim(0)};",
        "for (int64_t i = 0; i < n; i++) y[i] = -1;",
        "for (int64_t i = 0; i < n; i++) {",
        "    const int64_t v = (int64_t)x[i];",
        "    if (v < 0 || v >= n) " + kc.fail("%lld is not between 0 and %lld", "(long long)v",
                                              "(long long)n"),
        "    if (y[v] != -1) " + kc.fail("%lld is duplicated in the input.", "(long long)v"),
        f"    y[v] = ({x.ctype})i;",
        "}"])


set_c_kernel("InvertPermutation", _invert_c, lambda kc: [[kc.inputs[0].dim(0)]])


# --- ListDiff ------------------------------------------------------------------------------
def _list_diff_c(kc: KernelContext) -> str:
    x, y = kc.inputs
    for ref, what in ((x, "x"), (y, "y")):
        if ref.rank != 1:
            raise kc.error(f"{what} should be a 1D vector, got rank {ref.rank}")
    return kc.render("list_diff.c.j2", floating=x.dtype.is_floating,
                     oom=kc.fail("out of memory in ListDiff", code="FLOWC_RESOURCE_EXHAUSTED",
                                 cleanup="free(sorted);"))


set_c_kernel("ListDiff", _list_diff_c, c_owns_outputs=True)


# --- Bincount ------------------------------------------------------------------------------
def _bincount_size(kc: KernelContext) -> str:
    v = kc.input_value(1)
    if v is not None:
        return str(int(v))
    kc.check_scalar(1, "size")
    return f"((int64_t){kc.inputs[1].data}[0])"


def _bincount_dims(kc: KernelContext) -> List[List[str]]:
    return [[_bincount_size(kc)]]


def _bincount_c(kc: KernelContext) -> str:
    arr, w = kc.inputs[0], kc.inputs[2]
    n = _bincount_size(kc)
    rows = arr.dim(0) if arr.rank == 2 and kc.node.op == "DenseBincount" else "1"
    if not n.isdigit():
        kc.check(f"{n} >= 0", "size (%lld) must be non-negative", f"(long long){n}")
        _check_alloc(kc, [rows, n] if arr.rank == 2 else [n], w.dtype.itemsize)
    afmt, aargs = shape_printf(arr)
    wfmt, wargs = shape_printf(w)
    same = " && ".join(f"{arr.dim(k)} == {w.dim(k)}" for k in range(arr.rank)) \
        if arr.rank == w.rank else "0"
    kc.check(f"{w.size} == 0 || ({same or '1'})",
             f"weights {wfmt} should be empty or have the shape of arr {afmt}", *wargs, *aargs)
    kc.checks.append("{ " + f"const {arr.ctype} *a = {arr.data}; "
                     f"for (int64_t i = 0; i < {arr.size}; i++) if (a[i] < 0) "
                     + kc.fail("Input arr must be non-negative!") + " }")
    floating = w.dtype.is_floating
    acc = "double" if floating else ("uint64_t" if w.dtype.itemsize == 8 else "uint32_t")
    T = w.ctype
    if kc.attrs.get("binary_output", False):
        add = one = "b[v] = 1;"
    else:
        add = "b[v] += (double)wt[i];" if floating else f"b[v] = ({acc})b[v] + ({acc})wt[i];"
        one = "b[v] += 1.0;" if floating else f"b[v] = ({acc})b[v] + 1u;"
    return "\n".join([
        f"const {arr.ctype} *a = {arr.data};",
        f"const {T} *wt = {w.data};",
        f"{T} *o = {kc.out.data};",
        f"const int64_t n = {n}, rows = {rows}, len = {arr.size}, weighted = {w.size} > 0;",
        "const int64_t per_row = rows > 0 ? len / rows : 0;",
        f"{acc} *b = ({acc} *)calloc((size_t)(rows * n) + 1, sizeof({acc}));",
        "if (!b) " + kc.fail("out of memory in Bincount", code="FLOWC_RESOURCE_EXHAUSTED"),
        "for (int64_t i = 0; i < len; i++) {",
        "    const int64_t v0 = (int64_t)a[i];",
        "    if (v0 >= n) continue;",
        "    const int64_t v = (i / (per_row > 0 ? per_row : 1)) * n + v0;",
        f"    if (weighted) {{ {add} }} else {{ {one} }}",
        "}",
        f"for (int64_t v = 0; v < rows * n; v++) o[v] = ({T})b[v];",
        "free(b);"])


def _dense_bincount_dims(kc: KernelContext) -> List[List[str]]:
    arr = kc.inputs[0]
    return [([arr.dim(0)] if arr.rank == 2 else []) + [_bincount_size(kc)]]


set_c_kernel("Bincount", _bincount_c, _bincount_dims)
set_c_kernel("DenseBincount", _bincount_c, _dense_bincount_dims)
