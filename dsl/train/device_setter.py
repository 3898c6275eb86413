"""``fl.train.replica_device_setter``: the parameter-server placement of TensorFlow 1.x, as a
device function (user-level: it only chooses device specs for ops as they are created).

Variables (``VarHandleOp`` and the other ``ps_ops``) go to the ``ps`` job, one task chosen by
``ps_strategy`` per variable (round-robin by default, or ``GreedyLoadBalancingStrategy`` that
puts each variable on the task with the fewest bytes so far); every other op goes to
``worker_device``. The place pass then colocates each variable's reads, updates and optimizer
slots with it, so the parameters and their updates live on the ps tasks.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, List, Optional

from compiler.devices import merge_device_specs, parse_device_spec
from dsl.train.server_lib import ClusterSpec

__all__ = ["replica_device_setter", "RoundRobinStrategy", "GreedyLoadBalancingStrategy",
           "byte_size_load_fn"]

STANDARD_PS_OPS = ("VarHandleOp", "VariableV2", "Variable", "FIFOQueueV2",
                   "RandomShuffleQueueV2", "PaddingFIFOQueueV2")


class RoundRobinStrategy:
    """Task 0, 1, ..., n-1, 0, ... in creation order."""

    def __init__(self, num_tasks: int):
        if num_tasks < 1:
            raise ValueError(f"RoundRobinStrategy needs at least one task, got {num_tasks}")
        self._num_tasks = num_tasks
        self._next = 0

    def __call__(self, op) -> int:
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


def byte_size_load_fn(op) -> int:
    """The bytes of the variable an op creates (0 when its shape is not fully known)."""
    try:
        shape = op.get_attr("shape")
        dtype = op.get_attr("dtype")
    except ValueError:
        return 0
    if shape is None or any(d is None for d in shape):
        return 0
    return math.prod(shape) * dtype.itemsize


class GreedyLoadBalancingStrategy:
    """Each variable on the task with the least load so far (ties: the lowest task)."""

    def __init__(self, num_tasks: int, load_fn: Callable = byte_size_load_fn):
        if num_tasks < 1:
            raise ValueError(f"GreedyLoadBalancingStrategy needs at least one task, got {num_tasks}")
        self._load_fn = load_fn
        self.loads: List[int] = [0] * num_tasks

    def __call__(self, op) -> int:
        task = min(range(len(self.loads)), key=lambda k: (self.loads[k], k))
        self.loads[task] += self._load_fn(op)
        return task


def replica_device_setter(ps_tasks: int = 0, ps_device: str = "/job:ps",
                          worker_device: str = "/job:worker", merge_devices: bool = True,
                          cluster=None, ps_ops: Optional[Iterable[str]] = None,
                          ps_strategy: Optional[Callable] = None):
    """A device function for ``fl.device(...)``: ps ops on ``ps_device/task:k``, the rest on
    ``worker_device``. ``cluster`` (a ``fl.train.ClusterSpec`` or a dict like ``{"ps": [...],
    "worker": [...]}``) gives the number of ps tasks: those of ``ps_device``'s job, as in
    TensorFlow. With no ps tasks, returns None (no placement)."""
    if cluster is not None:
        spec = ClusterSpec(cluster)
        ps_job = parse_device_spec(ps_device).get("job")
        ps_tasks = spec.num_tasks(ps_job) if ps_job in spec.jobs else 0
    if not ps_tasks:
        return None
    ps_ops = tuple(ps_ops) if ps_ops is not None else STANDARD_PS_OPS
    strategy = ps_strategy if ps_strategy is not None else RoundRobinStrategy(ps_tasks)

    def choose(op) -> str:
        if op.type in ps_ops:
            spec = ps_device
            if ps_tasks > 1 or ps_strategy is not None:
                spec = merge_device_specs(spec, f"/task:{strategy(op)}")
            elif "/task:" not in spec:
                spec = merge_device_specs(spec, "/task:0")
            return spec
        return worker_device or ""

    return choose
