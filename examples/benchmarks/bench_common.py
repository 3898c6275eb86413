"""Shared helpers of the benchmarks: timing, optional frameworks, and the printed table."""
from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import numpy as np

EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def import_example(name: str):
    """Import ``examples/<name>.py`` (the examples folder is not a package)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return importlib.import_module(name)


THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "FLOWC_NUM_THREADS")


def add_threads_argument(parser) -> None:
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for every BLAS, flowc's parallel loops, PyTorch and "
                        "TensorFlow (default: the libraries' own); 1 gives steadier numbers on "
                        "a small or busy machine")


def apply_threads(threads: Optional[int]) -> None:
    """Restart this script with the BLAS thread variables set (they are read when a BLAS library
    loads, so setting them after numpy is imported would have no effect)."""
    if threads is None or all(os.environ.get(v) == str(threads) for v in THREAD_VARIABLES):
        return
    for v in THREAD_VARIABLES:
        os.environ[v] = str(threads)
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable] + sys.argv)


def apply_framework_threads(torch, tf, threads: Optional[int]) -> None:
    """Give PyTorch and TensorFlow (when imported) the same thread count as BLAS."""
    if not threads:
        return
    if torch is not None:
        torch.set_num_threads(threads)
    if tf is not None:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def optional_import(name: str):
    """The module, or None when it is not installed (or fails to import)."""
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median wall time of one call of ``fn`` over ``repeats`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@dataclass
class Row:
    name: str
    seconds: Optional[float]      # None: not measured (the note says why)
    note: str = ""


def environment_line(torch=None, tf=None) -> str:
    parts = [f"python {platform.python_version()}", f"numpy {np.__version__}",
             f"{os.cpu_count()} CPUs",
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"]
    parts.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch
                 else "torch not installed")
    parts.append(f"tensorflow {tf.__version__}" if tf else "tensorflow not installed")
    return ", ".join(parts)


def print_table(title: str, rows: List[Row], baseline: str, unit: str = "ms",
                work: Optional[float] = None, work_unit: str = "") -> None:
    """One table: time per step, optional throughput (``work`` per step), and the ratio of each
    row's time to the ``baseline`` row's (printed below the table)."""
    scale = {"ms": 1e3, "us": 1e6}[unit]
    base = next(r.seconds for r in rows if r.name == baseline)
    head = f"{'':<44}{unit + '/step':>12}"
    if work is not None:
        head += f"{work_unit + '/s':>16}"
    head += f"{'ratio':>10}"
    print(title)
    print(head)
    for r in rows:
        if r.seconds is None:
            print(f"{r.name:<44}{'-':>12}" + (f"{'-':>16}" if work is not None else "")
                  + f"{'-':>10}  {r.note}")
            continue
        line = f"{r.name:<44}{r.seconds * scale:>12.3f}"
        if work is not None:
            line += f"{work / r.seconds:>16,.0f}"
        line += f"{r.seconds / base:>10.2f}"
        print(line + (f"  {r.note}" if r.note else ""))
    print(f"ratio: time per step divided by that of '{baseline}' (lower is faster)")


# --- the one table of run_all.py ---------------------------------------------------------
FLOWC = "flowc C"
SYSTEMS = (FLOWC, "numpy", "PyTorch eager", "torch.compile", "TF1 session", "tf.function",
           "tf.function XLA", "JAX", "onnxruntime")
NOT_INSTALLED = "not installed"


@dataclass
class Result:
    """One system on one benchmark: seconds per step (None: not measured, ``note`` says why)
    and the work one step does (``work`` of ``work_unit``, for the rate column)."""
    benchmark: str
    system: str
    seconds: Optional[float]
    work: float = 0.0
    work_unit: str = ""
    note: str = ""


@dataclass
class Frameworks:
    """The peers found in this process (None when not installed) and the thread count given
    to them (None: each library's default)."""
    torch: object = None
    tf: object = None
    threads: Optional[int] = None

    @classmethod
    def load(cls, threads: Optional[int] = None) -> "Frameworks":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        torch, tf = optional_import("torch"), optional_import("tensorflow")
        apply_framework_threads(torch, tf, threads)
        return cls(torch, tf, threads)

    def missing(self, benchmark: str, systems: Sequence[str]) -> List[Result]:
        """'not installed' results for those of ``systems`` whose library is missing."""
        needs = {"PyTorch eager": self.torch, "torch.compile": self.torch,
                 "TF1 session": self.tf, "tf.function": self.tf, "tf.function XLA": self.tf}
        return [Result(benchmark, s, None, note=NOT_INSTALLED)
                for s in systems if s in needs and needs[s] is None]


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def print_summary(results: Sequence[Result], title: str) -> None:
    """One table: every benchmark, every system, time per step, the rate, and flowc/peer (the
    flowc C row's time divided by the row's: below 1, flowc is faster)."""
    print(title)
    head = (f"{'benchmark':<34}{'system':<34}{'ms/step':>12}{'rate':>22}{'flowc/peer':>12}")
    print(head)
    print("-" * len(head))
    order: List[str] = []
    for r in results:
        if r.benchmark not in order:
            order.append(r.benchmark)
    for bench in order:
        rows = [r for r in results if r.benchmark == bench]
        flowc = next((r.seconds for r in rows if r.system == FLOWC), None)
        for r in rows:
            if r.seconds is None:
                print(f"{bench:<34}{r.system:<34}{'-':>12}{'-':>22}{'-':>12}  {r.note}")
                continue
            rate = format_rate(r.work / r.seconds, r.work_unit) if r.work else "-"
            ratio = f"{flowc / r.seconds:.2f}" if flowc and r.system != FLOWC else "-"
            note = f"  {r.note}" if r.note else ""
            print(f"{bench:<34}{r.system:<34}{r.seconds * 1e3:>12.3f}{rate:>22}{ratio:>12}{note}")
        bench = ""
    print("flowc/peer: flowc C's time per step divided by the row's (below 1: flowc is faster)")


def format_rate(per_second: float, unit: str) -> str:
    if per_second >= 1e4 and unit in ("ops", "examples"):
        return f"{per_second:,.0f} {unit}/s"
    return f"{per_second:,.2f} {unit}/s"


def run_alone(doc: str, title: str, measure: Callable, add_arguments: Optional[Callable] = None) -> None:
    """The ``main()`` of a benchmark file run by itself: ``--quick``, ``--threads T`` (and the
    file's own arguments), the environment line, then the table of ``measure(fw, args)``."""
    import argparse
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    add_threads_argument(parser)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    fw = Frameworks.load(args.threads)
    print(environment_line(fw.torch, fw.tf))
    print_summary(measure(fw, args), title)
