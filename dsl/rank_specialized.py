"""Steps compiled for the shapes they are fed, on the C backend. Generated C needs every rank
(and the axes, permutations and shapes that decide a tensor's layout) when it is compiled.

- ``RankSpecializedStep``: steps whose feeds include a placeholder of unknown rank
  (``fl.placeholder(fl.float32)``, no shape). Such a step is compiled once per combination of
  ranks it is fed (each a step of its own, with its dims unknown and checked at run time,
  cached like any other), and each call runs the one for the ranks of its values: as in
  TensorFlow, a placeholder without a shape takes a value of any shape, and ops that need a
  rank report a wrong one by node and source line.
- ``ShapeSpecializedStep``: steps whose ranks only the values fed decide (``squeeze`` of a
  ``[?, ?]`` placeholder, a reduction over fed axes, a transpose by a fed permutation): the
  compiler says so (``StaticValueNeeded``), and the session compiles the step per concrete
  shapes fed (and, where the shapes are not enough, per value of the integer feeds the op
  reads), at the first run with each. ``docs/dsl.md`` ("Shapes known only at run time").
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.errors import ShapeError, StaticValueNeeded
from compiler.ir.graph import Output
from compiler.step import feed_placeholder_name
from runtime.errors import InvalidArgumentError
from runtime.feeds import FeedCheck

# Distinct rank combinations compiled for one step before the oldest are dropped (each is a
# compiled module; a program feeding ever new ranks should give its placeholders shapes).
MAX_RANK_VARIANTS = 16


def has_unknown_rank(feeds: Sequence[Output]) -> bool:
    return any(f.type.rank is None for f in feeds)


class RankSpecializedStep:
    """Stands for a compiled step (the ``Executable`` interface that ``Session`` uses:
    ``feed_checks``, ``checks_feeds``, ``call``) and compiles, per ranks fed, the real one
    through ``compile_for(feed_shapes)``."""

    checks_feeds = False          # the session applies feed_checks: dtype checked, any rank

    def __init__(self, feeds: Sequence[Output],
                 compile_for: Callable[[Tuple[Optional[tuple], ...]], object]):
        self.feed_checks = [FeedCheck(f.name, f.dtype, f.type.shape) for f in feeds]
        self._unknown = [i for i, f in enumerate(feeds) if f.type.rank is None]
        self._count = len(feeds)
        self._compile_for = compile_for
        self._steps: Dict[Tuple[int, ...], object] = {}
        self._lock = threading.Lock()

    def feed_shapes(self, arrays: Sequence) -> Tuple[Optional[tuple], ...]:
        """The step's feed shapes for these values: unknown dims of the rank fed where the
        placeholder has no rank, None (its own shape) elsewhere."""
        shapes: List[Optional[tuple]] = [None] * self._count
        for i in self._unknown:
            shapes[i] = (None,) * np.ndim(arrays[i])
        return tuple(shapes)

    def specialization(self, arrays: Sequence) -> dict:
        """What the step is compiled for, for these values (its traced build uses it too);
        a rank variant that is itself compiled per shape adds its own."""
        step = self.executable_for(arrays)
        if hasattr(step, "specialization"):
            return step.specialization(arrays)
        return {"feed_shapes": self.feed_shapes(arrays)}

    def executable_for(self, arrays: Sequence):
        ranks = tuple(np.ndim(arrays[i]) for i in self._unknown)
        step = self._steps.get(ranks)
        if step is None:
            with self._lock:
                step = self._steps.get(ranks)
                if step is None:
                    step = self._compile_for(self.feed_shapes(arrays))
                    if len(self._steps) >= MAX_RANK_VARIANTS:
                        self._steps.pop(next(iter(self._steps)))
                    self._steps[ranks] = step
        return step

    def call(self, arrays: Sequence[np.ndarray], store=None, timeout_ms: int = 0):
        return self.executable_for(arrays).call(arrays, store=store, timeout_ms=timeout_ms)


# --- steps compiled per shapes (and values) fed -------------------------------------------------
# Variants kept per step (each a compiled module; the oldest is dropped first).
MAX_SHAPE_VARIANTS = 16
# Largest integer feed whose value a variant may be compiled for (an axis, a permutation, a
# shape; not data).
MAX_VALUE_ELEMENTS = 64


def value_feeds_of(error: StaticValueNeeded, feed_names: Sequence[str],
                   dtypes: Sequence) -> List[int]:
    """The feeds (indices) whose values decide what ``error``'s node needed at compile time:
    the integer feeds it reads through integer tensors (an axis, a permutation, a shape fed).
    Without a node: every integer feed."""
    index = {name: i for i, name in enumerate(feed_names)}
    ints = {i for i, d in enumerate(dtypes) if d.is_integer}
    node = error.node
    if node is None:
        return sorted(ints)
    found, seen, todo = set(), set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "Placeholder" and index.get(n.name) in ints:
            found.add(index[n.name])
        for i in n.inputs:
            if i.type.dtype.is_integer or i.type.dtype.is_bool:
                todo.append(i.node)
    return sorted(found)


class ShapeSpecializedStep:
    """A step the C backend cannot compile for all the shapes its feeds allow (an output's
    rank depends on dims known at run time: ``squeeze`` of ``[?, ?]``; or on a fed value: a
    reduction over fed axes, a fed permutation). It is compiled, at its first call, for the
    concrete shapes of the values fed, and again for each new combination of shapes; where
    shapes are not enough, for the values of the integer feeds the failing op reads, too.
    Each variant is a step of its own, cached like any other (``MAX_SHAPE_VARIANTS`` kept).
    ``compile_for(feed_shapes, feed_values)`` compiles one."""

    checks_feeds = False          # the session applies feed_checks first

    def __init__(self, feeds: Sequence[Output], compile_for: Callable, reason: StaticValueNeeded,
                 describe: Callable[[str], None] = lambda line: None):
        self.feed_checks = [FeedCheck(f.name, f.dtype, f.type.shape) for f in feeds]
        self._names = [feed_placeholder_name(f) for f in feeds]
        self._shown = [f.node.name if f.index == 0 else f.name for f in feeds]
        self._dtypes = [f.dtype for f in feeds]
        self._compile_for = compile_for
        self._value_feeds: List[int] = []
        self._steps: Dict[tuple, object] = {}
        self._lock = threading.Lock()
        self._describe = describe
        self.reason = reason
        describe(f"flowc: {_node_text(reason)} needs what only the values fed tell "
                 f"({reason.detail}); the step is compiled for the shapes of the values it is "
                 f"fed, at their first run")

    def specialization(self, arrays: Sequence) -> dict:
        """The ``feed_shapes`` and ``feed_values`` the step is compiled for, for these values."""
        shapes = tuple(tuple(np.shape(a)) for a in arrays)
        values = [None] * len(arrays)
        for i in self._value_feeds:
            values[i] = np.asarray(arrays[i])
        return {"feed_shapes": shapes,
                "feed_values": tuple(values) if self._value_feeds else None}

    def _key(self, arrays: Sequence) -> tuple:
        shapes = tuple(tuple(np.shape(a)) for a in arrays)
        values = tuple(np.asarray(arrays[i]).tobytes() for i in self._value_feeds)
        return shapes, tuple(self._value_feeds), values

    def executable_for(self, arrays: Sequence):
        key = self._key(arrays)
        step = self._steps.get(key)
        if step is not None:
            return step
        with self._lock:
            while True:
                key = self._key(arrays)
                step = self._steps.get(key)
                if step is not None:
                    return step
                spec = self.specialization(arrays)
                try:
                    step = self._compile_for(**spec)
                except ShapeError as e:
                    # shapes or values fed that the step's ops cannot take: TensorFlow's
                    # run-time error (an axis out of range, dims that do not match)
                    raise InvalidArgumentError(str(e), e.node_name) from None
                except StaticValueNeeded as e:
                    more = [i for i in value_feeds_of(e, self._names, self._dtypes)
                            if i not in self._value_feeds
                            and np.size(arrays[i]) <= MAX_VALUE_ELEMENTS]
                    if not more:
                        raise
                    self._value_feeds = sorted(self._value_feeds + more)
                    self._steps.clear()           # keyed without those values: compile again
                    self._describe(f"flowc: {_node_text(e)} needs the value of "
                                   + ", ".join(self._shown[i] for i in more)
                                   + "; the step is compiled for each value fed")
                    continue
                if len(self._steps) >= MAX_SHAPE_VARIANTS:
                    self._steps.pop(next(iter(self._steps)))
                self._steps[key] = step
                shown = ", ".join(f"{name}={list(s)}" for name, s in
                                  zip(self._shown, spec["feed_shapes"]))
                if self._value_feeds:
                    shown += "; values " + ", ".join(
                        f"{self._shown[i]}={np.asarray(arrays[i]).tolist()}"
                        for i in self._value_feeds)
                self._describe(f"flowc: compiled a variant of the step for feed shapes {shown} "
                               f"({len(self._steps)} variant(s) kept)")
                return step

    def call(self, arrays: Sequence[np.ndarray], store=None, timeout_ms: int = 0):
        return self.executable_for(arrays).call(arrays, store=store, timeout_ms=timeout_ms)


def _node_text(error: StaticValueNeeded) -> str:
    node = error.node
    if node is None:
        return "a node"
    return f"node '{node.name}' ({node.op})"
