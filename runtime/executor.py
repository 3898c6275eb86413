"""Running a step whose graph spans several devices: every device's compiled function at once.

Each device of the step has its own module (an ``Executable``) taking some of the step's feeds
and producing some of its fetches. A call creates the step's rendezvous (one slot per
``_Send``/``_Recv`` pair), starts every device's entry function concurrently (the C code runs
without the GIL), and gathers the fetches. If a device fails, the rendezvous is aborted so the
others stop waiting, and the first real error is raised (not the aborts it caused).
"""
from __future__ import annotations

import concurrent.futures
import threading
from typing import List, Optional, Sequence, Tuple

import numpy as np

from runtime.errors import FeedError, RuntimeExecutionError
from runtime.feeds import FeedCheck
from runtime.module import Executable, TensorSpec, ffi

# Worker threads for the devices of concurrent steps (created lazily, reused).
_MAX_WORKERS = 256
_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
_pool_lock = threading.Lock()

ABORTED = 9          # FLOWC_ABORTED: a receive woken by another device's failure


def _workers() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(_MAX_WORKERS,
                                                              thread_name_prefix="flowc-device")
    return _pool


class DevicePart:
    """One device's module and where its feeds and fetches sit in the step's lists."""

    def __init__(self, device: str, executable: Executable, feeds: Sequence[int],
                 fetches: Sequence[int]):
        self.device = device
        self.executable = executable
        self.feeds = list(feeds)
        self.fetches = list(fetches)


class MultiDeviceExecutable:
    """The step's devices run together; the same interface as a one-device ``Executable``."""

    def __init__(self, parts: List[DevicePart], feeds: Sequence[TensorSpec],
                 fetches: Sequence[TensorSpec], rendezvous_slots: int):
        if not parts:
            raise ValueError("a step has at least one device")
        self.parts = parts
        self.feeds = list(feeds)
        self.fetches = list(fetches)
        self.slots = rendezvous_slots
        self.feed_checks = [FeedCheck(s.name, s.dtype, s.shape, keep_scalars=True)
                            for s in self.feeds]
        lib = parts[0].executable.module.lib
        self._rv_size = lib.flowc_rendezvous_size()
        self._rv_init = lib.flowc_rendezvous_init
        self._rv_abort = lib.flowc_rendezvous_abort
        self._rv_destroy = lib.flowc_rendezvous_destroy
        # A one-device step wrapped only because it does not read every feed (a step fed
        # values it does not use) runs its part alone: no rendezvous, no worker thread.
        only = parts[0] if len(parts) == 1 and not rendezvous_slots else None
        self._single = (only if only is not None
                        and only.fetches == list(range(len(self.fetches))) else None)

    @property
    def devices(self) -> List[str]:
        return [p.device for p in self.parts]

    def run(self, feed_values: Sequence, store=None, timeout_ms: int = 0) -> List[np.ndarray]:
        if len(feed_values) != len(self.feeds):
            names = ", ".join(f.name for f in self.feeds) or "none"
            raise FeedError(f"expected {len(self.feeds)} feeds ({names}), got {len(feed_values)}")
        arrays = [check(v) for check, v in zip(self.feed_checks, feed_values)]
        return self.call(arrays, scalars=False, store=store, timeout_ms=timeout_ms)

    def call(self, arrays: Sequence[np.ndarray], scalars: bool = True, store=None,
             timeout_ms: int = 0, rendezvous=None) -> list:
        """``rendezvous``: the step's, made by the caller with at least ``slots`` slots (a task
        server's step: its address identifies the step to the server's host calls); else the
        step makes its own."""
        if store is None:
            store = self.parts[0].executable._own_store()
        single = self._single
        if single is not None:
            return single.executable.call([arrays[i] for i in single.feeds], scalars=scalars,
                                          store=store, timeout_ms=timeout_ms,
                                          rendezvous=ffi.NULL if rendezvous is None
                                          else rendezvous)
        own = rendezvous is None
        if own:
            rv = ffi.new("char[]", self._rv_size)
            if self._rv_init(rv, self.slots, int(timeout_ms or 0)) != 0:
                raise MemoryError("cannot create the step's rendezvous")
        else:
            rv = rendezvous
        results: List[object] = [None] * len(self.fetches)
        errors: List[Tuple[int, BaseException]] = []

        def run_part(k: int, part: DevicePart) -> None:
            try:
                values = part.executable.call([arrays[i] for i in part.feeds], scalars=scalars,
                                              store=store, rendezvous=rv, timeout_ms=timeout_ms)
            except BaseException as e:                 # noqa: BLE001  (re-raised below)
                errors.append((k, e))
                self._rv_abort(rv)
                return
            for i, v in zip(part.fetches, values):
                results[i] = v

        try:
            pool = _workers()
            futures = [pool.submit(run_part, k, p) for k, p in enumerate(self.parts[1:], 1)]
            run_part(0, self.parts[0])
            for f in futures:
                f.result()
        finally:
            if own:
                self._rv_destroy(rv)
        if errors:
            raise _first_cause(errors)
        return results


def _first_cause(errors: List[Tuple[int, BaseException]]) -> BaseException:
    """The error that started the failure: one that is not an abort caused by another."""
    for _, e in sorted(errors, key=lambda ke: ke[0]):
        if not (isinstance(e, RuntimeExecutionError) and getattr(e, "code", None) == ABORTED):
            return e
    return errors[0][1]
