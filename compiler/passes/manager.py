"""The pass manager: named passes run in a pipeline, with the verifier after every pass that
changed the graph, and instruments around passes (print IR, dump to a folder, timing, a
reproducer on failure), in the manner of MLIR's pass manager and XLA's HloPassPipeline."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, TextIO

from compiler.errors import CompileError, FlowcError
from compiler.ir.graph import Graph
from compiler.ir.printer import print_graph
from compiler.ir.verifier import verify


class PassContext:
    """What a pass may know besides the graph: the step's fed tensors, and options."""

    def __init__(self, options: Optional["PipelineOptions"] = None):
        self.options = options or PipelineOptions()


class Pass:
    """A graph rewrite. ``run`` returns True when it changed the graph."""
    name = "pass"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        raise NotImplementedError


_PASSES: Dict[str, Callable[[], Pass]] = {}


def register_pass(name: str):
    def deco(cls):
        cls.name = name
        _PASSES[name] = cls
        return cls
    return deco


def get_pass(name: str) -> Pass:
    _load_builtin_passes()
    try:
        return _PASSES[name]()
    except KeyError:
        raise FlowcError(f"unknown pass '{name}'; known passes: {', '.join(sorted(_PASSES))}") from None


def known_passes() -> List[str]:
    _load_builtin_passes()
    return sorted(_PASSES)


DEFAULT_PIPELINE = ("prune", "infer-shapes")


def _load_builtin_passes() -> None:
    import importlib
    for mod in ("prune", "infer_shapes", "fold_constants", "cse", "simplify"):
        try:
            importlib.import_module(f"compiler.passes.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"compiler.passes.{mod}":
                raise


@dataclass(frozen=True)
class PipelineOptions:
    """Parsed pipeline flags (mirrored by the FLOWC_FLAGS environment variable)."""
    passes: Optional[tuple] = None                 # None: the default pipeline
    disable: tuple = ()
    print_ir_after: tuple = ()
    print_ir_after_all: bool = False
    print_ir_before_all: bool = False
    dump_to: Optional[str] = None
    verify_each: bool = True
    time_passes: bool = False
    keep_going: bool = False

    def pipeline(self) -> List[str]:
        names = list(self.passes) if self.passes is not None else list(DEFAULT_PIPELINE)
        return [n for n in names if n not in self.disable]


@dataclass
class PassRecord:
    index: int
    name: str
    nodes_before: int
    nodes_after: int
    millis: float
    changed: bool


@dataclass
class PassManager:
    options: PipelineOptions = field(default_factory=PipelineOptions)
    out: TextIO = field(default_factory=lambda: sys.stderr)
    records: List[PassRecord] = field(default_factory=list)

    def run(self, graph: Graph, ctx: Optional[PassContext] = None) -> Graph:
        ctx = ctx or PassContext(self.options)
        opts = self.options
        names = opts.pipeline()
        passes = [get_pass(n) for n in names]
        if opts.verify_each:
            verify(graph)
        if opts.dump_to:
            os.makedirs(opts.dump_to, exist_ok=True)
            self._dump(graph, 0, "input")
        for i, p in enumerate(passes, start=1):
            if opts.print_ir_before_all:
                self._print(graph, f"IR before {p.name}")
            before = len(graph)
            t0 = time.perf_counter()
            try:
                changed = bool(p.run(graph, ctx))
                if changed and opts.verify_each:
                    try:
                        verify(graph)
                    except CompileError as e:
                        raise CompileError(f"verifier failed after pass '{p.name}': {e}") from e
            except FlowcError as e:
                self._reproducer(graph, names, i, e)
                if opts.keep_going:
                    print(f"flowc: pass '{p.name}' failed, continuing (--keep-going): {e}", file=self.out)
                    continue
                raise
            ms = (time.perf_counter() - t0) * 1000.0
            self.records.append(PassRecord(i, p.name, before, len(graph), ms, changed))
            if opts.print_ir_after_all or p.name in opts.print_ir_after:
                self._print(graph, f"IR after {p.name}" + ("" if changed else " (no change)"))
            if opts.dump_to:
                self._dump(graph, i, p.name)
        if opts.dump_to:
            self._write_table(os.path.join(opts.dump_to, "passes.tsv"))
        if opts.time_passes:
            self.print_timing()
        return graph

    def _print(self, graph: Graph, title: str) -> None:
        print(f"// ----- {title} -----", file=self.out)
        print(print_graph(graph), file=self.out, end="")

    def _dump(self, graph: Graph, index: int, name: str) -> None:
        kind = "input" if name == "input" else f"after_{name.replace('-', '_')}"
        path = os.path.join(self.options.dump_to, f"{index:04d}.{kind}.ir")
        with open(path, "w") as f:
            f.write(print_graph(graph))

    def _write_table(self, path: str) -> None:
        with open(path, "w") as f:
            f.write("index\tpass\tnodes_before\tnodes_after\tms\tchanged\n")
            for r in self.records:
                f.write(f"{r.index}\t{r.name}\t{r.nodes_before}\t{r.nodes_after}\t{r.millis:.3f}\t"
                        f"{'yes' if r.changed else 'no'}\n")

    def _reproducer(self, graph: Graph, names: Sequence[str], index: int, err: Exception) -> None:
        if not self.options.dump_to:
            return
        path = os.path.join(self.options.dump_to, "reproducer.ir")
        with open(path, "w") as f:
            f.write(f"// flowc opt reproducer.ir --passes {','.join(names[index - 1:])}\n")
            f.write(f"// failed in pass '{names[index - 1]}': {str(err).splitlines()[0]}\n")
            f.write(print_graph(graph))

    def print_timing(self) -> None:
        total = sum(r.millis for r in self.records) or 1e-9
        print("===-------------------------------------------===", file=self.out)
        print("  flowc pass timing", file=self.out)
        print(f"  {'ms':>9}  {'%':>6}  {'nodes':>13}  pass", file=self.out)
        for r in self.records:
            print(f"  {r.millis:9.3f}  {100 * r.millis / total:6.1f}  {r.nodes_before:>6}->{r.nodes_after:<6}  {r.name}",
                  file=self.out)
        print(f"  {total:9.3f}  {100.0:6.1f}  {'':>13}  total", file=self.out)


def run_passes(graph: Graph, names: Sequence[str], **options) -> Graph:
    """Convenience: run the named passes (no defaults) on ``graph`` in place."""
    return PassManager(PipelineOptions(passes=tuple(names), **options)).run(graph)
