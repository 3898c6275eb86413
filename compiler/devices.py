"""Device names and specs, as TensorFlow writes them.

A full device name is ``/job:NAME/replica:N/task:N/device:TYPE:N``. A spec may leave fields out
(``/job:ps``, ``/device:GPU:*``, ``cpu:0``) and then matches every device that agrees with the
fields it has. Specs nest: an inner ``fl.device`` block refines the outer one, its fields win.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional

from compiler.errors import GraphError

FIELDS = ("job", "replica", "task", "device")
_LEGACY = re.compile(r"^(cpu|gpu|CPU|GPU)(:(\d+|\*))?$")
_TYPE_INDEX = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(:(\d+|\*))?$")

LOCAL_JOB = "localhost"


def parse_device_spec(spec: str) -> Dict[str, str]:
    """``/job:ps/task:0/device:CPU:0`` (or ``/cpu:0``) into its fields; raises GraphError."""
    fields: Dict[str, str] = {}
    for part in (spec or "").strip().split("/"):
        if not part:
            continue
        m = _LEGACY.match(part)
        if m:
            fields["device"] = f"{m.group(1).upper()}:{m.group(3) or '*'}"
            continue
        key, sep, value = part.partition(":")
        if not sep or key not in FIELDS or not value:
            raise GraphError(f"bad device spec '{spec}': '{part}' is not job:NAME, replica:N, "
                             "task:N or device:TYPE:N")
        if key == "device":
            m = _TYPE_INDEX.match(value)
            if not m:
                raise GraphError(f"bad device spec '{spec}': '{value}' is not TYPE:N")
            dtype = m.group(1)
            dtype = dtype.upper() if dtype.lower() in ("cpu", "gpu") else dtype
            value = f"{dtype}:{m.group(3) or '*'}"
        elif key in ("replica", "task") and not (value.isdigit() or value == "*"):
            raise GraphError(f"bad device spec '{spec}': {key} must be a number, got '{value}'")
        fields[key] = value
    return fields


def format_spec(fields: Dict[str, str]) -> str:
    return "".join(f"/{k}:{fields[k]}" for k in FIELDS if k in fields)


def merge_device_specs(outer: str, inner: str) -> str:
    """``inner`` refined by ``outer``: fields the inner spec leaves out come from outside."""
    fields = parse_device_spec(outer) if outer else {}
    fields.update(parse_device_spec(inner))
    return format_spec(fields)


@dataclass(frozen=True)
class Device:
    """A full device name."""
    job: str
    replica: int
    task: int
    type: str
    index: int

    @property
    def name(self) -> str:
        return (f"/job:{self.job}/replica:{self.replica}/task:{self.task}/"
                f"device:{self.type}:{self.index}")

    @property
    def short(self) -> str:
        """``CPU:1`` (the device within its task)."""
        return f"{self.type}:{self.index}"

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def parse(name: str) -> "Device":
        f = parse_device_spec(name)
        try:
            dtype, _, index = f["device"].partition(":")
            return Device(f["job"], int(f.get("replica", "0")), int(f.get("task", "0")), dtype,
                          int(index))
        except (KeyError, ValueError):
            raise GraphError(f"'{name}' is not a full device name "
                             "(/job:NAME/replica:N/task:N/device:TYPE:N)") from None

    def matches(self, spec: str | Dict[str, str]) -> bool:
        """Whether this device satisfies the (partial) ``spec``."""
        fields = parse_device_spec(spec) if isinstance(spec, str) else spec
        for key, value in fields.items():
            if key == "job" and value != self.job:
                return False
            if key == "replica" and value != "*" and int(value) != self.replica:
                return False
            if key == "task" and value != "*" and int(value) != self.task:
                return False
            if key == "device":
                dtype, _, index = value.partition(":")
                if dtype != self.type or (index not in ("", "*") and int(index) != self.index):
                    return False
        return True

    def sort_key(self):
        return (self.job, self.replica, self.task, 0 if self.type == "GPU" else 1, self.type,
                self.index)


def local_devices(cpus: int = 1, gpus: int = 0, job: str = LOCAL_JOB, task: int = 0) -> List[Device]:
    """The devices of one process: ``CPU:0..cpus-1`` and ``GPU:0..gpus-1``."""
    if cpus < 1:
        raise ValueError("a process has at least one CPU device")
    return ([Device(job, 0, task, "CPU", i) for i in range(cpus)]
            + [Device(job, 0, task, "GPU", i) for i in range(gpus)])


def device_list(names: Iterable[str]) -> List[Device]:
    return [Device.parse(n) for n in names]


def default_device(devices: List[Device]) -> Optional[Device]:
    """Where an unconstrained op with no neighbours goes: the first CPU (TF's client device)."""
    cpus = [d for d in devices if d.type == "CPU"]
    return sorted(cpus or devices, key=Device.sort_key)[0] if devices else None
