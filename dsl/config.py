"""``fl.ConfigProto`` and ``fl.RunOptions``: session and step options, named as in TF 1.x."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict


@dataclass
class ConfigProto:
    """Session options. ``device_count={"CPU": 4}`` gives the process four CPU devices
    (``/device:CPU:0..3``) for placement; ``log_device_placement`` prints where each node of a
    compiled step went, and why."""
    device_count: Dict[str, int] = field(default_factory=dict)
    log_device_placement: bool = False
    allow_soft_placement: bool = False
    intra_op_parallelism_threads: int = 0
    inter_op_parallelism_threads: int = 0

    @property
    def cpu_devices(self) -> int:
        n = int(self.device_count.get("CPU", 1))
        if n < 1:
            raise ValueError(f"device_count CPU must be at least 1, got {n}")
        return n


@dataclass
class RunOptions:
    """Per-step options: ``timeout_in_ms`` ends a step blocked longer than that (a receive
    between devices, a queue) with ``DeadlineExceededError``; 0 means no deadline."""
    timeout_in_ms: int = 0
