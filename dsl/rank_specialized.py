"""Steps whose feeds include a placeholder of unknown rank (``fl.placeholder(fl.float32)``, no
shape), on the C backend. Generated C needs every rank when it is compiled, so such a step is
compiled once per combination of ranks it is fed (each a step of its own, with its dims
unknown and checked at run time, cached like any other), and each call runs the one for the
ranks of its values: as in TensorFlow, a placeholder without a shape takes a value of any
shape, and ops that need a rank report a wrong one by node and source line."""
from __future__ import annotations

import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.ir.graph import Output
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
