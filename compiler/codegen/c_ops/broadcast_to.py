"""The C lowering of BroadcastTo and LinSpace (``compiler/ops/broadcast_to.py``), with
TensorFlow's checks of their run-time arguments."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import Value, _c, _check_alloc, _elements
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ir.types import DType


def _broadcast_dims(kc: KernelContext, checks: bool) -> List[Value]:
    x, out = kc.inputs[0], kc.out
    dims = _elements(kc, 1, out.rank)
    if x.rank > out.rank:
        raise kc.error(f"Rank of input ({x.rank}) must be no greater than rank of output shape "
                       f"({out.rank})")
    if checks:
        for d in dims:
            if isinstance(d, str):
                kc.check(f"{d} >= 0", "Dimension %lld must be >= 0", f"(long long){d}")
        lead = out.rank - x.rank
        for k in range(x.rank):
            src, dst = x.dim(k), _c(dims[lead + k])
            kc.check(f"{src} == 1 || {src} == {dst}",
                     f"Unable to broadcast: dim {k} of the input is %lld, the output's dim "
                     f"{lead + k} is %lld", f"(long long)({src})", f"(long long)({dst})")
        _check_alloc(kc, dims, out.dtype.itemsize)
    return dims


def _broadcast_to_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    dims = _broadcast_dims(kc, checks=True)
    lead = out.rank - x.rank
    lines = ["int64_t rest = i, src = 0, scale = 1;"]
    for d in range(out.rank - 1, -1, -1):
        n = _c(dims[d])
        lines.append(f"{{ const int64_t c = rest % ({n}); rest /= ({n});")
        if d >= lead:
            k = d - lead
            lines.append(f"  if ({x.dim(k)} != 1) src += c * scale;")
            lines.append(f"  scale *= {x.dim(k)}; }}")
        else:
            lines.append("  (void)c; }")
    body = "\n        ".join(lines)
    return f"""\
{{
    const {x.ctype} *x = {x.data};
    {out.ctype} *o = {out.data};
    for (int64_t i = 0; i < {out.size}; i++) {{
        {body}
        o[i] = x[src];
    }}
}}"""


set_c_kernel("BroadcastTo", _broadcast_to_c,
             lambda kc: [[_c(d) for d in _broadcast_dims(kc, checks=False)]])


def _num(kc: KernelContext) -> str:
    v = kc.input_value(2)
    if v is not None:
        return str(int(v.reshape(-1)[0]))
    kc.check_scalar(2, "num")
    return f"((int64_t){kc.inputs[2].data}[0])"


def _lin_space_c(kc: KernelContext) -> str:
    out = kc.out
    if out.dtype not in (DType.f32, DType.f64):
        raise kc.error(f"the C backend computes LinSpace in f32 and f64, not {out.dtype}")
    kc.check_scalar(0, "start")
    kc.check_scalar(1, "stop")
    num = _num(kc)
    kc.check(f"{num} > 0", "Requires num > 0: %lld", f"(long long){num}")
    T = out.ctype
    return f"""\
{{
    const int64_t num = {num};
    const {T} start = {kc.inputs[0].data}[0], stop = {kc.inputs[1].data}[0];
    {T} *o = {out.data};
    if (num == 1) {{
        o[0] = start;
    }} else {{
        const {T} step = (stop - start) / ({T})(num - 1);
        for (int64_t i = 0; i < num - 1; i++) o[i] = start + ({T})i * step;
        o[num - 1] = stop;
    }}
}}"""


set_c_kernel("LinSpace", _lin_space_c, lambda kc: [[_num(kc)]])
