"""Queues owned by the runtime: ``CQueue`` (the C ``flowc_queue`` generated code enqueues to and
dequeues from) and ``PyQueue`` (the same semantics for the reference interpreter).

Semantics (TensorFlow's FIFOQueue): enqueue blocks while the queue is full (capacity <= 0:
unbounded), dequeue while it is empty; after ``close`` an enqueue fails with
``CancelledError``, a dequeue still takes what is left and then fails with
``OutOfRangeError``; ``dequeue_up_to`` returns fewer elements than asked only once the queue
is closed. Every wait honours the step's deadline.
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import List, Optional, Sequence

import numpy as np

from runtime.errors import CancelledError, DeadlineExceededError, OutOfRangeError
from runtime.module import ffi


_MASK = (1 << 64) - 1


def _seed_state(seed: int, seed2: int) -> int:
    """The C queue's initial splitmix64 state (``flowc_queue_take_ex``); both 0: random."""
    if seed == 0 and seed2 == 0:
        return int.from_bytes(os.urandom(8), "little")
    return ((seed & _MASK) * 0x9E3779B97F4A7C15 & _MASK) ^ (seed2 & _MASK)


def _splitmix64(state: int):
    """(next state, next number) of splitmix64, as ``flowc_splitmix64``."""
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


class CQueue:
    """A C queue, created with (and freed by) the module of the first step that used it."""

    def __init__(self, name: str, components: int, capacity: int, lib):
        self.name = name
        self.components = components
        self.capacity = capacity
        self._lib = lib                    # keeps the module (and its code) loaded
        # looked up now: a finalizer must not take cffi's lock (see runtime/resources.py)
        self._free = lib.flowc_queue_free
        self.c = ffi.new("char[]", lib.flowc_queue_struct_size())
        if lib.flowc_queue_create(self.c, components, capacity, name.encode()[:127]) != 0:
            raise ValueError(f"queue '{name}': cannot create a queue of {components} components")

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        self._lib.flowc_queue_shut(self.c, int(cancel_pending_enqueues))

    def size(self) -> int:
        return int(self._lib.flowc_queue_length(self.c))

    def __del__(self):
        lib = getattr(self, "_lib", None)
        if lib is not None:
            self._free(self.c)
            self._lib = None


class PyQueue:
    """The interpreter's queue: elements are tuples of numpy arrays."""

    def __init__(self, name: str, components: int, capacity: int):
        self.name = name
        self.components = components
        self.capacity = capacity
        self._items: deque = deque()
        self._closed = False
        self._cv = threading.Condition()
        self._rng: Optional[int] = None          # a shuffling queue's generator state

    def _wait(self, ready, timeout_ms: int, what: str) -> None:
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        while not ready():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise DeadlineExceededError(f"timed out after {timeout_ms} ms: {what}")
            self._cv.wait(left)

    def put(self, elements: Sequence[tuple], timeout_ms: int = 0) -> None:
        with self._cv:
            for elem in elements:
                self._wait(lambda: self._closed or self.capacity <= 0
                           or len(self._items) < self.capacity, timeout_ms,
                           f"queue '{self.name}' is full")
                if self._closed:
                    raise CancelledError(f"queue '{self.name}' is closed")
                self._items.append(tuple(np.array(c, copy=True) for c in elem))
                self._cv.notify_all()

    def take(self, n: int, allow_fewer: bool = False, timeout_ms: int = 0,
             shuffle: Optional[tuple] = None) -> List[tuple]:
        """Take ``n`` elements (fewer with ``allow_fewer`` once closed). ``shuffle``:
        ``(min_after_dequeue, seed, seed2)`` of a RandomShuffleQueue: until the queue is
        closed, wait for ``n + min_after_dequeue`` elements, and take each at random (the C
        queue's splitmix64 generator, seeded the same way at the first such take)."""
        ready = n + (max(0, shuffle[0]) if shuffle else 0)
        with self._cv:
            self._wait(lambda: len(self._items) >= ready or self._closed, timeout_ms,
                       f"waiting for {ready} element(s) of queue '{self.name}'")
            have = len(self._items)
            if have < n and not (self._closed and allow_fewer and have > 0):
                raise OutOfRangeError(f"queue '{self.name}' is closed and has insufficient "
                                      f"elements (requested {n}, current size {have})")
            if shuffle and self._rng is None:
                self._rng = _seed_state(shuffle[1], shuffle[2])
            out = []
            for _ in range(min(n, have)):
                if shuffle and len(self._items) > 1:
                    self._rng, r = _splitmix64(self._rng)
                    k = r % len(self._items)
                    self._items[0], self._items[k] = self._items[k], self._items[0]
                out.append(self._items.popleft())
            self._cv.notify_all()
            return out

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def size(self) -> int:
        with self._cv:
            return len(self._items)
