"""The C lowering of Cumsum and Cumprod (``compiler/ops/scan.py``).

The input is viewed as ``[outer, n, inner]`` around the scan axis; each of the ``n`` steps adds
(multiplies) a contiguous row of ``inner`` elements onto the previous step's row, so the inner
loop vectorizes while every element is still accumulated in order, as in the reference. A
constant axis is baked into the loop bounds; a fed one is checked and applied at run time.
Integers accumulate in unsigned arithmetic (wrapping, no undefined overflow).
"""
from __future__ import annotations

from typing import Tuple

from compiler.codegen.c_ops.math import unsigned_ctype
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.scan import scan_axis


def _combine(kc: KernelContext, op: str, a: str, b: str) -> str:
    dt = kc.out.dtype
    if dt.is_integer:
        u = unsigned_ctype(dt)
        return f"({kc.out.ctype})(({u}){a} {op} ({u}){b})"
    return f"{a} {op} {b}"


def _extents(kc: KernelContext) -> Tuple[str, str, str, str]:
    """(C that sets up the extents, outer, n, inner) of the scan over ``kc.inputs[0]``."""
    x = kc.inputs[0]
    axis = kc.input_value(1)
    if axis is not None:
        k = scan_axis(x.rank, int(axis), kc.error)
        return "", x.dim_product(0, k), x.dim(k), x.dim_product(k + 1)
    rank = x.rank
    dims = ", ".join(x.dims) if rank else "0"
    setup = (f"const int64_t scan_dims[{max(rank, 1)}] = {{{dims}}};\n"
             f"int64_t axis = (int64_t){kc.inputs[1].data}[0];\n"
             f"if (axis < -{rank} || axis >= {rank}) "
             + kc.fail(f"Expected scan axis in the range [{-rank}, {rank}), but got %lld",
                       "(long long)axis") + "\n"
             f"if (axis < 0) axis += {rank};\n"
             "int64_t outer = 1, n = scan_dims[axis], inner = 1;\n"
             "for (int64_t d = 0; d < axis; d++) outer *= scan_dims[d];\n"
             f"for (int64_t d = axis + 1; d < {rank}; d++) inner *= scan_dims[d];\n")
    return setup, "outer", "n", "inner"


def _scan_c(op: str, identity: int):
    def emit(kc: KernelContext) -> str:
        x, out = kc.inputs[0], kc.out
        kc.check_scalar(1, "axis")
        setup, outer, n, inner = _extents(kc)
        exclusive, reverse = kc.attr("exclusive"), kc.attr("reverse")
        index, prev = ("n_ - 1 - s", "k + 1") if reverse else ("s", "k - 1")
        source = "xp" if exclusive else "xk"
        head = kc.literal(identity, out.dtype) if exclusive else "xk[i]"
        return (
            f"{setup}"
            f"const {x.ctype} *x = {x.data};\n{out.ctype} *y = {out.data};\n"
            f"const int64_t n_ = {n}, inner_ = {inner};\n"
            f"for (int64_t o = 0; o < {outer}; o++) {{\n"
            f"    const {x.ctype} *xo = x + o * n_ * inner_;\n"
            f"    {out.ctype} *yo = y + o * n_ * inner_;\n"
            f"    for (int64_t s = 0; s < n_; s++) {{\n"
            f"        const int64_t k = {index};\n"
            f"        const {x.ctype} *xk = xo + k * inner_;\n"
            f"        {out.ctype} *yk = yo + k * inner_;\n"
            f"        if (s == 0) {{\n"
            f"            for (int64_t i = 0; i < inner_; i++) yk[i] = {head};\n"
            f"            continue;\n"
            f"        }}\n"
            f"        const {x.ctype} *xp = xo + ({prev}) * inner_;\n"
            f"        const {out.ctype} *yp = yo + ({prev}) * inner_;\n"
            f"        for (int64_t i = 0; i < inner_; i++) "
            f"yk[i] = {_combine(kc, op, 'yp[i]', source + '[i]')};\n"
            f"    }}\n"
            f"}}")
    return emit


def _scan_dims(kc: KernelContext):
    return [kc.inputs[0].dims]


set_c_kernel("Cumsum", _scan_c("+", 0), _scan_dims)
set_c_kernel("Cumprod", _scan_c("*", 1), _scan_dims)
