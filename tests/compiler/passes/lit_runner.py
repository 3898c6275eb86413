"""Lit-style pass tests: one ``.ir`` file holds the flags, the input graph and the exact IR
expected after the passes (the printer is deterministic, so the comparison is exact)::

    // RUN: --passes=fold-constants,cse
    // REQUIRES: Transpose, Reshape        (optional: skip until these ops are registered)
    graph @t {
      ...input...
    }
    // EXPECT:
    graph @t {
      ...expected output...
    }

Instead of ``// EXPECT:`` a file may end with ``// EXPECT-ERROR: text``: the pipeline must
fail with an error whose message contains ``text``. Other ``//`` lines are comments. Files
may use the test-only stateful op ``_LitStateful(x)`` (see ``lit_ops``).

An empty ``// RUN:`` runs the default pipeline. ``python3 tests/compiler/passes/lit_runner.py --update
FILE...`` rewrites the expected part of each file from what the passes produce now (read the
diff before committing it).
"""
from __future__ import annotations

import contextlib
import difflib
import io
import os
import sys
from dataclasses import dataclass
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from compiler.options import parse_flags  # noqa: E402
from compiler.ir.parser import parse_graph  # noqa: E402
from compiler.ir.printer import print_graph  # noqa: E402
from compiler.ir import op_registry as registry  # noqa: E402
from compiler.ir.op_registry import has_op, register_op  # noqa: E402
from compiler.passes.manager import PassManager  # noqa: E402
from runtime.errors import FlowcError  # noqa: E402

LIT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lit")
EXPECT = "// EXPECT:"
EXPECT_ERROR = "// EXPECT-ERROR:"
STATEFUL_TEST_OP = "_LitStateful"


@contextlib.contextmanager
def lit_ops():
    """Registers, for the block, a stateful test op the .ir files use: x + 1, declared stateful
    (like a random op or a queue pop: what passes must leave alone)."""
    added = not has_op(STATEFUL_TEST_OP)
    if added:
        register_op(STATEFUL_TEST_OP, inputs=["x: T"], outputs=["y: T"], attrs=["T: {numeric}"],
                    shape=lambda ctx: [ctx.input_shape(0)], kernel=lambda ctx, x: x + 1,
                    stateful=True, doc="Test-only: x + 1, declared stateful.")
    try:
        yield
    finally:
        if added:       # the registry has no public removal; keep other tests' op lists clean
            registry._REGISTRY.pop(STATEFUL_TEST_OP, None)


class LitFormatError(Exception):
    """A .ir test file that does not follow the format."""


@dataclass
class LitCase:
    path: str
    flags: Optional[str]             # None: the file has no RUN line
    requires: List[str]
    input_text: str
    expected: Optional[str]          # expected IR text, or None for an error case
    expected_error: Optional[str]


def read_case(path: str) -> LitCase:
    """Split a test file into its directives, input and expectation."""
    with open(path) as f:
        lines = f.read().splitlines()
    flags: Optional[List[str]] = None
    requires: List[str] = []
    for k, line in enumerate(lines):
        s = line.strip()
        if s.startswith("// RUN:"):
            flags = (flags or []) + [s[len("// RUN:"):].strip()]
        elif s.startswith("// REQUIRES:"):
            requires += [op.strip() for op in s[len("// REQUIRES:"):].split(",") if op.strip()]
        elif s == EXPECT:
            expected = "\n".join(lines[k + 1:]).strip("\n") + "\n"
            return LitCase(path, _join(flags), requires, "\n".join(lines[:k]) + "\n", expected, None)
        elif s.startswith(EXPECT_ERROR):
            return LitCase(path, _join(flags), requires, "\n".join(lines[:k]) + "\n", None,
                           s[len(EXPECT_ERROR):].strip())
    raise LitFormatError(f"{path}: no '{EXPECT}' or '{EXPECT_ERROR}' line")


def _join(flags: Optional[List[str]]) -> Optional[str]:
    return None if flags is None else " ".join(flags)


def missing_ops(case: LitCase) -> List[str]:
    return [op for op in case.requires if not has_op(op)]


def run_case(case: LitCase) -> str:
    """Parse the input, run the RUN line's passes (FLOWC_FLAGS ignored) and print the result."""
    if case.flags is None:
        raise LitFormatError(f"{case.path}: no '// RUN:' line")
    graph = parse_graph(case.input_text, os.path.basename(case.path))
    PassManager(parse_flags(case.flags), out=io.StringIO(), read_environment=False).run(graph)
    return print_graph(graph)


def check_case(case: LitCase) -> Optional[str]:
    """None when the case passes, else a message (a diff for output mismatches)."""
    name = os.path.relpath(case.path, LIT_DIR)
    if case.expected_error is not None:
        try:
            got = run_case(case)
        except FlowcError as e:
            if case.expected_error in str(e):
                return None
            return f"{name}: expected an error containing {case.expected_error!r}, got:\n{e}"
        return f"{name}: expected an error containing {case.expected_error!r}, but the passes gave:\n{got}"
    got = run_case(case)
    if got == case.expected:
        return None
    diff = difflib.unified_diff(case.expected.splitlines(True), got.splitlines(True),
                                fromfile=f"{name} (expected)", tofile=f"{name} (actual)")
    return "".join(diff)


def all_cases() -> List[str]:
    found = []
    for folder, _, files in os.walk(LIT_DIR):
        found += [os.path.join(folder, f) for f in files if f.endswith(".ir")]
    return sorted(found)


def update(path: str) -> None:
    """Rewrite the expected section of ``path`` with the current output."""
    case = read_case(path)
    if case.expected is None:
        return
    got = run_case(case)
    with open(path, "w") as f:
        f.write(case.input_text + EXPECT + "\n" + got)


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "--update":
        sys.exit("usage: python3 tests/compiler/passes/lit_runner.py --update FILE.ir...")
    with lit_ops():
        for p in args[1:]:
            update(p)
            print(f"updated {p}")
