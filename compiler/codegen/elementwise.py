"""Elementwise kernels with numpy broadcasting, shared by every elementwise op (and later by
fused kernels). Inputs of the output's shape are read with the flat index; size-1 inputs as a
scalar; anything else through a loop nest with per-input strides (0 on broadcast dims), so the
innermost loop stays contiguous and vectorizable. Large outputs are split across cores
(``parallel.c.j2``), and float32 libm calls of exp, expm1, tanh, erf, log and log1p become
flowc's vectorizable versions (``math_helpers.c.j2``), so loops of them (Exp, Tanh, Erf and
Gelu, Elu, Selu, Log, Softplus, ... and fused kernels of them) vectorize too."""
from __future__ import annotations

import functools
import glob
import re
from typing import List, Optional

from compiler.codegen.kernel_context import KernelContext, TensorRef, product
from compiler.options import setting


def broadcast_dim(kc: KernelContext, exprs: List[str], what: str, check: bool = True) -> str:
    """The broadcast of dims ``exprs`` (C expressions) as one C expression; when ``check``,
    a run-time check that every dynamic dim is 1 or equal to the result."""
    static = [e for e in exprs if e.isdigit() and e != "1"]
    dynamic = [e for e in exprs if not e.isdigit()]
    if static:
        result = static[0]
    elif not dynamic:
        result = "1"
    else:
        result = dynamic[0]
        for e in dynamic[1:]:
            result = f"({result} == 1 ? {e} : {result})"
    if check:
        for e in dynamic:
            if e != result:
                kc.check(f"{e} == {result} || {e} == 1",
                         f"incompatible shapes for broadcasting: {what} is %lld in one input and "
                         "%lld in another", f"(long long)({e})", f"(long long)({result})")
    return result


def broadcast_output_dims(kc: KernelContext) -> List[List[str]]:
    """C expressions for the broadcast output dims, with run-time checks for dynamic dims."""
    rank = kc.outputs[0].rank
    dims = []
    for k in range(rank):
        exprs = [x.dim(k - (rank - x.rank)) for x in kc.inputs if k - (rank - x.rank) >= 0]
        dims.append(broadcast_dim(kc, exprs, f"dim {k}"))
    return [dims]


def same_dims(a: TensorRef, b: TensorRef) -> bool:
    return a.rank == b.rank and a.dims == b.dims


def is_scalar(x: TensorRef) -> bool:
    return all(d == "1" for d in x.dims)


def input_strides(out: TensorRef, x: TensorRef) -> List[str]:
    """Per output dim, the stride of ``x`` (0 where x is broadcast along that dim)."""
    strides = []
    for k in range(out.rank):
        j = k - (out.rank - x.rank)
        if j < 0:
            strides.append("0")
            continue
        d = x.dim(j)
        s = x.stride(j)
        if d == "1":
            strides.append("0")
        elif d.isdigit():
            strides.append(s)
        else:
            strides.append(f"({d} == 1 ? 0 : {s})")
    return strides


# float32 libm function -> the math_helpers.c.j2 helper that replaces it in vectorized loops
VECTOR_MATH_F32 = {"expf": "vexpf", "expm1f": "vexpm1f", "tanhf": "vtanhf", "erff": "verff",
                   "logf": "vlogf", "log1pf": "vlog1pf"}
_LIBM_F32_CALL = re.compile(r"\b(" + "|".join(VECTOR_MATH_F32) + r")\(")
_DEFAULT_LAST_LEVEL_CACHE = 32 << 20


@functools.lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """The largest CPU cache of this machine (modules are built here for this CPU, with
    -march=native), from sysfs; 32 MiB where it cannot be read."""
    best = 0
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(index) as f:
                text = f.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or _DEFAULT_LAST_LEVEL_CACHE


def streams_output(out: TensorRef, nested: bool, fail_if: Optional[str]) -> bool:
    """Whether a flat elementwise loop writes its output with streaming (non-temporal)
    stores: when the output's static size is at least the last-level cache, so keeping it
    in cache cannot help the next kernel, and a plain store would first read every line it
    overwrites (a third more memory traffic for a read-one-write-one loop).
    ``FLOWC_STREAM_MIN_BYTES`` sets another threshold (read when a step compiles)."""
    if nested or fail_if or not out.size.isdigit():
        return False
    text = setting("FLOWC_STREAM_MIN_BYTES")
    threshold = int(text) if text.isdigit() else last_level_cache_bytes()
    return int(out.size) * out.dtype.itemsize >= threshold


def use_vector_math(kc: KernelContext, expr: str) -> str:
    """``expr`` with each float32 libm call of ``VECTOR_MATH_F32`` (``expf(``, ``tanhf(``,
    ``erff(``, ...) replaced by flowc's branch-free version (the same IEEE special cases,
    within 2 ulp of the correctly rounded result: tests/compiler/codegen/test_fast_math.py),
    which the C compiler vectorizes; a libm call is opaque and keeps the whole loop scalar.
    float64 keeps libm (``exp(`` is not matched). Each helper is defined once per module."""
    def helper(m: "re.Match") -> str:
        fn = VECTOR_MATH_F32[m.group(1)]
        name = "flowc_" + fn
        kc.module.add_global(kc.render("math_helpers.c.j2", fn=fn, name=name, T="float",
                                       U="uint32_t", is_signed=False, fmod=""))
        return name + "("
    return _LIBM_F32_CALL.sub(helper, expr)


def emit_elementwise(kc: KernelContext, expr: str, out_index: int = 0,
                     fail_if: Optional[str] = None, fail_message: str = "") -> str:
    """Render ``out[i] = expr`` where ``expr`` reads the inputs as ``a0``, ``a1``, ...

    ``fail_if`` is an optional C condition over the same ``a<j>``: when it holds for any
    element the kernel reports ``fail_message`` naming the node (``expr`` must still be
    defined for such elements; its value is discarded).
    """
    out = kc.outputs[out_index]
    modes = []
    for x in kc.inputs:
        if same_dims(x, out):
            modes.append("flat")
        elif is_scalar(x):
            modes.append("scalar")
        else:
            modes.append("strided")
    strides = [input_strides(out, x) for x in kc.inputs]
    fail = kc.fail(fail_message) if fail_if else ""
    nested = "strided" in modes
    return kc.render("elementwise.c.j2", expr=use_vector_math(kc, expr), out=out, modes=modes,
                     strides=strides, nested=nested, inner=out.dim_product(1),
                     fail_if=fail_if, fail=fail, stream=streams_output(out, nested, fail_if))
