"""``fl.ConfigProto``, ``fl.RunOptions`` and ``fl.RunMetadata``: session and step options and
what a traced step reports, named as in TF 1.x."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from runtime.profile import Profile


@dataclass
class ConfigProto:
    """Session options. ``device_count={"CPU": 4}`` gives the process four CPU devices
    (``/device:CPU:0..3``) for placement; ``log_device_placement`` prints where each node of a
    compiled step went, and why; ``check_numerics`` compiles every step with checks that stop
    it at the first op producing NaN or Inf (``InvalidArgumentError`` naming the op and its
    source line)."""
    device_count: Dict[str, int] = field(default_factory=dict)
    log_device_placement: bool = False
    allow_soft_placement: bool = False
    intra_op_parallelism_threads: int = 0
    inter_op_parallelism_threads: int = 0
    check_numerics: bool = False

    @property
    def cpu_devices(self) -> int:
        n = int(self.device_count.get("CPU", 1))
        if n < 1:
            raise ValueError(f"device_count CPU must be at least 1, got {n}")
        return n


@dataclass
class RunOptions:
    """Per-step options: ``timeout_in_ms`` ends a step blocked longer than that (a receive
    between devices, a queue) with ``DeadlineExceededError``; 0 means no deadline.
    ``trace_level=RunOptions.FULL_TRACE`` (or ``SOFTWARE_TRACE``) with a ``run_metadata``
    times every kernel of the step (a separately compiled, profiled build of it)."""
    NO_TRACE = 0
    SOFTWARE_TRACE = 1
    HARDWARE_TRACE = 2
    FULL_TRACE = 3

    timeout_in_ms: int = 0
    trace_level: int = 0


@dataclass
class RunMetadata:
    """What a traced ``Session.run`` reports: ``step_stats`` is a ``runtime.profile.Profile``
    (kernels per device with their time, calls, op and source line; ``step_stats.format()``
    prints the table)."""
    step_stats: Optional[Profile] = None
