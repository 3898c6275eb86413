"""The C lowering of SpaceToBatchND and BatchToSpaceND (``compiler/ops/space_batch.py``): the
block shape and the paddings or crops must be constants (as TensorFlow's convolutions and
Keras' dilated convolutions make them); the batch and spatial dims may be fed. Each output
row of the dims after the spatial ones is one memcpy (or a zero fill in the padding)."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from compiler.codegen.kernel_context import KernelContext, product
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import set_c_kernel


def _plan(kc: KernelContext) -> Tuple[int, List[int], List[Tuple[int, int]]]:
    block, pairs = constant_value(kc.node.inputs[1]), constant_value(kc.node.inputs[2])
    if block is None or pairs is None:
        raise kc.static_error(f"the C backend needs a constant block_shape and "
                              f"{kc.node.op == 'SpaceToBatchND' and 'paddings' or 'crops'} "
                              f"for {kc.node.op}")
    steps = [int(v) for v in np.reshape(block, -1)]
    flat = [int(v) for v in np.reshape(pairs, -1)]
    return len(steps), steps, list(zip(flat[0::2], flat[1::2]))


def _s2b_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    m, steps, pairs = _plan(kc)
    dims = [product([x.dim(0), str(int(np.prod(steps)))])]
    for k, (s, (a, b)) in enumerate(zip(steps, pairs)):
        d = x.shape[k + 1]
        dims.append(str((d + a + b) // s) if d is not None
                    else f"(({x.dim(k + 1)} + {a + b}) / {s})")
    return [dims + x.dims[m + 1:]]


def _b2s_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    m, steps, pairs = _plan(kc)
    n = int(np.prod(steps))
    dims = [str(x.shape[0] // n) if x.shape[0] is not None else f"({x.dim(0)} / {n})"]
    for k, (s, (a, b)) in enumerate(zip(steps, pairs)):
        d = x.shape[k + 1]
        dims.append(str(d * s - a - b) if d is not None else f"({x.dim(k + 1)} * {s} - {a + b})")
    return [dims + x.dims[m + 1:]]


def _loops(kc: KernelContext, m: int) -> List[str]:
    """Shared set-up: R (elements per row after the spatial dims), Q (output spatial rows)."""
    out = kc.out
    return [f"const int64_t R = {out.dim_product(m + 1)};",
            f"const int64_t Q = {out.dim_product(1, m + 1)};",
            f"const int64_t OB = {out.dim(0)};"]


def s2b_checks(kc: KernelContext) -> None:
    """SpaceToBatchND's run-time checks of dims fed (the CUDA kernel's too)."""
    x = kc.inputs[0]
    _, steps, pairs = _plan(kc)
    for k, (s, (a, b)) in enumerate(zip(steps, pairs)):
        if x.shape[k + 1] is None:
            kc.check(f"({x.dim(k + 1)} + {a + b}) % {s} == 0",
                     f"padded_shape[{k}]=%lld is not divisible by block_shape[{k}]={s}",
                     f"(long long)({x.dim(k + 1)} + {a + b})")


def b2s_checks(kc: KernelContext) -> None:
    """BatchToSpaceND's run-time checks of dims fed (the CUDA kernel's too)."""
    x = kc.inputs[0]
    _, steps, pairs = _plan(kc)
    n = int(np.prod(steps))
    if x.shape[0] is None:
        kc.check(f"{x.dim(0)} % {n} == 0",
                 f"Input batch dimension (%lld) is not divisible by product of block sizes ({n})",
                 f"(long long){x.dim(0)}")
    for k, (s, (a, b)) in enumerate(zip(steps, pairs)):
        if x.shape[k + 1] is None:
            kc.check(f"{x.dim(k + 1)} * {s} - {a + b} >= 0",
                     "Negative output dimension size caused by overly large crop values")


def _s2b_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    m, steps, pairs = _plan(kc)
    s2b_checks(kc)
    lines = _loops(kc, m) + [f"const int64_t N = {x.dim(0)};",
                             "for (int64_t ob = 0; ob < OB; ob++) {",
                             "    const int64_t b = ob % N; int64_t off = ob / N;"]
    for k in range(m - 1, -1, -1):
        lines.append(f"    const int64_t o{k} = off % {steps[k]}; off /= {steps[k]};")
    lines += ["    for (int64_t q = 0; q < Q; q++) {",
              "        int64_t rest = q, src = 0, scale = 1; int inside = 1;"]
    for k in range(m - 1, -1, -1):
        s, (a, _) = steps[k], pairs[k]
        lines += [f"        {{ const int64_t p = (rest % {out.dim(k + 1)}) * {s} + o{k} - {a};",
                  f"          rest /= {out.dim(k + 1)};",
                  f"          if (p < 0 || p >= {x.dim(k + 1)}) inside = 0;",
                  f"          src += p * scale; scale *= {x.dim(k + 1)}; }}"]
    lines += [f"        {out.ctype} *dst = {out.data} + (ob * Q + q) * R;",
              f"        if (inside) memcpy(dst, {x.data} + (b * scale + src) * R, "
              f"(size_t)R * sizeof({x.ctype}));",
              f"        else memset(dst, 0, (size_t)R * sizeof({out.ctype}));",
              "    }",
              "}"]
    return f"if ({out.size} > 0) {{\n" + "\n".join("    " + ln for ln in lines) + "\n}"


def _b2s_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    m, steps, pairs = _plan(kc)
    b2s_checks(kc)
    lines = _loops(kc, m) + ["for (int64_t b = 0; b < OB; b++) {",
                             "    for (int64_t q = 0; q < Q; q++) {",
                             "        int64_t rest = q, src = 0, scale = 1, off = 0, "
                             "oscale = 1;"]
    for k in range(m - 1, -1, -1):
        s, (a, _) = steps[k], pairs[k]
        lines += [f"        {{ const int64_t t = rest % {out.dim(k + 1)} + {a};",
                  f"          rest /= {out.dim(k + 1)};",
                  f"          src += (t / {s}) * scale; scale *= {x.dim(k + 1)};",
                  f"          off += (t % {s}) * oscale; oscale *= {s}; }}"]
    lines += [f"        memcpy({out.data} + (b * Q + q) * R, "
              f"{x.data} + ((off * OB + b) * scale + src) * R, (size_t)R * sizeof({x.ctype}));",
              "    }",
              "}"]
    return f"if ({out.size} > 0) {{\n" + "\n".join("    " + ln for ln in lines) + "\n}"


set_c_kernel("SpaceToBatchND", _s2b_c, _s2b_dims)
set_c_kernel("BatchToSpaceND", _b2s_c, _b2s_dims)
