"""The machine's memory bandwidth, measured here: STREAM's triad ``a[i] = b[i] + s * c[i]`` on
float32 arrays, in C compiled at -O3 by flowc's own build helper (so with the same compiler
and flags as flowc's kernels), loaded with cffi.

    python3 examples/benchmarks/stream_triad.py [--n N] [--repeats R]

Bandwidth counts STREAM's way: 3 arrays of n floats moved per triad (12 bytes per element).
It is measured twice: into an output allocated once (the machine's bandwidth) and into an
output allocated for each call, as a step's fresh output tensor is (the difference is the cost
of the operating system's first-touch page faults). Both on one thread and on all (OpenMP).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

import cffi
import numpy as np

from bench_common import median_seconds

from compiler.codegen.build import build_shared_object  # noqa: E402

TRIAD_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <omp.h>

void triad(float *restrict a, const float *restrict b, const float *restrict c, float s,
           int64_t n, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

/* The triad into an output allocated for this call (freed before returning). */
int triad_fresh(const float *restrict b, const float *restrict c, float s, int64_t n,
                int threads) {
    float *a = aligned_alloc(64, ((size_t)n * sizeof(float) + 63) & ~(size_t)63);
    if (!a) return 1;
    triad(a, b, c, s, n, threads);
    volatile float keep = a[n - 1];
    (void)keep;
    free(a);
    return 0;
}
"""
CDEF = """
void triad(float *a, const float *b, const float *c, float s, int64_t n, int threads);
int triad_fresh(const float *b, const float *c, float s, int64_t n, int threads);
"""


@dataclass
class TriadResult:
    threads: int
    reused_gbs: float          # output allocated once
    fresh_gbs: float           # output allocated per call


def triad_library():
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    built = build_shared_object(TRIAD_SOURCE, features=("openmp",), name="stream_triad")
    return ffi, ffi.dlopen(built.path)


def measure_triad(n: int, repeats: int, threads: int) -> TriadResult:
    """GB/s of the triad on ``threads`` threads (checked against numpy once)."""
    ffi, lib = triad_library()
    rng = np.random.default_rng(0)
    b, c = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a = np.empty_like(b)
    pa, pb, pc = (ffi.cast("float *", ffi.from_buffer(v)) for v in (a, b, c))
    lib.triad(pa, pb, pc, 3.0, n, threads)
    np.testing.assert_allclose(a, b + np.float32(3.0) * c, rtol=1e-6, atol=1e-6)
    reused = median_seconds(lambda: lib.triad(pa, pb, pc, 3.0, n, threads), repeats)
    fresh = median_seconds(lambda: lib.triad_fresh(pb, pc, 3.0, n, threads), repeats)
    moved = 12.0 * n
    return TriadResult(threads, moved / reused / 1e9, moved / fresh / 1e9)


def main() -> None:
    import os
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    for threads in sorted({1, os.cpu_count() or 1}):
        r = measure_triad(args.n, args.repeats, threads)
        print(f"triad, {args.n} float32, {threads} thread(s): {r.reused_gbs:.2f} GB/s "
              f"(output allocated per call: {r.fresh_gbs:.2f} GB/s)")


if __name__ == "__main__":
    main()
