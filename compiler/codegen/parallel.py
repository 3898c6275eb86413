"""Which loops of the generated C run on several cores (OpenMP), and from what size.

The pragma itself is written by the ``omp_for`` macro of ``codegen_templates/c/parallel.c.j2``,
the one place that holds the threshold; this module reads it for the Python side (tests,
benchmarks).
"""
from __future__ import annotations

from compiler.codegen import templates


def _macros(target_name: str = "c"):
    return templates.environment(target_name).get_template("parallel.c.j2").module


def parallel_min_elements() -> int:
    """Loops over fewer elements than this stay single-threaded."""
    return int(_macros().PARALLEL_MIN_ELEMENTS)


def reduction_chunk() -> int:
    """A large full reduction is split into partial results of this many elements each (fixed,
    so the result does not depend on the number of threads)."""
    return int(_macros().REDUCTION_CHUNK)
