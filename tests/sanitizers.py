"""Run tests with every compiled kernel built under AddressSanitizer and UBSan.

    python3 tests/sanitizers.py                  # the sanitizer job's tests: SUITE
    python3 tests/sanitizers.py --durations=10   # the same, with pytest's options
    python3 tests/sanitizers.py tests/dsl/test_variables.py -k scatter    # any tests, sanitized

A child pytest runs with ``FLOWC_SANITIZE=address,undefined`` (the C modules, the C library
runtime and the fast-call extension are built with ``-fsanitize=address,undefined
-fno-sanitize-recover=all``), AddressSanitizer's runtime preloaded (Python is not sanitized),
leak checking off, and every report fatal and written to a file under a fresh folder. The run
fails when the child fails, stops, or leaves any report; the reports are printed. The child
shares the compile cache (``FLOWC_CACHE_DIR``): sanitized modules have keys of their own.

``python3 -m pytest -m sanitize`` runs the same job as a test
(``tests/compiler/codegen/test_sanitized_kernels.py``); ``.ci/run`` runs it after the suite.
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import List, Sequence

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from runtime import sanitize  # noqa: E402

# The tests the sanitizer job runs: the hostile inputs of every kernel that indexes with data
# (tests/compiler/codegen/test_kernel_bounds.py) and the tests of those kernels against the
# interpreter: row gathers and scatters, segment reductions, permutations, set differences,
# bincounts and shuffles, candidate samplers, GatherV2, OneHot,
# Range, Fill and Slice, sparse cross entropy, partition and stitch (embedding lookups),
# TensorArrays.
# Chosen to stay within a few minutes of sanitized compiles on two cores. The GPU kernels'
# cases are left out (``-k "not simulator"``): the CUDA simulator's modules are not
# sanitized, and AddressSanitizer does not follow its fibers.
SUITE = (
    "tests/compiler/codegen/test_kernel_bounds.py",
    "tests/compiler/codegen/test_sparse_rows.py",
    "tests/compiler/ops/test_segment_sum_kernel.py",
    "tests/compiler/ops/test_segment_kernels.py",
    "tests/compiler/ops/test_index_sets_kernels.py",
    "tests/compiler/ops/test_candidate_samplers.py",
    "tests/compiler/ops/test_array_ops.py::test_gather",
    "tests/compiler/ops/test_array_ops.py::test_one_hot",
    "tests/compiler/ops/test_array_ops.py::test_range",
    "tests/compiler/ops/test_array_ops.py::test_fill_zeros_ones",
    "tests/compiler/ops/test_array_ops.py::test_slice",
    "tests/compiler/ops/test_nn_grad_ops.py::test_unsorted_segment_sum",
    "tests/compiler/ops/test_nn_grad_ops.py::test_sparse_cross_entropy_bad_labels_and_shapes",
    "tests/compiler/ops/test_tensor_array_ops.py",
    "tests/dsl/test_embedding.py",
    "-k", "not simulator",
)
# What in a child's output shows a sanitizer report (besides the report files).
REPORT_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer",
                  "SUMMARY: UndefinedBehaviorSanitizer", "SUMMARY: AddressSanitizer")


@dataclass
class SanitizedRun:
    returncode: int
    output: str               # the child's stdout and stderr
    reports: List[str]        # the text of each sanitizer report file

    @property
    def clean(self) -> bool:
        return (self.returncode == 0 and not self.reports
                and not any(m in self.output for m in REPORT_MARKERS))

    def summary(self) -> str:
        parts = [f"pytest exit status {self.returncode}"]
        parts += [f"--- sanitizer report ---\n{r.strip()}" for r in self.reports]
        parts.append("--- output (last 6000 characters) ---\n" + self.output[-6000:])
        return "\n".join(parts)


def environment(log_prefix: str) -> dict:
    """This process's environment plus a sanitized run's (``runtime.sanitize``)."""
    env = dict(os.environ)
    env.update(sanitize.preload_environment(sanitize.SANITIZERS, os.environ.get("CC", "cc"),
                                            log_prefix=log_prefix))
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONFAULTHANDLER"] = "1"          # an abort names the test that was running
    env.pop("FLOWC_CUDA_SIMULATOR", None)    # the simulator's builds are not sanitized
    return env


def run_python(args: Sequence[str], timeout: float = 1200) -> SanitizedRun:
    """``python3 args`` in the repository root with the sanitizers on; its reports."""
    with tempfile.TemporaryDirectory(prefix="flowc-sanitize-") as logs:
        prefix = os.path.join(logs, "report")
        try:
            proc = subprocess.run([sys.executable] + list(args), cwd=ROOT,
                                  env=environment(prefix), capture_output=True, text=True,
                                  timeout=timeout)
            code, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            code = -1
            output = (_text(e.stdout) + _text(e.stderr)
                      + f"\nsanitized run stopped after {timeout:.0f} s")
        reports = []
        for path in sorted(glob.glob(prefix + ".*")):
            with open(path, errors="replace") as f:
                text = f.read()
            if any(m in text for m in REPORT_MARKERS):      # not a warning alone
                reports.append(text)
    return SanitizedRun(code, output, reports)


def run_pytest(args: Sequence[str] = SUITE, timeout: float = 1200) -> SanitizedRun:
    """A child ``pytest args`` (default: SUITE) with the sanitizers on."""
    return run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", *args], timeout)


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def main(argv: Sequence[str]) -> int:
    """``argv``: pytest's arguments; without a test path among them, SUITE's are added."""
    args = list(argv)
    if not any(not a.startswith("-") for a in args):
        args = list(SUITE) + args
    run = run_pytest(args)
    sys.stdout.write(run.output)
    for report in run.reports:
        sys.stdout.write("\n--- sanitizer report ---\n" + report)
    if not run.clean:
        print(f"\nsanitizers: FAILED (pytest exit status {run.returncode}, "
              f"{len(run.reports)} report(s))")
        return 1
    print("\nsanitizers: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
