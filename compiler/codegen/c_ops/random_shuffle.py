"""The C lowering of RandomShuffle (``compiler/ops/random_shuffle.py``): the reference's
Fisher-Yates on the node's Philox stream (``philox.c.j2``'s generator), then the rows copied
in that order."""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _u64(value: int) -> str:
    return f"UINT64_C({value & (2**64 - 1)})"


def _shuffle_c(kc: KernelContext) -> str:
    x = kc.inputs[0]
    kc.module.add_global(kc.render("philox.c.j2", part="helpers"))
    stream = kc.module.stream_index(kc.node.name)
    rows = x.dim(0) if x.rank else "1"
    inner = x.dim_product(1) if x.rank else "1"
    T = x.ctype
    return "\n".join([
        f"const {T} *x = {x.data};",
        f"{T} *o = {kc.out.data};",
        f"const int64_t rows = {rows}, inner = {inner};",
        f"if (rows <= 1 || rows * inner <= 1) {{",
        f"    if (rows * inner > 0) memcpy(o, x, (size_t)(rows * inner) * sizeof({T}));",
        "} else {",
        "    int64_t *order = (int64_t *)malloc((size_t)rows * sizeof(int64_t));",
        "    if (!order) " + kc.fail("out of memory in RandomShuffle",
                                     code="FLOWC_RESOURCE_EXHAUSTED"),
        "    for (int64_t i = 0; i < rows; i++) order[i] = i;",
        f"    const uint64_t seed = {_u64(kc.attr('seed'))}, seed2 = {_u64(kc.attr('seed2'))};",
        "    /* this run's words: (rows - 1 + 3) / 4 blocks of the node's stream */",
        f"    uint64_t index = __atomic_fetch_add(flowc_rt->streams[{stream}],",
        "        (uint64_t)((rows - 1 + 3) / 4), __ATOMIC_RELAXED);",
        "    uint32_t w[4];",
        "    int used = 4;",
        "    for (int64_t i = 0; i + 1 < rows; i++) {",
        "        if (used == 4) { flowc_philox(index++, seed, seed2, w); used = 0; }",
        "        const int64_t j = i + (int64_t)((uint64_t)w[used++] % (uint64_t)(rows - i));",
        "        const int64_t t = order[i]; order[i] = order[j]; order[j] = t;",
        "    }",
        "    for (int64_t i = 0; i < rows; i++)",
        f"        memcpy(o + i * inner, x + order[i] * inner, (size_t)inner * sizeof({T}));",
        "    free(order);",
        "}"])


set_c_kernel("RandomShuffle", _shuffle_c, lambda kc: [kc.inputs[0].dims])
