"""The C lowering of ``Multinomial`` (``compiler/ops/multinomial.py``): per row, the finite
logits' maximum, a running sum of ``exp(logit - max)`` in double as the CDF, and for each draw
the upper bound of ``u * total`` in it by binary search. ``u`` comes from ``philox.c.j2``'s
helpers exactly as the reference draws it (words ``2 (k % 2)``, ``2 (k % 2) + 1`` of the block
at the run's stream offset plus ``k // 2``), so both backends draw the same indices.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.array.common import _check_alloc
from compiler.codegen.c_ops.random import _u64
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.random import BLOCKS_PER_OUTPUT


def _num_samples(kc: KernelContext) -> str:
    kc.check_scalar(1, "num_samples")
    return f"((int64_t){kc.inputs[1].data}[0])"


def _multinomial_c(kc: KernelContext) -> str:
    kc.module.add_global(kc.render("philox.c.j2", part="helpers"))
    logits, out = kc.inputs[0], kc.outputs[0]
    n = _num_samples(kc)
    kc.check(f"{n} >= 0", "num_samples should be nonnegative, got %lld", f"(long long){n}")
    kc.check(f"{logits.dim(1)} > 0", "num_classes should be positive, got %lld",
             f"(long long){logits.dim(1)}")
    _check_alloc(kc, [logits.dim(0), n], out.dtype.itemsize)
    stream = kc.module.stream_index(kc.node.name)
    lines = [
        f"const int64_t batch = {logits.dim(0)}, classes = {logits.dim(1)}, n = {n};",
        f"const {logits.ctype} *lg = {logits.data};",
        f"{out.ctype} *o = {out.data};",
        f"const uint64_t seed = {_u64(kc.attr('seed'))}, seed2 = {_u64(kc.attr('seed2'))};",
        "if (batch > 0 && n > 0) {",
        "    const uint64_t reserve = (uint64_t)batch * (uint64_t)((n + 3) / 4 * 4);",
        f"    const uint64_t base = __atomic_fetch_add(flowc_rt->streams[{stream}], "
        f"reserve * {BLOCKS_PER_OUTPUT}u, __ATOMIC_RELAXED);",
        "    double *cdf = (double *)malloc((size_t)classes * sizeof(double));",
        "    if (!cdf) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        "    for (int64_t b = 0; b < batch; b++) {",
        f"        const {logits.ctype} *row = lg + b * classes;",
        "        double top = 0.0;",
        "        int any = 0;",
        "        for (int64_t j = 0; j < classes; j++) {",
        "            const double v = (double)row[j];",
        "            if (isfinite(v) && (!any || v > top)) { top = v; any = 1; }",
        "        }",
        "        double total = 0.0;",
        "        for (int64_t j = 0; j < classes; j++) {",
        "            if (isfinite((double)row[j])) total += exp((double)row[j] - top);",
        "            cdf[j] = total;",
        "        }",
        "        for (int64_t j = 0; j < n; j++) {",
        "            const uint64_t k = (uint64_t)(b * n + j);",
        "            uint32_t x[4];",
        "            flowc_philox(base + k / 2, seed, seed2, x);",
        "            const double find = flowc_u64_to_double(x[2 * (k % 2)], x[2 * (k % 2) + 1])"
        " * total;",
        "            int64_t lo = 0, hi = classes;      /* the first cdf[i] > find */",
        "            while (lo < hi) {",
        "                const int64_t mid = lo + (hi - lo) / 2;",
        "                if (cdf[mid] > find) hi = mid; else lo = mid + 1;",
        "            }",
        f"            o[b * n + j] = ({out.ctype})lo;",
        "        }",
        "    }",
        "    free(cdf);",
        "}",
    ]
    return "\n".join(lines)


def _multinomial_dims(kc: KernelContext) -> List[List[str]]:
    return [[kc.inputs[0].dim(0), _num_samples(kc)]]


set_c_kernel("Multinomial", _multinomial_c, _multinomial_dims)
