"""Cluster specs: which tasks of which jobs exist, and where they listen.

A spec is TensorFlow's: ``{"ps": ["localhost:2222"], "worker": ["localhost:2223", ...]}``
(task ``k`` of a job is its ``k``-th address). ``TF_CONFIG`` holds one as ``"cluster"``, with
the process's own ``"task": {"type": "worker", "index": 0}``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from runtime.errors import FlowcError

_JOB = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_DEVICE_TASK = re.compile(r"^/job:([^/]+)/replica:(\d+)/task:(\d+)(/|$)")


class ClusterSpecError(FlowcError):
    """A cluster spec (or TF_CONFIG) is malformed, or names a task that does not exist."""


@dataclass(frozen=True)
class ClusterSpec:
    jobs: Dict[str, Tuple[str, ...]]

    @staticmethod
    def from_json(obj, where: str = "cluster spec") -> "ClusterSpec":
        if not isinstance(obj, dict) or not obj:
            raise ClusterSpecError(f"{where}: expected an object mapping job names to lists of "
                                   "addresses, like {\"ps\": [\"localhost:2222\"]}")
        jobs = {}
        for job, addrs in obj.items():
            if not isinstance(job, str) or not _JOB.match(job):
                raise ClusterSpecError(f"{where}: bad job name {job!r}")
            if isinstance(addrs, dict):          # TF's sparse form {"0": "host:port"}
                try:
                    addrs = [addrs[k] for k in sorted(addrs, key=int)]
                except ValueError:
                    raise ClusterSpecError(f"{where}: job '{job}' has non-integer task ids") from None
            if not isinstance(addrs, list) or not addrs or \
                    not all(isinstance(a, str) and _split(a) for a in addrs):
                raise ClusterSpecError(f"{where}: job '{job}' needs a list of host:port addresses")
            jobs[job] = tuple(addrs)
        return ClusterSpec(jobs)

    @staticmethod
    def load(path: str) -> "ClusterSpec":
        try:
            with open(path) as f:
                obj = json.load(f)
        except json.JSONDecodeError as e:
            raise ClusterSpecError(f"{path}: not valid JSON: {e}") from None
        return ClusterSpec.from_json(obj, path)

    def to_json(self) -> dict:
        return {job: list(addrs) for job, addrs in self.jobs.items()}

    def address(self, job: str, task: int) -> str:
        addrs = self.jobs.get(job)
        if addrs is None:
            raise ClusterSpecError(f"the cluster has no job '{job}' (jobs: "
                                   f"{', '.join(self.jobs)})")
        if not 0 <= task < len(addrs):
            raise ClusterSpecError(f"job '{job}' has {len(addrs)} task(s); there is no task {task}")
        return addrs[task]

    def with_address(self, job: str, task: int, address: str) -> "ClusterSpec":
        """This spec with task ``task`` of ``job`` at ``address`` (a task listed at port 0
        names the port it was given once it listens)."""
        self.address(job, task)
        addrs = list(self.jobs[job])
        addrs[task] = address
        return ClusterSpec({**self.jobs, job: tuple(addrs)})

    def tasks(self) -> List[Tuple[str, int, str]]:
        """Every (job, task, address), jobs in spec order."""
        return [(job, k, a) for job, addrs in self.jobs.items() for k, a in enumerate(addrs)]

    def devices(self) -> List[str]:
        """The full device names the cluster offers: one CPU per task."""
        return [task_device(job, k) for job, k, _ in self.tasks()]


def task_device(job: str, task: int, kind: str = "CPU", index: int = 0) -> str:
    return f"/job:{job}/replica:0/task:{task}/device:{kind}:{index}"


def task_of_device(device: str) -> Optional[Tuple[str, int]]:
    """``("ps", 0)`` for ``/job:ps/replica:0/task:0/device:CPU:0`` (None if it names no task)."""
    m = _DEVICE_TASK.match(device or "")
    return (m.group(1), int(m.group(3))) if m else None


def _split(address: str) -> Optional[Tuple[str, int]]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        return None
    return host, int(port)


def split_address(address: str) -> Tuple[str, int]:
    hp = _split(address)
    if hp is None:
        raise ClusterSpecError(f"bad address {address!r}: expected host:port")
    return hp


def parse_tf_config(text: str) -> Tuple[ClusterSpec, Optional[str], Optional[int]]:
    """The cluster and this process's (job, task) from a ``TF_CONFIG`` value."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ClusterSpecError(f"TF_CONFIG is not valid JSON: {e}") from None
    if not isinstance(obj, dict) or "cluster" not in obj:
        raise ClusterSpecError("TF_CONFIG has no \"cluster\"")
    cluster = ClusterSpec.from_json(obj["cluster"], "TF_CONFIG cluster")
    task = obj.get("task") or {}
    if not isinstance(task, dict):
        raise ClusterSpecError("TF_CONFIG \"task\" must be an object {\"type\": ..., \"index\": ...}")
    job, index = task.get("type"), task.get("index", 0)
    if job is not None and not isinstance(job, str):
        raise ClusterSpecError("TF_CONFIG task type must be a job name")
    if not isinstance(index, int) or isinstance(index, bool):
        raise ClusterSpecError("TF_CONFIG task index must be an integer")
    return cluster, job, index
