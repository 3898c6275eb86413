"""Conditional gradient accumulators: the runtime state behind the ``Accumulator*`` ops.

An ``Accumulator`` sums the gradients of one variable that replicas apply for the current step
and hands their mean to whoever takes it (TensorFlow's ``ConditionalAccumulator``, the
building block of synchronous replication in the paper's Figure 4). It lives in a session's
(or a task's) ``ResourceStore``, keyed by its shared name; the reference kernels call it
directly and the C kernels through the runtime's host-call hook, so both backends share one
accumulator.

Rules:

- every accumulator has a *global step* (``set_global_step``; ``take`` advances it by one);
- ``apply(local_step, gradient)`` with ``local_step < global step`` is dropped and counted as
  **stale** (it was computed on parameters that have changed since);
- with ``max_accumulated = k > 0``, a fresh gradient that arrives when ``k`` are already held
  for this step is dropped and counted as **dropped** (a backup worker's gradient: the paper
  aggregates the first m of n); ``k = 0`` keeps every fresh gradient, as TensorFlow does;
- ``take(num_required)`` waits until ``num_required`` gradients are held, returns their mean,
  empties the accumulator and advances its global step; the wait honours the step's deadline
  (``DeadlineExceededError``) and ``close`` (``OutOfRangeError``);
- after ``close`` an ``apply`` fails with ``AbortedError``, a waiting or later ``take`` with
  ``OutOfRangeError``: the end-of-input signal of ``fl.train.SyncReplicasOptimizer``.

``SparseAccumulator`` follows the same rules for sparse gradients (rows ``indices`` of a
tensor, their slices ``values``): its mean holds each touched row once.
"""
from __future__ import annotations

import threading
import time
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from runtime.dtypes import DType
from runtime.errors import (AbortedError, DeadlineExceededError, FlowcError,
                            InvalidArgumentError, OutOfRangeError)
from runtime.resources import ResourceStore, register_host_op

# flowc_status codes (flowc_rt.h) carried by errors that cross the host-call hook into C.
_OUT_OF_RANGE, _INVALID_ARGUMENT, _DEADLINE_EXCEEDED, _ABORTED = 2, 3, 8, 9


def _error(cls, code: int, message: str) -> FlowcError:
    e = cls(message)
    e.status_code = code
    return e


class Accumulator:
    """The gradients of one variable applied for the current step (thread-safe)."""

    def __init__(self, name: str, dtype: DType, shape: Optional[tuple], max_accumulated: int = 0):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.max_accumulated = int(max_accumulated)
        self._cv = threading.Condition()
        self._sum: Optional[np.ndarray] = None
        self._count = 0
        self._global_step = 0
        self._dropped = 0
        self._stale = 0
        self._closed = False

    # --- what the ops do ------------------------------------------------------------------
    def apply(self, local_step: int, gradient: np.ndarray) -> bool:
        """Add ``gradient`` if it is fresh and wanted; True when it was kept."""
        grad = self._checked_values(gradient)
        return self._apply(local_step, lambda: self._add(grad))

    def _checked_values(self, values) -> np.ndarray:
        arr = np.asarray(values)
        if arr.dtype != self.dtype.np:
            raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                         f"accumulator '{self.name}' holds {self.dtype.ir_name} gradients, got "
                         f"{DType.from_numpy(arr.dtype).ir_name}")
        return arr

    def _apply(self, local_step: int, add) -> bool:
        """The rules every gradient goes through; ``add()`` (under the lock) keeps it."""
        with self._cv:
            if self._closed:
                raise _error(AbortedError, _ABORTED, f"accumulator '{self.name}' is closed")
            if int(local_step) < self._global_step:
                self._stale += 1
                return False
            if 0 < self.max_accumulated <= self._count:
                self._dropped += 1
                return False
            add()
            self._count += 1
            self._cv.notify_all()
            return True

    def _add(self, grad: np.ndarray) -> None:
        self._check_shape(grad.shape)
        if self._sum is None:
            self._sum = grad.astype(self.dtype.np, copy=True)
        else:
            self._sum += grad

    def _mean_and_reset(self):
        mean = (self._sum / self._count).astype(self.dtype.np)
        self._sum = None
        return mean

    def take(self, num_required: int, timeout_ms: int = 0):
        """The mean of the held gradients once ``num_required`` are held; resets and advances."""
        need = int(num_required)
        if need < 1:
            raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                         f"accumulator '{self.name}': num_required must be at least 1, got {need}")
        if 0 < self.max_accumulated < need:
            raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                         f"accumulator '{self.name}' keeps at most {self.max_accumulated} "
                         f"gradients a step; {need} can never be taken")
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        with self._cv:
            while self._count < need and not self._closed:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise _error(DeadlineExceededError, _DEADLINE_EXCEEDED,
                                 f"timed out after {timeout_ms} ms waiting for {need} "
                                 f"gradient(s) of accumulator '{self.name}' (it holds "
                                 f"{self._count} for step {self._global_step})")
                self._cv.wait(left)
            if self._count < need:
                raise _error(OutOfRangeError, _OUT_OF_RANGE,
                             f"accumulator '{self.name}' is closed (it holds {self._count} of "
                             f"the {need} gradient(s) needed for step {self._global_step})")
            mean = self._mean_and_reset()
            self._count = 0
            self._global_step += 1
            self._cv.notify_all()
            return mean

    def set_global_step(self, step: int) -> None:
        """Gradients with a local step below ``step`` are stale from now on (held ones are
        kept; TensorFlow's ``AccumulatorSetGlobalStep``)."""
        with self._cv:
            self._global_step = int(step)
            self._cv.notify_all()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    # --- what can be measured -------------------------------------------------------------
    def num_accumulated(self) -> int:
        with self._cv:
            return self._count

    def counts(self) -> Tuple[int, int]:
        """(dropped beyond ``max_accumulated``, stale) since the accumulator was created."""
        with self._cv:
            return self._dropped, self._stale

    @property
    def global_step(self) -> int:
        with self._cv:
            return self._global_step

    def _check_shape(self, shape: tuple) -> None:
        want = self.shape
        if want is not None and (len(want) != len(shape) or any(
                w is not None and w != s for w, s in zip(want, shape))):
            raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                         f"accumulator '{self.name}' holds gradients of shape "
                         f"{[('?' if w is None else w) for w in want]}, got {list(shape)}")
        if self._sum is not None and self._sum.shape != shape:
            raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                         f"accumulator '{self.name}' holds gradients of shape "
                         f"{list(self._sum.shape)} this step, got {list(shape)}")


class SparseAccumulator(Accumulator):
    """The same rules for sparse gradients (``indices``, ``values``: rows of a tensor of
    ``shape``, TensorFlow's ``SparseConditionalAccumulator``). ``take`` returns ``(indices,
    values, dense_shape)``: each row that any gradient touched, once, in increasing order,
    with the sum of its slices divided by the number of gradients taken."""

    def __init__(self, name: str, dtype: DType, shape: Optional[tuple], max_accumulated: int = 0):
        super().__init__(name, dtype, shape, max_accumulated)
        self._parts: list = []

    def apply_sparse(self, local_step: int, indices, values) -> bool:
        idx = np.asarray(indices).astype(np.int64).reshape(-1)
        vals = self._checked_values(values)
        if vals.ndim < 1 or vals.shape[0] != idx.shape[0]:
            raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                         f"accumulator '{self.name}': {idx.shape[0]} indices for values of "
                         f"shape {list(vals.shape)}")
        return self._apply(local_step, lambda: self._add_rows(idx, vals))

    def _add_rows(self, idx: np.ndarray, vals: np.ndarray) -> None:
        want = self.shape
        if want is not None:
            self._check_shape((want[0],) + tuple(vals.shape[1:]))
            rows = want[0]
            if rows is not None and idx.size and (idx.min() < 0 or idx.max() >= rows):
                bad = idx[(idx < 0) | (idx >= rows)][0]
                raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                             f"accumulator '{self.name}': row index {int(bad)} is out of range "
                             f"[0, {rows})")
        if self._parts and self._parts[0][1].shape[1:] != vals.shape[1:]:
            raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                         f"accumulator '{self.name}' holds rows of shape "
                         f"{list(self._parts[0][1].shape[1:])} this step, got "
                         f"{list(vals.shape[1:])}")
        self._parts.append((idx.copy(), vals.astype(self.dtype.np, copy=True)))

    def _mean_and_reset(self):
        idx = np.concatenate([p[0] for p in self._parts])
        vals = np.concatenate([p[1] for p in self._parts])
        rows, where = np.unique(idx, return_inverse=True)
        sums = np.zeros((rows.shape[0],) + vals.shape[1:], self.dtype.np)
        np.add.at(sums, where, vals)
        self._parts = []
        first = self.shape[0] if self.shape is not None and self.shape[0] is not None else \
            (int(rows.max()) + 1 if rows.size else 0)
        dense = np.array([first] + list(vals.shape[1:]), np.int64)
        return rows.astype(np.int64), (sums / self._count).astype(self.dtype.np), dense


# --- the store's accumulators -------------------------------------------------------------
_LOCK = threading.Lock()


def accumulator(store: ResourceStore, name: str, dtype: DType, shape: Optional[Sequence],
                max_accumulated: int = 0, sparse: bool = False) -> Accumulator:
    """The accumulator ``name`` of ``store`` (created when missing; a mismatch is an error)."""
    kind = SparseAccumulator if sparse else Accumulator
    with _LOCK:
        table: Dict[str, Accumulator] = store.accumulators
        acc = table.get(name)
        if acc is None:
            acc = table[name] = kind(name, dtype, None if shape is None else tuple(shape),
                                     max_accumulated)
    if type(acc) is not kind:
        raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                     f"accumulator '{name}' exists as a {type(acc).__name__}; this graph "
                     f"uses it as a {kind.__name__}")
    if acc.dtype is not dtype or acc.max_accumulated != int(max_accumulated):
        raise _error(InvalidArgumentError, _INVALID_ARGUMENT,
                     f"accumulator '{name}' exists with dtype {acc.dtype.ir_name} and "
                     f"max_accumulated={acc.max_accumulated}; this graph declares "
                     f"{dtype.ir_name} and {int(max_accumulated)}")
    return acc


def accumulator_from_attrs(store: ResourceStore, attrs: dict) -> Accumulator:
    """The accumulator an op's host-call attrs name (``name``, ``dtype``, ``shape``,
    ``max_accumulated``)."""
    shape = attrs.get("shape")
    return accumulator(store, attrs["name"], DType.parse(attrs["dtype"]),
                       None if shape is None else tuple(shape), attrs.get("max_accumulated", 0),
                       bool(attrs.get("sparse", False)))


# --- host ops: how the C kernels reach an accumulator --------------------------------------
# Each gets the kernel's node name, its attrs (JSON: the accumulator's name, dtype, shape and
# max_accumulated) and its inputs; timeouts come in as an i64 scalar (the step's deadline).
def _apply_host(store, node, attrs, local_step, gradient):
    accumulator_from_attrs(store, attrs).apply(int(local_step), gradient)
    return []


def _take_host(store, node, attrs, num_required, timeout_ms):
    return [accumulator_from_attrs(store, attrs).take(int(num_required), int(timeout_ms))]


def _sparse_apply_host(store, node, attrs, local_step, indices, values):
    accumulator_from_attrs(store, attrs).apply_sparse(int(local_step), indices, values)
    return []


def _sparse_take_host(store, node, attrs, num_required, timeout_ms):
    return list(accumulator_from_attrs(store, attrs).take(int(num_required), int(timeout_ms)))


def _num_accumulated_host(store, node, attrs):
    return [np.array(accumulator_from_attrs(store, attrs).num_accumulated(), np.int32)]


def _set_global_step_host(store, node, attrs, step):
    accumulator_from_attrs(store, attrs).set_global_step(int(step))
    return []


def _counts_host(store, node, attrs):
    dropped, stale = accumulator_from_attrs(store, attrs).counts()
    return [np.array(dropped, np.int64), np.array(stale, np.int64)]


def _close_host(store, node, attrs):
    accumulator_from_attrs(store, attrs).close()
    return []


HOST_OPS = {"AccumulatorApplyGradient": _apply_host, "AccumulatorTakeGradient": _take_host,
            "AccumulatorNumAccumulated": _num_accumulated_host,
            "AccumulatorSetGlobalStep": _set_global_step_host,
            "AccumulatorDropCounts": _counts_host, "AccumulatorClose": _close_host,
            "SparseAccumulatorApplyGradient": _sparse_apply_host,
            "SparseAccumulatorTakeGradient": _sparse_take_host}
for _name, _fn in HOST_OPS.items():
    register_host_op(_name, _fn)
