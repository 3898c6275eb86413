"""The pass manager: named passes run in a pipeline, with the verifier before the pipeline and
after every pass that changed the graph, and instruments around passes (print IR, dump to a
folder, timing, a reproducer on failure), in the manner of MLIR's pass manager and XLA's
HloPassPipeline.

Options come from a frozen ``PipelineOptions``; ``compiler.options`` parses flag strings and the
``FLOWC_FLAGS`` environment variable into one. The environment is read when a pipeline starts
(``PassManager.run``), never at import time, and explicit options win over it.
"""
from __future__ import annotations

import difflib
import os
import re
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, TextIO

from compiler.errors import CompileError
from compiler.ir.graph import Graph
from compiler.ir.printer import print_graph
from compiler.ir.verifier import verify
from compiler.options import (PipelineError, PipelineOptions, format_flags, resolve_options,
                              set_pass_name_check)
from runtime.errors import FlowcError


class UnknownPassError(PipelineError):
    """A pass name that no registered pass has; the message lists the known ones."""


class PassFailure(CompileError):
    """A pass crashed, or left a graph the verifier rejects; ``pass_name`` says which pass."""

    def __init__(self, message: str, pass_name: Optional[str], cause: Optional[BaseException] = None):
        super().__init__(message)
        self.pass_name = pass_name
        self.node_name = getattr(cause, "node_name", None)
        self.location = getattr(cause, "location", None)


class PassContext:
    """What a pass may know besides the graph: the pipeline's options."""

    def __init__(self, options: Optional["PipelineOptions"] = None):
        self.options = options or PipelineOptions()


class Pass:
    """A graph rewrite. ``run`` returns True when it changed the graph."""
    name = "pass"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        raise NotImplementedError


_PASSES: Dict[str, Callable[[], Pass]] = {}


def register_pass(name: str):
    """Class decorator: register a ``Pass`` subclass under a kebab-case ``name``."""
    def deco(cls):
        cls.name = name
        _PASSES[name] = cls
        return cls
    return deco


def unregister_pass(name: str) -> None:
    """Remove a registered pass (tests and plugins that register passes of their own)."""
    _PASSES.pop(name, None)


def unknown_pass_error(name: str, where: str = "") -> UnknownPassError:
    """The error for an unknown pass name: suggests a close match and lists the known passes."""
    known = known_passes()
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return UnknownPassError(f"unknown pass '{name}'{where}{hint}; known passes: {', '.join(known)}")


def get_pass(name: str) -> Pass:
    """A fresh instance of the pass registered as ``name``."""
    _load_builtin_passes()
    try:
        return _PASSES[name]()
    except KeyError:
        raise unknown_pass_error(name) from None


def known_passes() -> List[str]:
    _load_builtin_passes()
    return sorted(_PASSES)


def check_pass_names(names: Sequence[str], where: str = "") -> None:
    """Raise UnknownPassError for the first name that is not a registered pass."""
    _load_builtin_passes()
    for n in names:
        if n not in _PASSES:
            raise unknown_pass_error(n, where)


set_pass_name_check(check_pass_names)


def _load_builtin_passes() -> None:
    import importlib
    for mod in ("prune", "infer_shapes", "fold_constants", "cse", "simplify", "place", "fuse",
                "partition", "plan_memory", "fuse_updates"):
        try:
            importlib.import_module(f"compiler.passes.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"compiler.passes.{mod}":
                raise


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


_DUMP_FILE = re.compile(r"^\d{4}\.(input|after_.+)\.ir$")
REPRODUCER = "reproducer.ir"
TABLE = "passes.tsv"


@dataclass
class PassManager:
    """Runs the pipeline ``options`` describe on a graph, in place."""
    options: PipelineOptions = field(default_factory=PipelineOptions)
    out: TextIO = field(default_factory=lambda: sys.stderr)
    read_environment: bool = True                  # merge FLOWC_FLAGS under ``options`` on run
    records: List[PassRecord] = field(default_factory=list)
    effective_options: Optional[PipelineOptions] = None

    def run(self, graph: Graph, ctx: Optional[PassContext] = None) -> Graph:
        opts = self.options
        if self.read_environment:
            opts = resolve_options(opts)
        opts.validate()
        self.effective_options = opts
        ctx = ctx or PassContext(opts)
        names = opts.pipeline()
        passes = [get_pass(n) for n in names]
        self.records = []
        if opts.verify_each:
            try:
                verify(graph)
            except CompileError as e:
                raise PassFailure(f"verifier failed on the input graph, before any pass: {e}", None, e) from e
        text_before = None
        if opts.dump_to:
            self._prepare_dump_folder(opts.dump_to)
            text_before = self._dump(opts.dump_to, print_graph(graph), 0, "input")
        try:
            for i, p in enumerate(passes, start=1):
                text_before = self._run_instrumented(p, i, graph, ctx, opts, names, text_before)
        finally:
            if opts.dump_to:                # also when a pass failed: the passes that ran
                self._write_table(os.path.join(opts.dump_to, TABLE))
        if opts.time_passes:
            self.print_timing()
        return graph

    def _run_instrumented(self, p: Pass, index: int, graph: Graph, ctx: PassContext,
                          opts: PipelineOptions, names: Sequence[str],
                          text_before: Optional[str]) -> Optional[str]:
        """Run one pass with the instruments around it; returns the dumped text after it."""
        if opts.print_ir_before_all:
            self._print(print_graph(graph), f"IR before {p.name}")
        before = len(graph)
        t0 = time.perf_counter()
        try:
            changed = self._run_one(p, graph, ctx, opts)
            status = "changed" if changed else "unchanged"
        except FlowcError as e:
            status = "failed"
            self.records.append(PassRecord(index, p.name, before, len(graph),
                                           (time.perf_counter() - t0) * 1000.0, status))
            self._on_failure(graph, opts, names, index, e, text_before)
        else:
            self.records.append(PassRecord(index, p.name, before, len(graph),
                                           (time.perf_counter() - t0) * 1000.0, status))
        if opts.print_ir_after_all or p.name in opts.print_ir_after:
            note = {"changed": "", "unchanged": " (no change)", "failed": " (failed)"}[status]
            self._print(print_graph(graph), f"IR after {p.name}{note}")
        if opts.dump_to:
            return self._dump(opts.dump_to, print_graph(graph), index, p.name)
        return text_before

    # --- one pass ------------------------------------------------------------------------
    @staticmethod
    def _run_one(p: Pass, graph: Graph, ctx: PassContext, opts: PipelineOptions) -> bool:
        """Run ``p``; a crash (non-flowc exception) becomes a PassFailure naming the pass."""
        try:
            changed = bool(p.run(graph, ctx))
        except FlowcError:
            raise
        except Exception as e:
            raise PassFailure(f"pass '{p.name}' crashed: {type(e).__name__}: {e}", p.name, e) from e
        if changed and opts.verify_each:
            try:
                verify(graph)
            except CompileError as e:
                raise PassFailure(f"verifier failed after pass '{p.name}': {e}", p.name, e) from e
        return changed

    def _on_failure(self, graph: Graph, opts: PipelineOptions, names: Sequence[str], index: int,
                    err: FlowcError, text_before: Optional[str]) -> None:
        """Write the reproducer; re-raise unless --keep-going and the graph is still valid."""
        name = names[index - 1]
        if opts.dump_to and text_before is not None:
            path = self._write_reproducer(opts, names, index, err, text_before)
            err.add_note(f"reproducer (the IR before pass '{name}'): {path}")
        if not opts.keep_going:
            raise err
        try:
            verify(graph)
        except CompileError as e:
            raise PassFailure(f"pass '{name}' failed and left an invalid graph, so --keep-going "
                              f"cannot continue: {e}", name, e) from err
        print(f"flowc: pass '{name}' failed, continuing (--keep-going): {err}", file=self.out)

    # --- instruments -------------------------------------------------------------------
    def _print(self, text: str, title: str) -> None:
        print(f"// ----- {title} -----", file=self.out)
        print(text, file=self.out, end="")

    @staticmethod
    def _prepare_dump_folder(folder: str) -> None:
        """Create the folder; remove dump files of an earlier run so it describes this run only."""
        os.makedirs(folder, exist_ok=True)
        for fname in os.listdir(folder):
            if _DUMP_FILE.match(fname) or fname in (TABLE, REPRODUCER):
                os.remove(os.path.join(folder, fname))

    @staticmethod
    def _dump(folder: str, text: str, index: int, name: str) -> str:
        kind = "input" if index == 0 else f"after_{name}"
        with open(os.path.join(folder, f"{index:04d}.{kind}.ir"), "w") as f:
            f.write(text)
        return text

    def _write_table(self, path: str) -> None:
        with open(path, "w") as f:
            f.write("index\tpass\tnodes_before\tnodes_after\tms\tchanged\n")
            for r in self.records:
                changed = {"changed": "yes", "unchanged": "no"}.get(r.status, r.status)
                f.write(f"{r.index}\t{r.name}\t{r.nodes_before}\t{r.nodes_after}\t{r.millis:.3f}\t{changed}\n")

    @staticmethod
    def _write_reproducer(opts: PipelineOptions, names: Sequence[str], index: int, err: Exception,
                          text_before: str) -> str:
        """IR before the failing pass, headed by a RUN line with the rest of the pipeline."""
        rest = replace(PipelineOptions(), passes=tuple(names[index - 1:]),
                       verify_each=opts.verify_each, fold_max_elements=opts.fold_max_elements)
        path = os.path.join(opts.dump_to, REPRODUCER)
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        with open(path, "w") as f:
            f.write(f"// pass '{names[index - 1]}' failed: {first_line}\n")
            f.write(f"// full pipeline: {','.join(names)}\n")
            f.write(f"// RUN: {format_flags(rest)}\n")
            f.write(text_before)
        return path

    def print_timing(self) -> None:
        total = sum(r.millis for r in self.records) or 1e-9
        print("===-------------------------------------------===", file=self.out)
        print("  flowc pass timing", file=self.out)
        print(f"  {'ms':>9}  {'%':>6}  {'nodes':>13}  pass", file=self.out)
        for r in self.records:
            failed = " (failed)" if r.status == "failed" else ""
            print(f"  {r.millis:9.3f}  {100 * r.millis / total:6.1f}  {r.nodes_before:>6}->{r.nodes_after:<6}"
                  f"  {r.name}{failed}", file=self.out)
        print(f"  {total:9.3f}  {100.0:6.1f}  {'':>13}  total", file=self.out)


def run_passes(graph: Graph, names: Sequence[str], **options) -> Graph:
    """Convenience: run exactly the named passes on ``graph`` in place (FLOWC_FLAGS ignored)."""
    pm = PassManager(PipelineOptions(passes=tuple(names), **options), read_environment=False)
    return pm.run(graph)
