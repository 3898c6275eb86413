"""Pass instruments: what runs around the passes of a pipeline, as objects, in the manner of
MLIR's ``PassInstrumentation``. The pass manager builds one of each that its options ask for
(``instruments_for``) and calls their hooks in order; a pass itself never prints, dumps, times
or verifies.

- ``VerifyIR`` (``--no-verify`` turns it off): the verifier on the input graph and after every
  pass that changed the graph; a failure is the pass's failure.
- ``PrintIR`` (``--print-ir-before-all``, ``--print-ir-after-all``, ``--print-ir-after=P``).
- ``DumpIR`` (``--dump-to=DIR``): ``NNNN.input.ir``, ``NNNN.after_<pass>.ir``, ``passes.tsv``
  and, when a pass fails, ``reproducer.ir`` (the IR before it and the flags that replay it).
- ``TimePasses`` (``--time-passes``): the timing table, after a pipeline that finished.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence, TextIO

from compiler.errors import CompileError
from compiler.ir.graph import Graph
from compiler.ir.printer import print_graph
from compiler.ir.verifier import verify
from compiler.options import PipelineOptions, format_flags

_DUMP_FILE = re.compile(r"^\d{4}\.(input|after_.+)\.ir$")
REPRODUCER = "reproducer.ir"
TABLE = "passes.tsv"


class PassFailure(CompileError):
    """A pass crashed, or left a graph the verifier rejects; ``pass_name`` says which pass."""

    def __init__(self, message: str, pass_name: Optional[str], cause: Optional[BaseException] = None):
        super().__init__(message)
        self.pass_name = pass_name
        self.node_name = getattr(cause, "node_name", None)
        self.location = getattr(cause, "location", None)


@dataclass
class PassRecord:
    """One pass that ran: what passes.tsv and the timing table show."""
    index: int
    name: str
    nodes_before: int
    nodes_after: int
    millis: float
    status: str                  # "changed", "unchanged" or "failed"

    @property
    def changed(self) -> bool:
        return self.status == "changed"


class PassInstrument:
    """Hooks around a pipeline's passes; each does nothing unless a subclass says otherwise.
    ``index`` counts passes from 1; ``names`` is the whole pipeline."""

    def before_pipeline(self, graph: Graph, names: Sequence[str]) -> None:
        pass

    def before_pass(self, name: str, index: int, graph: Graph) -> None:
        pass

    def check_after_pass(self, name: str, graph: Graph, changed: bool) -> None:
        """May raise: the pass then counts as failed (the verifier's hook)."""

    def on_failure(self, name: str, index: int, error: Exception) -> None:
        pass

    def after_pass(self, record: PassRecord, graph: Graph) -> None:
        pass

    def after_pipeline(self, records: List[PassRecord], finished: bool) -> None:
        """Runs also when a pass failed (``finished`` False)."""


class VerifyIR(PassInstrument):
    def before_pipeline(self, graph: Graph, names: Sequence[str]) -> None:
        try:
            verify(graph)
        except CompileError as e:
            raise PassFailure(f"verifier failed on the input graph, before any pass: {e}", None, e) from e

    def check_after_pass(self, name: str, graph: Graph, changed: bool) -> None:
        if not changed:
            return
        try:
            verify(graph)
        except CompileError as e:
            raise PassFailure(f"verifier failed after pass '{name}': {e}", name, e) from e


class PrintIR(PassInstrument):
    def __init__(self, out: TextIO, before_all: bool, after_all: bool, after: Sequence[str]):
        self.out, self.before_all, self.after_all, self.after = out, before_all, after_all, set(after)

    def _print(self, text: str, title: str) -> None:
        print(f"// ----- {title} -----", file=self.out)
        print(text, file=self.out, end="")

    def before_pass(self, name: str, index: int, graph: Graph) -> None:
        if self.before_all:
            self._print(print_graph(graph), f"IR before {name}")

    def after_pass(self, record: PassRecord, graph: Graph) -> None:
        if self.after_all or record.name in self.after:
            note = {"changed": "", "unchanged": " (no change)", "failed": " (failed)"}[record.status]
            self._print(print_graph(graph), f"IR after {record.name}{note}")


class DumpIR(PassInstrument):
    def __init__(self, folder: str, options: PipelineOptions):
        self.folder, self.options = folder, options
        self.names: Sequence[str] = ()
        self.text_before: Optional[str] = None     # the IR before the pass that runs next

    def before_pipeline(self, graph: Graph, names: Sequence[str]) -> None:
        self.names = names
        os.makedirs(self.folder, exist_ok=True)
        for fname in os.listdir(self.folder):      # the folder describes this run only
            if _DUMP_FILE.match(fname) or fname in (TABLE, REPRODUCER):
                os.remove(os.path.join(self.folder, fname))
        self.text_before = self._dump(print_graph(graph), 0, "input")

    def after_pass(self, record: PassRecord, graph: Graph) -> None:
        self.text_before = self._dump(print_graph(graph), record.index, record.name)

    def on_failure(self, name: str, index: int, error: Exception) -> None:
        if self.text_before is not None and hasattr(error, "add_note"):
            path = self._write_reproducer(index, error)
            error.add_note(f"reproducer (the IR before pass '{name}'): {path}")

    def after_pipeline(self, records: List[PassRecord], finished: bool) -> None:
        with open(os.path.join(self.folder, TABLE), "w") as f:
            f.write("index\tpass\tnodes_before\tnodes_after\tms\tchanged\n")
            for r in records:
                changed = {"changed": "yes", "unchanged": "no"}.get(r.status, r.status)
                f.write(f"{r.index}\t{r.name}\t{r.nodes_before}\t{r.nodes_after}\t{r.millis:.3f}\t{changed}\n")

    def _dump(self, text: str, index: int, name: str) -> str:
        kind = "input" if index == 0 else f"after_{name}"
        with open(os.path.join(self.folder, f"{index:04d}.{kind}.ir"), "w") as f:
            f.write(text)
        return text

    def _write_reproducer(self, index: int, error: Exception) -> str:
        """IR before the failing pass, headed by a RUN line with the rest of the pipeline."""
        opts, names = self.options, self.names
        rest = replace(PipelineOptions(), passes=tuple(names[index - 1:]),
                       verify_each=opts.verify_each, fold_max_elements=opts.fold_max_elements)
        path = os.path.join(self.folder, REPRODUCER)
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        with open(path, "w") as f:
            f.write(f"// pass '{names[index - 1]}' failed: {first_line}\n")
            f.write(f"// full pipeline: {','.join(names)}\n")
            f.write(f"// RUN: {format_flags(rest)}\n")
            f.write(self.text_before)
        return path


class TimePasses(PassInstrument):
    def __init__(self, out: TextIO):
        self.out = out

    def after_pipeline(self, records: List[PassRecord], finished: bool) -> None:
        if finished:
            print_timing(records, self.out)


def print_timing(records: Sequence[PassRecord], out: TextIO) -> None:
    total = sum(r.millis for r in records) or 1e-9
    print("===-------------------------------------------===", file=out)
    print("  flowc pass timing", file=out)
    print(f"  {'ms':>9}  {'%':>6}  {'nodes':>13}  pass", file=out)
    for r in records:
        failed = " (failed)" if r.status == "failed" else ""
        print(f"  {r.millis:9.3f}  {100 * r.millis / total:6.1f}  {r.nodes_before:>6}->{r.nodes_after:<6}"
              f"  {r.name}{failed}", file=out)
    print(f"  {total:9.3f}  {100.0:6.1f}  {'':>13}  total", file=out)


def instruments_for(options: PipelineOptions, out: TextIO) -> List[PassInstrument]:
    """The instruments ``options`` ask for, in the order their hooks run."""
    found: List[PassInstrument] = []
    if options.verify_each:
        found.append(VerifyIR())
    if options.print_ir_before_all or options.print_ir_after_all or options.print_ir_after:
        found.append(PrintIR(out, options.print_ir_before_all, options.print_ir_after_all,
                             options.print_ir_after))
    if options.dump_to:
        found.append(DumpIR(options.dump_to, options))
    if options.time_passes:
        found.append(TimePasses(out))
    return found


