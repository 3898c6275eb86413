"""``fl.train.SyncReplicasOptimizer``: synchronous data-parallel training, with backup workers,
built from ordinary graph ops (the paper's section 4.4 and Figure 4).

Each of ``n = total_num_replicas`` replicas builds its own graph over shared variables
(between-graph replication) and wraps its optimizer::

    opt = fl.train.SyncReplicasOptimizer(fl.train.GradientDescentOptimizer(0.1),
                                         replicas_to_aggregate=m, total_num_replicas=n,
                                         replica_id=k)
    train_op = opt.minimize(loss, global_step=fl.train.get_or_create_global_step())

What the graph holds (shared by name on the parameter servers):

- one ``ConditionalAccumulator`` per variable, on its device (its task), that keeps the first ``m``
  fresh gradients of a step (``max_accumulated = m``); a ``SparseConditionalAccumulator``
  where the gradient is ``IndexedSlices`` (an embedding's), so the update stays sparse;
- one token queue per replica (int64 tokens), on the global step's device;
- per replica, a local step (the step its gradients are computed for), also with the global
  step and named after the optimizer and the replica (``sync_replicas_local_step_0``).

A replica's ``train_op`` applies its gradients to the accumulators tagged with its local step,
then dequeues one token from its own queue (a barrier: the token comes when the chief has
applied the step) and sets its local step to the global step. The chief's ``sync_op`` (run in
a loop by ``get_chief_queue_runner()``) takes ``m`` gradients from every accumulator (their
mean), applies them with the wrapped optimizer, increments the global step and puts one token
in every replica's queue.

So a replica is never more than one step ahead, and never contributes twice to one step (its
own queue holds only tokens meant for it; TensorFlow shares one queue, where a fast replica can
take a slow one's token). A gradient that arrives after ``m`` others for its step is dropped
(a backup worker's: ``num_dropped_gradients``); one computed for a step that is already
applied is stale (``num_stale_gradients``). Both count per variable: a replica whose whole
gradient is dropped adds one per accumulator.

End of input: ``end_of_input_op`` closes every accumulator and token queue. Any replica runs it
when its input runs out (and the chief's queue runner runs it when it stops). Then a waiting
take ends with ``OutOfRangeError``, a waiting token dequeue with ``OutOfRangeError``, a later
gradient apply with ``AbortedError``: every replica's loop ends on
``(fl.OutOfRangeError, fl.AbortedError)`` instead of waiting, and the step in flight is not
applied (every variable update waits for every take). The protocol, step by step, is in
``docs/distributed.md``.
"""
from __future__ import annotations

import contextlib
from typing import List, Optional

from dsl.accumulator_ops import ConditionalAccumulator, SparseConditionalAccumulator
from dsl.context import colocate_with, control_dependencies, device, name_scope
from dsl.control_ops import group
from dsl.indexed_slices import IndexedSlices
from dsl.math_ops import add_n
from dsl.queues import FIFOQueue, QueueRunner
from dsl.tensor import Operation, Tensor, static_shape
from dsl.train.optimizer import Optimizer, _init_scope
from dsl.variables import GraphKeys, Variable
from runtime.dtypes import DType

__all__ = ["SyncReplicasOptimizer"]


class SyncReplicasOptimizer(Optimizer):
    """Aggregates the first ``replicas_to_aggregate`` of ``total_num_replicas`` gradients of
    each step and applies their mean with ``opt`` (``tf.train.SyncReplicasOptimizer``)."""

    def __init__(self, opt: Optimizer, replicas_to_aggregate: int,
                 total_num_replicas: Optional[int] = None, replica_id: int = 0,
                 use_locking: bool = False, name: str = "sync_replicas"):
        super().__init__(use_locking, name)
        m = int(replicas_to_aggregate)
        n = m if total_num_replicas is None else int(total_num_replicas)
        if not isinstance(opt, Optimizer):
            raise TypeError(f"SyncReplicasOptimizer wraps an fl.train optimizer, got "
                            f"{type(opt).__name__}")
        if not 1 <= m <= n:
            raise ValueError(f"need 1 <= replicas_to_aggregate ({m}) <= total_num_replicas ({n})")
        if not 0 <= int(replica_id) < n:
            raise ValueError(f"replica_id {replica_id} is not one of the {n} replicas")
        self._opt = opt
        self.replicas_to_aggregate = m
        self.total_num_replicas = n
        self.replica_id = int(replica_id)
        self._built = False

    # --- gradients: the wrapped optimizer's ----------------------------------------------
    def compute_gradients(self, *args, **kwargs):
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step: Optional[Variable] = None,
                        name: Optional[str] = None) -> Operation:
        """This replica's train op (apply to the accumulators, then wait for a token); also
        builds the chief's ``sync_op`` and the other ops of the protocol."""
        if global_step is None:
            raise ValueError("SyncReplicasOptimizer needs the global_step")
        if self._built:
            raise RuntimeError("apply_gradients was already called on this "
                               "SyncReplicasOptimizer; make one per train op")
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        m, n = self.replicas_to_aggregate, self.total_num_replicas
        with name_scope(name or self._name):
            self._local_step = self._make_local_step(global_step)
            self._token_queues = self._make_token_queues(global_step)
            self._accumulators = [self._make_accumulator(v, isinstance(g, IndexedSlices))
                                  for g, v in pairs]
            train_op = self._replica_train_op(pairs, global_step)
            takes = []
            for acc, (_, v) in zip(self._accumulators, pairs):
                with _placed_with(v):
                    if isinstance(acc, SparseConditionalAccumulator):
                        takes.append(acc.take_indexed_slices_grad(m, name=f"take_{v.op.name}"))
                    else:
                        takes.append(acc.take_grad(m, name=f"take_{v.op.name}"))
            # Every update waits for every take: a step cut short by end of input applies
            # nothing.
            with control_dependencies([t.values if isinstance(t, IndexedSlices) else t
                                       for t in takes]):
                update = self._opt.apply_gradients(
                    [(t, v) for t, (_, v) in zip(takes, pairs)], global_step=global_step)
            with control_dependencies([update]), _placed_with(global_step):
                step = global_step.read_value()
                self.sync_op = group(*[q.enqueue([step]) for q in self._token_queues],
                                     name="sync_op")
            with colocate_with(global_step.handle):
                step = global_step.read_value()
            with _placed_with(global_step):
                self.chief_init_op = group(*[a.set_global_step(step)
                                             for a in self._accumulators], name="chief_init")
            self.local_step_init_op = self._local_step.assign(step, read_value=False,
                                                              name="local_step_init")
            with _placed_with(global_step):
                closes = [q.close(cancel_pending_enqueues=True) for q in self._token_queues]
            self.end_of_input_op = group(*[a.close() for a in self._accumulators], *closes,
                                         name="end_of_input")
            counts = [a.dropped_counts() for a in self._accumulators]
            self.num_dropped_gradients = _total([c[0] for c in counts], "num_dropped_gradients")
            self.num_stale_gradients = _total([c[1] for c in counts], "num_stale_gradients")
        self._built = True
        return train_op

    # --- the protocol's helpers -------------------------------------------------------------
    @property
    def local_step(self) -> Variable:
        self._check_built()
        return self._local_step

    def get_chief_queue_runner(self) -> QueueRunner:
        """Runs ``sync_op`` in a thread until the accumulators close (or the coordinator
        stops it); then runs ``end_of_input_op`` so the replicas end too."""
        self._check_built()
        return QueueRunner(self._token_queues[0], [self.sync_op], close_op=self.end_of_input_op,
                           cancel_op=self.end_of_input_op)

    def start_chief(self, sess, coord=None):
        """``chief_init_op``, then the chief queue runner's thread (started); returns it."""
        self._check_built()
        sess.run(self.chief_init_op)
        (thread, *rest) = self.get_chief_queue_runner().create_threads(sess, coord, start=True)
        return [thread, *rest]

    def _check_built(self) -> None:
        if not self._built:
            raise RuntimeError("call apply_gradients (or minimize) first")

    # --- building blocks --------------------------------------------------------------------
    def _make_local_step(self, global_step: Variable) -> Variable:
        with _init_scope(), _placed_with(global_step):
            return Variable(0, dtype=DType.i64, trainable=False,
                            name=f"{self._name}_local_step_{self.replica_id}",
                            collections=[GraphKeys.LOCAL_VARIABLES])

    def _make_token_queues(self, global_step: Variable) -> List[FIFOQueue]:
        with _init_scope(), _placed_with(global_step):
            return [FIFOQueue(-1, [DType.i64], shapes=[[]],
                              shared_name=f"{self._name}/token_queue_{k}",
                              name=f"sync_token_q_{k}")
                    for k in range(self.total_num_replicas)]

    def _make_accumulator(self, var: Variable, sparse: bool) -> ConditionalAccumulator:
        if static_shape(var) is None:
            raise ValueError(f"SyncReplicasOptimizer needs the rank of {var.name}")
        kind = SparseConditionalAccumulator if sparse else ConditionalAccumulator
        with _init_scope(), _placed_with(var):
            return kind(var.dtype, static_shape(var),
                                          shared_name=f"{var.op.name}/grad_accum",
                                          max_accumulated=self.replicas_to_aggregate,
                                          name=f"{var.op.name}_grad_accum")

    def _replica_train_op(self, pairs, global_step: Variable) -> Operation:
        local = self._local_step.value()
        applies = []
        for acc, (g, v) in zip(self._accumulators, pairs):
            with _placed_with(v):
                if isinstance(g, IndexedSlices):
                    applies.append(acc.apply_indexed_slices_grad(g, local,
                                                                 name=f"apply_{v.op.name}"))
                else:
                    applies.append(acc.apply_grad(g, local, name=f"apply_{v.op.name}"))
        own = self._token_queues[self.replica_id]
        with control_dependencies(applies), _placed_with(global_step):
            token = own.dequeue(name="wait_for_token")
        with control_dependencies([token]), colocate_with(global_step.handle):
            step = global_step.read_value()
            return self._local_step.assign(step, read_value=False, name="train_op")

    # --- what the wrapped optimizer has -----------------------------------------------------
    def get_slot(self, var: Variable, name: str):
        return self._opt.get_slot(var, name)

    def get_slot_names(self) -> List[str]:
        return self._opt.get_slot_names()

    def variables(self) -> List[Variable]:
        return self._opt.variables()


@contextlib.contextmanager
def _placed_with(var: Variable):
    """On ``var``'s requested device (TensorFlow's ``ops.device(var.device)``), for the
    accumulators and token queues and the ops on them: on ``var``'s task, also in a step that
    does not use ``var`` (closing the accumulators). Not colocated with ``var``: those ops have
    CPU kernels only, and a colocation would take ``var`` off its task's GPU in the steps
    that run them while the other steps keep it there."""
    with device(var.device or ""):
        yield


def _total(counts: List[Tensor], name: str) -> Tensor:
    return counts[0] if len(counts) == 1 else add_n(counts, name=name)
