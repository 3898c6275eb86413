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
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, TextIO

from compiler.errors import CompileError
from compiler.ir.graph import Graph
from compiler.ir.verifier import verify
from compiler.passes.instruments import (PassFailure, PassInstrument, PassRecord, instruments_for,
                                         print_timing)
from compiler.options import PipelineError, PipelineOptions, resolve_options, set_pass_name_check
from runtime.errors import FlowcError


class UnknownPassError(PipelineError):
    """A pass name that no registered pass has; the message lists the known ones."""


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
                "partition", "plan_memory", "fuse_updates", "fuse_accumulate", "fuse_conv",
                "fuse_matmul_bias", "layout", "fold_batch_norm", "legalize_types"):
        try:
            importlib.import_module(f"compiler.passes.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"compiler.passes.{mod}":
                raise


@dataclass
class PassManager:
    """Runs the pipeline ``options`` describe on a graph, in place, with the instruments the
    options ask for around each pass (``compiler/passes/instruments.py``) and any given in
    ``instruments``."""
    options: PipelineOptions = field(default_factory=PipelineOptions)
    out: TextIO = field(default_factory=lambda: sys.stderr)
    read_environment: bool = True                  # merge FLOWC_FLAGS under ``options`` on run
    records: List[PassRecord] = field(default_factory=list)
    effective_options: Optional[PipelineOptions] = None
    instruments: List[PassInstrument] = field(default_factory=list)

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
        instruments = instruments_for(opts, self.out) + list(self.instruments)
        for ins in instruments:
            ins.before_pipeline(graph, names)
        finished = False
        try:
            for i, p in enumerate(passes, start=1):
                self._run_instrumented(p, i, graph, ctx, opts, instruments)
            finished = True
        finally:
            for ins in instruments:      # also when a pass failed: what ran so far
                ins.after_pipeline(self.records, finished)
        return graph

    def _run_instrumented(self, p: Pass, index: int, graph: Graph, ctx: PassContext,
                          opts: PipelineOptions, instruments: List[PassInstrument]) -> None:
        """Run one pass with the instruments around it."""
        for ins in instruments:
            ins.before_pass(p.name, index, graph)
        before = len(graph)
        t0 = time.perf_counter()
        try:
            changed = self._run_one(p, graph, ctx)
            for ins in instruments:
                ins.check_after_pass(p.name, graph, changed)
            status = "changed" if changed else "unchanged"
        except FlowcError as e:
            status = "failed"
            self.records.append(PassRecord(index, p.name, before, len(graph),
                                           (time.perf_counter() - t0) * 1000.0, status))
            for ins in instruments:
                ins.on_failure(p.name, index, e)
            self._keep_going_or_raise(graph, opts, p.name, e)
        else:
            self.records.append(PassRecord(index, p.name, before, len(graph),
                                           (time.perf_counter() - t0) * 1000.0, status))
        for ins in instruments:
            ins.after_pass(self.records[-1], graph)

    # --- one pass ------------------------------------------------------------------------
    @staticmethod
    def _run_one(p: Pass, graph: Graph, ctx: PassContext) -> bool:
        """Run ``p``; a crash (non-flowc exception) becomes a PassFailure naming the pass."""
        try:
            return bool(p.run(graph, ctx))
        except FlowcError:
            raise
        except Exception as e:
            raise PassFailure(f"pass '{p.name}' crashed: {type(e).__name__}: {e}", p.name, e) from e

    def _keep_going_or_raise(self, graph: Graph, opts: PipelineOptions, name: str,
                             err: FlowcError) -> None:
        """Re-raise unless --keep-going and the graph is still valid."""
        if not opts.keep_going:
            raise err
        try:
            verify(graph)
        except CompileError as e:
            raise PassFailure(f"pass '{name}' failed and left an invalid graph, so --keep-going "
                              f"cannot continue: {e}", name, e) from err
        print(f"flowc: pass '{name}' failed, continuing (--keep-going): {err}", file=self.out)

    def print_timing(self) -> None:
        print_timing(self.records, self.out)


def run_passes(graph: Graph, names: Sequence[str], **options) -> Graph:
    """Convenience: run exactly the named passes on ``graph`` in place (FLOWC_FLAGS ignored)."""
    pm = PassManager(PipelineOptions(passes=tuple(names), **options), read_environment=False)
    return pm.run(graph)
