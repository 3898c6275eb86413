"""``fl.Session``: runs fetches for feeds, on the compiled C backend or the numpy interpreter.

Each distinct step signature (graph version, feeds, fetches, targets) is compiled once and
cached; a repeated signature compiles nothing.
"""
from __future__ import annotations

import hashlib
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from compiler.build_cache import artifact_cache_dir
from compiler.interpreter import Interpreter
from compiler.ir.graph import Node, Output
from compiler.passes.manager import PipelineOptions
from compiler.step import make_step_graph, optimize, step_key, write_artifact
from dsl.context import Graph, get_default_graph
from dsl.tensor import Operation, Tensor
from runtime.artifact import load_artifact
from runtime.errors import FeedError

BACKENDS = ("c", "interpreter")


class _Fetch:
    """Flattens a nested fetch structure and rebuilds it around the results."""

    def __init__(self, graph, fetches):
        self.graph = graph
        self.outputs: List[Output] = []
        self.targets: List[Node] = []
        self.structure = self._flatten(fetches)

    def _flatten(self, f):
        if isinstance(f, Tensor):
            self.outputs.append(f.output)
            return ("t", len(self.outputs) - 1)
        if isinstance(f, Operation):
            self.targets.append(f.node)
            return ("op",)
        if isinstance(f, str):
            if ":" in f:
                return self._flatten(Tensor(self.graph.output(f)))
            node = self.graph.node(f)
            return self._flatten(Operation(node))
        if isinstance(f, dict):
            return ("dict", type(f), [(k, self._flatten(v)) for k, v in f.items()])
        if isinstance(f, (list, tuple)):
            kind = "tuple" if isinstance(f, tuple) else "list"
            if hasattr(f, "_fields"):
                return ("namedtuple", type(f), [self._flatten(v) for v in f])
            return (kind, [self._flatten(v) for v in f])
        raise TypeError(f"cannot fetch {f!r}: expected an fl.Tensor, fl.Operation, tensor name, "
                        "or a list/tuple/dict of them")

    def rebuild(self, values: List[np.ndarray], s=None):
        s = self.structure if s is None else s
        kind = s[0]
        if kind == "t":
            v = values[s[1]]
            return v[()] if v.ndim == 0 else v
        if kind == "op":
            return None
        if kind == "dict":
            return s[1]((k, self.rebuild(values, v)) for k, v in s[2])
        if kind == "namedtuple":
            return s[1](*[self.rebuild(values, v) for v in s[2]])
        items = [self.rebuild(values, v) for v in s[1]]
        return tuple(items) if kind == "tuple" else items


class Session:
    """Runs parts of a graph. ``backend="c"`` compiles each step; ``"interpreter"`` uses numpy."""

    def __init__(self, target: str = "", graph: Optional[Graph] = None, config=None,
                 backend: str = "c", options: Optional[PipelineOptions] = None):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        self.graph = graph if graph is not None else get_default_graph()
        self.backend = backend
        self.options = options or PipelineOptions()
        self._steps: Dict[Tuple, Any] = {}
        self._lock = threading.Lock()
        self.compile_count = 0
        self._closed = False

    # --- context manager -----------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._closed = True
        self._steps.clear()

    # --- running -------------------------------------------------------------------------
    def run(self, fetches, feed_dict: Optional[Dict] = None):
        if self._closed:
            raise RuntimeError("this Session is closed")
        fetch = _Fetch(self.graph, fetches)
        feeds = self._feeds(feed_dict or {})
        feed_outputs = list(feeds)
        values = list(feeds.values())
        if self.backend == "interpreter":
            results = Interpreter(self.graph).run(fetch.outputs, feeds, fetch.targets)
            return fetch.rebuild(results)
        step = self._compiled(feed_outputs, fetch.outputs, fetch.targets)
        return fetch.rebuild(step.run(values))

    def _feeds(self, feed_dict: Dict) -> Dict[Output, Any]:
        feeds: Dict[Output, Any] = {}
        for k, v in feed_dict.items():
            if isinstance(k, Tensor):
                out = k.output
            elif isinstance(k, str):
                out = self.graph.output(k)
            else:
                raise FeedError(f"cannot feed {k!r}: feed_dict keys must be fl.Tensor or tensor names")
            if out.node.graph is not self.graph:
                raise FeedError(f"cannot feed {out.name}: it belongs to another graph")
            if isinstance(v, Tensor):
                raise FeedError(f"the value fed to {out.name} is a symbolic fl.Tensor; feed numpy "
                                "values (run it first)")
            feeds[out] = v
        return feeds

    def _compiled(self, feeds: List[Output], fetches: List[Output], targets: List[Node]):
        key = (self.graph.version, tuple(feeds), tuple(fetches), tuple(targets))
        step = self._steps.get(key)
        if step is not None:
            return step
        with self._lock:
            step = self._steps.get(key)
            if step is None:
                step = self._compile(feeds, fetches, targets)
                self._steps[key] = step
        return step

    def _compile(self, feeds, fetches, targets):
        sg = make_step_graph(self.graph, feeds, fetches, targets)
        optimize(sg, self.options)
        key = step_key(sg)
        path = os.path.join(artifact_cache_dir(), key[:2], key)
        try:
            artifact = load_artifact(path) if os.path.isdir(path) else None
        except Exception:
            artifact = None                      # stale or corrupt: rebuild
        if artifact is None:
            write_artifact(sg, path, signature=key)
            artifact = load_artifact(path)
        self.compile_count += 1
        return artifact.executable
