"""``fl.FIFOQueue``, ``fl.train.Coordinator`` and ``fl.train.QueueRunner`` (TensorFlow 1.x).

A queue is state in the graph: ``FIFOQueueV2`` plus enqueue/dequeue ops. Steps that enqueue
(preprocessing) and steps that dequeue (training) run concurrently in one session; a full
queue blocks its producers (backpressure), an empty one its consumers. ``QueueRunner`` runs
enqueue steps in threads and ``Coordinator`` stops them together, as in TensorFlow.

The queue's own ops (enqueue, dequeue, close, size) are made under ``colocate_with`` the queue,
as a variable's reads are: they run where the queue lives whatever ``device`` block encloses
them (the values they enqueue are made, and placed, outside it).
"""
from __future__ import annotations

import sys
import threading
from typing import Dict, List, Optional, Sequence

from dsl.context import colocate_with, name_scope
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Operation, Tensor
from runtime.dtypes import as_dtype
from runtime.errors import AbortedError, CancelledError, OutOfRangeError

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "QueueBase"]

_SWITCH_INTERVAL = 0.001        # seconds; see QueueRunner.create_threads


class QueueBase:
    def __init__(self, capacity: int, dtypes, shapes=None, names=None,
                 shared_name: Optional[str] = None, name: str = "fifo_queue",
                 _op: str = "FIFOQueueV2", _attrs: Optional[dict] = None):
        dtypes = [as_dtype(d) for d in (dtypes if isinstance(dtypes, (list, tuple)) else [dtypes])]
        if shapes is not None:
            shapes = [list(s) for s in shapes] if isinstance(shapes[0], (list, tuple)) or \
                not shapes else [list(shapes)]
            if len(shapes) != len(dtypes):
                raise ValueError(f"{len(shapes)} shapes for {len(dtypes)} dtypes")
        if names is not None and len(names) != len(dtypes):
            raise ValueError(f"{len(names)} names for {len(dtypes)} dtypes")
        self.dtypes = dtypes
        self.shapes = shapes
        self.names = list(names) if names is not None else None
        attrs = {"component_types": dtypes, "capacity": int(capacity),
                 "shared_name": shared_name or ""}
        if shapes is not None:
            attrs["shapes"] = [tuple(None if d is None or d < 0 else d for d in s)
                               for s in shapes]
        attrs.update(_attrs or {})
        self.queue_ref = apply_op(_op, [], attrs, name=name)
        self.name = self.queue_ref.op.name

    @classmethod
    def from_queue_ref(cls, queue_ref: Tensor) -> "QueueBase":
        """The queue of an existing queue op (an imported graph's): adds no op."""
        node = queue_ref.op.node
        self = cls.__new__(cls)
        self.queue_ref = queue_ref
        self.name = node.name
        self.dtypes = list(node.attrs["component_types"])
        shapes = node.attrs.get("shapes") or None
        self.shapes = None if shapes is None else [
            list(s) if s is not None else None for s in shapes]
        self.names = None
        return self

    def _components(self, vals) -> List[Tensor]:
        if isinstance(vals, dict):
            if self.names is None:
                raise TypeError("this queue has no component names; enqueue a list")
            missing = set(self.names) - set(vals)
            if missing:
                raise ValueError(f"missing components: {', '.join(sorted(missing))}")
            vals = [vals[n] for n in self.names]
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self.dtypes):
            raise ValueError(f"queue '{self.name}' has {len(self.dtypes)} components, "
                             f"got {len(vals)} values")
        return [convert_to_tensor(v, dtype=d) for v, d in zip(vals, self.dtypes)]

    def _result(self, outs):
        outs = outs if isinstance(outs, list) else [outs]
        if self.names is not None:
            return dict(zip(self.names, outs))
        return outs[0] if len(outs) == 1 else outs

    def _op(self, op: str, inputs: list, attrs: dict, name: str):
        with colocate_with(self.queue_ref):
            return apply_op(op, [self.queue_ref] + inputs, attrs, name=name)

    def enqueue(self, vals, name: Optional[str] = None) -> Operation:
        return self._op("QueueEnqueueV2", [self._components(vals)], {},
                        name or f"{self.name}_enqueue")

    def enqueue_many(self, vals, name: Optional[str] = None) -> Operation:
        return self._op("QueueEnqueueManyV2", [self._components(vals)], {},
                        name or f"{self.name}_EnqueueMany")

    def dequeue(self, name: Optional[str] = None):
        return self._result(self._op("QueueDequeueV2", [], {"component_types": self.dtypes},
                                     name or f"{self.name}_Dequeue"))

    def dequeue_many(self, n, name: Optional[str] = None):
        return self._result(self._op("QueueDequeueManyV2", [convert_to_tensor(n, dtype="i32")],
                                     {"component_types": self.dtypes},
                                     name or f"{self.name}_DequeueMany"))

    def dequeue_up_to(self, n, name: Optional[str] = None):
        return self._result(self._op("QueueDequeueUpToV2", [convert_to_tensor(n, dtype="i32")],
                                     {"component_types": self.dtypes},
                                     name or f"{self.name}_DequeueUpTo"))

    def close(self, cancel_pending_enqueues: bool = False, name: Optional[str] = None) -> Operation:
        return self._op("QueueCloseV2", [],
                        {"cancel_pending_enqueues": bool(cancel_pending_enqueues)},
                        name or f"{self.name}_Close")

    def size(self, name: Optional[str] = None) -> Tensor:
        return self._op("QueueSizeV2", [], {}, name or f"{self.name}_Size")


class FIFOQueue(QueueBase):
    """``FIFOQueue(capacity, dtypes, shapes=None, names=None, shared_name=None)``; the C
    backend needs ``shapes`` (static) to batch with ``dequeue_many``/``dequeue_up_to``."""


class PaddingFIFOQueue(QueueBase):
    """``PaddingFIFOQueue(capacity, dtypes, shapes, names=None, shared_name=None)``
    (``tf.PaddingFIFOQueue``): ``shapes`` is required, each of known rank, and a dim of None
    (or -1) takes elements of any size there; ``dequeue_many``/``dequeue_up_to`` pad each
    batch with zeros to its largest element in those dims."""

    def __init__(self, capacity: int, dtypes, shapes, names=None,
                 shared_name: Optional[str] = None, name: str = "padding_fifo_queue"):
        n = len(dtypes) if isinstance(dtypes, (list, tuple)) else 1
        if shapes is None:
            raise ValueError("a PaddingFIFOQueue needs shapes (of known rank; None for a dim "
                             "to pad)")
        listed = [list(s) for s in shapes] if shapes and isinstance(shapes[0], (list, tuple)) \
            else [list(shapes)] if n == 1 and shapes is not None and not (
                len(shapes) == 1 and shapes[0] is None) else None
        if listed is None or len(listed) != n:
            raise ValueError(f"a PaddingFIFOQueue needs a shape of known rank for each of its "
                             f"{n} components, got {shapes!r}")
        super().__init__(capacity, dtypes, shapes=listed, names=names, shared_name=shared_name,
                         name=name, _op="PaddingFIFOQueueV2")


class RandomShuffleQueue(QueueBase):
    """``RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shapes=None, names=None,
    seed=None, shared_name=None)``: dequeues take random elements, and (until the queue is
    closed) only while ``min_after_dequeue`` elements would remain, so what comes out is
    mixed from at least that many (``tf.RandomShuffleQueue``). ``seed`` as for the random
    ops (``fl.set_random_seed`` and the op seed): a program draws the same order each run."""

    def __init__(self, capacity: int, min_after_dequeue: int, dtypes, shapes=None, names=None,
                 seed: Optional[int] = None, shared_name: Optional[str] = None,
                 name: str = "random_shuffle_queue"):
        from dsl.random_ops import op_seeds
        s, s2 = op_seeds(seed)
        super().__init__(capacity, dtypes, shapes=shapes, names=names, shared_name=shared_name,
                         name=name, _op="RandomShuffleQueueV2",
                         _attrs={"min_after_dequeue": int(min_after_dequeue), "seed": s,
                                 "seed2": s2})
        self.min_after_dequeue = int(min_after_dequeue)


# --- threads that feed queues --------------------------------------------------------------
class Coordinator:
    """Stops a set of threads together (``tf.train.Coordinator``)."""

    def __init__(self, clean_stop_exception_types=(OutOfRangeError,)):
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._exc: Optional[BaseException] = None
        self._clean = tuple(clean_stop_exception_types)
        self._threads: List[threading.Thread] = []

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, ex: Optional[BaseException] = None) -> None:
        with self._lock:
            if ex is not None and self._exc is None and not isinstance(ex, self._clean):
                self._exc = ex
            self._stop.set()

    def wait_for_stop(self, timeout: Optional[float] = None) -> bool:
        return self._stop.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        self._threads.append(thread)

    def join(self, threads: Optional[Sequence[threading.Thread]] = None,
             stop_grace_period_secs: float = 120.0) -> None:
        """Wait for the threads; re-raise the first error one of them reported."""
        for t in list(threads or []) + self._threads:
            t.join(stop_grace_period_secs)
            if t.is_alive():
                raise RuntimeError(f"thread {t.name} did not stop within "
                                   f"{stop_grace_period_secs} s of the stop request")
        if self._exc is not None:
            raise self._exc

    class _StopOnException:
        def __init__(self, coord):
            self.coord = coord

        def __enter__(self):
            return self

        def __exit__(self, kind, value, tb):
            if value is not None:
                self.coord.request_stop(value)
            return value is not None

    def stop_on_exception(self):
        return Coordinator._StopOnException(self)


class QueueRunner:
    """Runs ``enqueue_ops`` in threads, one thread per op, until the coordinator stops them or
    the input runs out; then closes the queue so its consumers finish (``tf.train.QueueRunner``)."""

    def __init__(self, queue: QueueBase, enqueue_ops: Sequence[Operation], close_op=None,
                 cancel_op=None):
        self.queue = queue
        self.enqueue_ops = list(enqueue_ops)
        self.close_op = close_op if close_op is not None else queue.close()
        self.cancel_op = cancel_op if cancel_op is not None else queue.close(True)
        self._running = 0
        self._lock = threading.Lock()

    # --- meta graphs -----------------------------------------------------------------------
    def to_proto(self, export_scope: Optional[str] = None) -> dict:
        """What a meta graph keeps (TensorFlow's ``QueueRunnerDef``, as JSON)."""
        return {"queue_name": self.queue.queue_ref.name,
                "enqueue_op_name": [op.name for op in self.enqueue_ops],
                "close_op_name": self.close_op.name, "cancel_op_name": self.cancel_op.name}

    @classmethod
    def from_proto(cls, queue_runner_def: dict, import_scope: str = "",
                   graph=None) -> "QueueRunner":
        """The runner of ``queue_runner_def`` (``to_proto``) over ops already in ``graph``."""
        from dsl.context import get_default_graph
        g = graph if graph is not None else get_default_graph()
        p = import_scope or ""
        queue = QueueBase.from_queue_ref(Tensor(g.output(p + queue_runner_def["queue_name"])))
        return cls(queue, [Operation(g.node(p + n)) for n in queue_runner_def["enqueue_op_name"]],
                   close_op=Operation(g.node(p + queue_runner_def["close_op_name"])),
                   cancel_op=Operation(g.node(p + queue_runner_def["cancel_op_name"])))

    def _run(self, sess, op, coord: Optional[Coordinator]) -> None:
        try:
            while coord is None or not coord.should_stop():
                sess.run(op)
        except (OutOfRangeError, CancelledError, AbortedError):
            pass                                     # the input ran out, or the queue closed
        except Exception as e:                       # noqa: BLE001  (handed to the coordinator)
            if coord is not None:
                coord.request_stop(e)
            else:
                raise
        finally:
            with self._lock:
                self._running -= 1
                last = self._running == 0
            if last:
                try:
                    sess.run(self.close_op)
                except Exception:                    # noqa: BLE001  (session closing)
                    pass

    def _cancel_on_stop(self, sess, coord: Coordinator) -> None:
        coord.wait_for_stop()
        try:
            sess.run(self.cancel_op)
        except Exception:                            # noqa: BLE001  (session closing)
            pass

    def create_threads(self, sess, coord: Optional[Coordinator] = None, daemon: bool = True,
                       start: bool = False) -> List[threading.Thread]:
        """One thread per enqueue op (plus one that cancels the queue when ``coord`` stops).

        Steps on several threads hand Python's GIL back and forth around each compiled call;
        with the default 5 ms switch interval a thread returning from C code waits that long
        (measured: 82 training steps/s with two producers, 2,000 with 1 ms), so this lowers
        the interval to 1 ms for the process.
        """
        if sys.getswitchinterval() > _SWITCH_INTERVAL:
            sys.setswitchinterval(_SWITCH_INTERVAL)
        with self._lock:
            self._running += len(self.enqueue_ops)
        threads = [threading.Thread(target=self._run, args=(sess, op, coord), daemon=daemon,
                                    name=f"QueueRunner-{self.queue.name}-{k}")
                   for k, op in enumerate(self.enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._cancel_on_stop, args=(sess, coord),
                                            daemon=True, name=f"QueueRunner-{self.queue.name}-cancel"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads
