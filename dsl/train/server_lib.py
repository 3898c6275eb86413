"""``fl.train.ClusterSpec`` and ``fl.train.Server``: TensorFlow 1.x's way for a process to be one
task of a cluster (between-graph replication)::

    cluster = fl.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
    server = fl.train.Server(cluster, job_name="worker", task_index=0)
    with fl.train.MonitoredTrainingSession(master=server.target, is_chief=True) as sess: ...

A ``Server`` runs in this process what ``flowc serve`` runs in its own (the runtime's
``TaskServer`` with the compiler's ``build_partition``), on gRPC's threads, so sessions on its
``target`` run their steps on the cluster. As ``flowc serve``: a task whose address is a
loopback one listens there; any other listens on every interface (as TensorFlow's does) and
needs a token (``FLOWC_TOKEN``).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from compiler.distributed import build_partition
from compiler.options import setting
from runtime.cluster import ClusterSpec as TaskCluster
from runtime.errors import InternalError, NotFoundError
from runtime.server import TaskServer, is_loopback_host
from runtime.transport import task_name

__all__ = ["ClusterSpec", "ClusterDef", "JobDef", "ServerDef", "Server"]


@dataclass
class JobDef:
    """One job of a ``ClusterDef``: its name and its tasks' addresses by task index."""
    name: str
    tasks: Dict[int, str] = field(default_factory=dict)


@dataclass
class ClusterDef:
    """TensorFlow's ``ClusterDef`` message: the jobs, sorted by name."""
    job: List[JobDef] = field(default_factory=list)


@dataclass
class ServerDef:
    """TensorFlow's ``ServerDef`` message: the cluster and which of its tasks a server is."""
    cluster: ClusterDef = field(default_factory=ClusterDef)
    job_name: str = ""
    task_index: int = 0
    protocol: str = ""
    default_session_config: Any = None


class ClusterSpec:
    """The jobs of a cluster and their tasks' addresses (``tf.train.ClusterSpec``).

    Built from a dict mapping job names to a list of addresses (task ``k`` is the ``k``-th)
    or to a sparse ``{task_index: address}`` dict, from another ``ClusterSpec``, or from a
    ``ClusterDef`` (anything with a ``job`` list of ``name``/``tasks`` entries, a TensorFlow
    proto included)."""

    def __init__(self, cluster):
        if isinstance(cluster, dict):
            spec = {}
            for job, tasks in cluster.items():
                if isinstance(tasks, (list, tuple)):
                    spec[job] = dict(enumerate(tasks))
                elif isinstance(tasks, dict):
                    spec[job] = {int(i): t for i, t in tasks.items()}
                else:
                    raise TypeError(f"The tasks for job {job!r} must be a list or a dictionary "
                                    "from integers to strings.")
        elif isinstance(cluster, ClusterSpec):
            spec = {job: dict(tasks) for job, tasks in cluster._spec.items()}
        elif isinstance(cluster, TaskCluster):
            spec = {job: dict(enumerate(addrs)) for job, addrs in cluster.jobs.items()}
        elif hasattr(cluster, "job"):
            spec = {job.name: {int(i): t for i, t in dict(job.tasks).items()}
                    for job in cluster.job}
        else:
            raise TypeError("`cluster` must be a dictionary mapping one or more job names to "
                            "lists of network addresses, or a `ClusterDef` protocol buffer")
        for job, tasks in spec.items():
            if not isinstance(job, str):
                raise TypeError(f"Job name {job!r} must be bytes or unicode")
            for address in tasks.values():
                if not isinstance(address, str):
                    raise TypeError(f"Task address {address!r} must be bytes or unicode")
        self._spec: Dict[str, Dict[int, str]] = spec

    def __bool__(self) -> bool:
        return bool(self._spec)

    def __eq__(self, other) -> bool:
        if isinstance(other, ClusterSpec):
            return self._spec == other._spec
        return self._spec == other

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        d = self.as_dict()
        return "ClusterSpec({" + ", ".join(f"{k!r}: {d[k]!r}" for k in sorted(d)) + "})"

    def as_dict(self) -> dict:
        """Job name -> a list of addresses where the task indices are 0..n-1, else a
        ``{task_index: address}`` dict."""
        out = {}
        for job in self.jobs:
            indices = self.task_indices(job)
            if not indices:
                out[job] = {}
            elif max(indices) + 1 == len(indices):
                out[job] = self.job_tasks(job)
            else:
                out[job] = {i: self.task_address(job, i) for i in indices}
        return out

    def as_cluster_def(self) -> ClusterDef:
        return ClusterDef([JobDef(job, dict(sorted(tasks.items())))
                           for job, tasks in sorted(self._spec.items())])

    @property
    def jobs(self) -> List[str]:
        return list(self._spec)

    def _job(self, job_name: str) -> Dict[int, str]:
        try:
            return self._spec[job_name]
        except (KeyError, TypeError):
            raise ValueError(f"No such job in cluster: {job_name!r}") from None

    def num_tasks(self, job_name: str) -> int:
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> List[int]:
        return sorted(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        job = self._job(job_name)
        try:
            return job[task_index]
        except (KeyError, TypeError):
            raise ValueError(f"No task with index {task_index!r} in job {job_name!r}") from None

    def job_tasks(self, job_name: str) -> List[Optional[str]]:
        """The job's addresses by task index, None where a sparse job has no task."""
        job = self._job(job_name)
        if not job:
            raise ValueError(f"job {job_name!r} has no tasks")
        out: List[Optional[str]] = [None] * (max(job) + 1)
        for i, address in job.items():
            out[i] = address
        return out


def _make_server_def(server_or_cluster_def, job_name, task_index, protocol,
                     config) -> ServerDef:
    """TensorFlow's rules: a ``ServerDef`` with the given fields replaced, or a cluster with
    the job (and task) that can be left out only when the cluster has one (one task)."""
    if isinstance(server_or_cluster_def, ServerDef) or (
            hasattr(server_or_cluster_def, "cluster") and
            hasattr(server_or_cluster_def, "job_name")):
        given = server_or_cluster_def
        return ServerDef(ClusterSpec(given.cluster).as_cluster_def(),
                         given.job_name if job_name is None else job_name,
                         given.task_index if task_index is None else task_index,
                         (given.protocol or "grpc") if protocol is None else protocol,
                         config if config is not None else
                         getattr(given, "default_session_config", None))
    try:
        cluster = ClusterSpec(server_or_cluster_def)
    except TypeError:
        raise TypeError("Could not convert `server_or_cluster_def` to a `tf.train.ServerDef` or "
                        "`tf.train.ClusterSpec`.") from None
    if job_name is None:
        if len(cluster.jobs) != 1:
            raise ValueError("Must specify an explicit `job_name`.")
        job_name = cluster.jobs[0]
    if task_index is None:
        indices = cluster.task_indices(job_name)
        if len(indices) != 1:
            raise ValueError("Must specify an explicit `task_index`.")
        task_index = indices[0]
    return ServerDef(cluster.as_cluster_def(), job_name, task_index,
                     "grpc" if protocol is None else protocol, config)


class Server:
    """This process's task of a cluster (``tf.train.Server``): it listens (on construction,
    as TensorFlow's) and, once started, serves the partitions sessions register with it and
    the steps they run. ``target`` is the ``grpc://`` address sessions use; ``join()`` blocks
    until the server stops (``stop()``, a flowc addition; TensorFlow's stops with its
    process)."""

    def __init__(self, server_or_cluster_def, job_name: Optional[str] = None,
                 task_index: Optional[int] = None, protocol: Optional[str] = None,
                 config=None, start: bool = True):
        self._server_def = _make_server_def(server_or_cluster_def, job_name, task_index,
                                            protocol, config)
        sd = self._server_def
        if sd.protocol != "grpc":
            raise NotFoundError(f"No server factory registered for protocol {sd.protocol!r}. "
                                "The available server factories are: [ GRPC_SERVER ]")
        cluster = ClusterSpec(sd.cluster)
        address = cluster.task_address(sd.job_name, sd.task_index) \
            if sd.task_index in cluster.task_indices(sd.job_name) else None
        if address is None:
            raise InternalError(f"Task {sd.task_index} was not defined in job "
                                f"\"{sd.job_name}\"")
        sparse = [j for j in cluster.jobs
                  if cluster.task_indices(j) != list(range(cluster.num_tasks(j)))]
        if sparse:
            raise ValueError(f"flowc's tasks need every index 0..n-1 of a job; the cluster's "
                             f"job(s) {', '.join(map(repr, sparse))} leave some out "
                             f"({cluster.as_dict()})")
        tasks = TaskCluster.from_json({j: cluster.job_tasks(j) for j in cluster.jobs},
                                      "the server's cluster")
        host = address.rpartition(":")[0].strip("[]")
        bind = ("127.0.0.1" if host.lower() == "localhost" else host) \
            if is_loopback_host(host) else "0.0.0.0"
        self._task = TaskServer(tasks, sd.job_name, sd.task_index, build=build_partition,
                                host=bind, token=setting("FLOWC_TOKEN") or None)
        # on every interface, this process reaches it as localhost (TensorFlow's target)
        self._target = f"grpc://localhost:{self._task.port}" if bind == "0.0.0.0" \
            else f"grpc://{self._task.address}"
        self._started = False
        self._lock = threading.Lock()
        if start:
            self.start()

    @property
    def server_def(self) -> ServerDef:
        return self._server_def

    @property
    def target(self) -> str:
        """``grpc://`` and this task's address (with the port it got where it was listed at
        port 0; ``localhost`` where it listens on every interface): what ``fl.Session`` and
        ``MonitoredTrainingSession(master=...)`` take."""
        return self._target

    @property
    def cluster_spec(self) -> ClusterSpec:
        """The cluster as this task serves it (its own port filled in where it was 0)."""
        return ClusterSpec(self._task.cluster)

    @property
    def name(self) -> str:
        return task_name(self._server_def.job_name, self._server_def.task_index)

    def start(self) -> None:
        """Starts serving (again a no-op)."""
        with self._lock:
            if not self._started:
                self._task.start()
                self._started = True

    def join(self) -> None:
        """Blocks until the server stops."""
        self._task.wait()

    def stop(self, grace: float = 1.0) -> None:
        """Stops serving, ends ``join()``, and closes this task's queues."""
        self._task.stop(grace)

    @staticmethod
    def create_local_server(config=None, start: bool = True) -> "Server":
        """A one-task server on a free port of localhost (job ``localhost``)."""
        return Server({"localhost": ["localhost:0"]}, protocol="grpc", config=config,
                      start=start)
