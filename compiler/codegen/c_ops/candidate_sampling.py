"""The C lowering of the candidate samplers (``compiler/ops/candidate_sampling.py``):
UniformCandidateSampler and LogUniformCandidateSampler.

The C kernel draws the same Philox bits as the numpy reference (``philox.c.j2``'s helpers,
draw ``k`` from words ``2 (k % 2)`` and ``2 (k % 2) + 1`` of the block at the run's stream
offset plus ``k // 2``), with the same integer arithmetic and the C library's ``exp``/``log``,
so both draw the same candidates. With ``unique=True`` it keeps the distinct classes in an
open-addressing hash set, in the order first drawn.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.random import _u64
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.random import BLOCKS_PER_OUTPUT


_C_HELPERS = r"""
static uint64_t flowc_sampler_bits(uint64_t base, uint64_t k, uint64_t seed, uint64_t seed2,
                                   uint32_t *first, uint32_t *second) {
    uint32_t x[4];
    flowc_philox(base + k / 2, seed, seed2, x);
    *first = x[2 * (k % 2)];
    *second = x[2 * (k % 2) + 1];
    return (uint64_t)*first | ((uint64_t)*second << 32);
}

static double flowc_expected_count(double p, int64_t num_sampled, int64_t num_tries) {
    if (num_tries == num_sampled) return p * (double)num_sampled;
    return -expm1((double)num_tries * log1p(-p));
}
"""


def _c_draw(kind: str) -> str:
    """C statements setting ``int64_t v`` from draw ``k`` (``range_max``, ``log_range``)."""
    if kind == "uniform":
        return ("uint32_t wa, wb;\n"
                "const int64_t v = (int64_t)(flowc_sampler_bits(base, k, seed, seed2, &wa, &wb)"
                " % (uint64_t)range_max);")
    return ("uint32_t wa, wb;\n"
            "(void)flowc_sampler_bits(base, k, seed, seed2, &wa, &wb);\n"
            "const double u = flowc_u64_to_double(wa, wb);\n"
            "const int64_t v = ((int64_t)exp(u * log_range) - 1) % range_max;")


def _c_prob(kind: str, cls: str) -> str:
    if kind == "uniform":
        return "(1.0 / (double)range_max)"
    return f"(log(((double){cls} + 2.0) / ((double){cls} + 1.0)) / log_range)"


def _sampler_c(kc: KernelContext, kind: str) -> str:
    kc.module.add_global(kc.render("philox.c.j2", part="helpers"))
    kc.module.add_global(_C_HELPERS)
    n, range_max, unique = kc.attr("num_sampled"), kc.attr("range_max"), kc.attr("unique")
    num_true = kc.attr("num_true")
    true_classes = kc.inputs[0]
    sampled, true_count, sampled_count = kc.outputs
    kc.check_dims_equal(true_classes.dim(1), str(num_true), "true_classes columns vs num_true")
    stream = kc.module.stream_index(kc.node.name)
    draw = _c_draw(kind).replace("\n", "\n        ")
    lines = [f"const int64_t range_max = INT64_C({range_max}), n = {n};",
             f"const double log_range = log((double)range_max + 1.0);",
             "(void)log_range;",
             f"const uint64_t seed = {_u64(kc.attr('seed'))}, seed2 = {_u64(kc.attr('seed2'))};",
             f"const int64_t *tc = {true_classes.data};",
             f"const int64_t ntc = {true_classes.size};",
             "for (int64_t i = 0; i < ntc; i++)",
             "    if (tc[i] < 0 || tc[i] >= range_max) "
             + kc.fail(f"true_classes[%lld, %lld] = %lld is not in [0, {range_max})",
                       f"(long long)(i / {num_true})", f"(long long)(i % {num_true})",
                       "(long long)tc[i]"),
             f"int64_t *out = {sampled.data};",
             "const uint64_t base = __atomic_fetch_add(flowc_rt->streams"
             f"[{stream}], (uint64_t)n * {BLOCKS_PER_OUTPUT}u, __ATOMIC_RELAXED);",
             "int64_t tries = 0;"]
    if not unique:
        lines += ["for (uint64_t k = 0; k < (uint64_t)n; k++) {",
                  f"        {draw}",
                  "        out[k] = v;",
                  "}",
                  "tries = n;"]
    else:
        cap = 2                                # a power of two, at least 2 n: half full at most
        while cap < 2 * n:
            cap *= 2
        bits = cap.bit_length() - 1
        lines += [f"uint64_t *seen = (uint64_t *)calloc({cap}, sizeof(uint64_t));",
                  "if (!seen) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
                  "int64_t got = 0;",
                  "for (uint64_t k = 0; got < n; k++) {",
                  f"        {draw}",
                  "        uint64_t h = ((uint64_t)v * UINT64_C(0x9E3779B97F4A7C15)) >> "
                  f"{64 - bits};",
                  f"        while (seen[h] && seen[h] != (uint64_t)v + 1) h = (h + 1) & {cap - 1};",
                  "        if (!seen[h]) { seen[h] = (uint64_t)v + 1; out[got++] = v; }",
                  "        tries = (int64_t)k + 1;",
                  "}",
                  "free(seen);"]
    lines += [f"float *tcount = {true_count.data};",
              "for (int64_t i = 0; i < ntc; i++)",
              f"    tcount[i] = (float)flowc_expected_count({_c_prob(kind, 'tc[i]')}, n, tries);",
              f"float *scount = {sampled_count.data};",
              "for (int64_t i = 0; i < n; i++)",
              f"    scount[i] = (float)flowc_expected_count({_c_prob(kind, 'out[i]')}, n, tries);"]
    return "\n".join(lines)


def _sampler_c_dims(kc: KernelContext) -> List[List[str]]:
    n, num_true = kc.attr("num_sampled"), kc.attr("num_true")
    return [[str(n)], [kc.inputs[0].dim(0), str(num_true)], [str(n)]]


for _name, _kind in (("UniformCandidateSampler", "uniform"),
                     ("LogUniformCandidateSampler", "log_uniform")):
    set_c_kernel(_name, lambda kc, kind=_kind: _sampler_c(kc, kind), _sampler_c_dims)
