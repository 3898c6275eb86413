"""The C lowering of ReverseV2 (the axes must be constants): rows after the last reversed axis
are contiguous in both tensors and move with one memcpy each."""
from __future__ import annotations

from typing import List

import numpy as np

from compiler.codegen.kernel_context import KernelContext, product
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.array.reverse import reverse_axes


def _axes(kc: KernelContext) -> List[int]:
    v = constant_value(kc.node.inputs[1])
    if v is None:
        raise kc.static_error("the C backend needs a constant axis for ReverseV2")
    try:
        return reverse_axes(np.reshape(v, -1), kc.inputs[0].rank)
    except ValueError as e:
        raise kc.error(str(e)) from None


def _reverse_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    axes = _axes(kc)
    if not axes:
        return f"if ({x.size} > 0) memcpy({out.var}.data, {x.var}.data, (size_t)({x.size}) * " \
               f"sizeof({x.ctype}));"
    last = max(axes)
    inner = x.dim_product(last + 1)
    lines = [f"const int64_t inner = {inner};",
             f"for (int64_t o = 0; o < {product(x.dims[:last + 1])}; o++) {{",
             "    int64_t rest = o, src = 0, scale = 1;"]
    for d in range(last, -1, -1):
        n = x.dim(d)
        coord = f"(rest % {n})"
        flipped = f"({n} - 1 - rest % {n})" if d in axes else coord
        lines.append(f"    src += {flipped} * scale; scale *= {n}; rest /= {n};")
    lines += [f"    memcpy({out.data} + o * inner, {x.data} + src * inner, "
              f"(size_t)inner * sizeof({x.ctype}));",
              "}"]
    return f"if ({out.size} > 0) {{\n" + "\n".join("    " + l for l in lines) + "\n}"


set_c_kernel("ReverseV2", _reverse_c, lambda kc: [kc.inputs[0].dims])
