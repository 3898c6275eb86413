"""The master of a distributed session, and the task side of registering a partition.

The master (in the client) compiles a step signature for the cluster: the devices are those
the tasks report (each task's CPU, and its GPUs where it has some), unconstrained ops go to the
target task (its first GPU where it has one), the graph is cut into one partition per task
(a task's CPU and GPU parts joined by its own rendezvous) (``_Send``/``_Recv`` pairs between tasks go through the transport),
and each partition's IR text is registered with its task once. A step is then one
``RunStep`` per participating task, sent concurrently; the fetches are merged in fetch order.
A failing task aborts the step on the others, and the first real cause is raised: a task that
cannot be reached is an ``UnavailableError`` naming it and its address.

``build_partition`` is what ``flowc serve`` gives the runtime's task server: IR text in, a
loaded executable for this task's devices out (its CPU's module, and its GPU's built for the
GPU it has), cached on disk by content.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.devices import format_spec, parse_device_spec
from compiler.errors import CompileError
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.master import load_or_write
from compiler.ops.comm import is_cross_task
from compiler.options import PipelineOptions
from compiler.passes.partition import subgraph
from compiler.passes.place import variables_without_gpu_kernels
from compiler.step import StepGraph, make_step_graph, optimize, toolchain_fingerprint
from runtime.artifact import load_artifact
from runtime.cluster import ClusterSpec, task_device, task_of_device
from runtime.errors import (AbortedError, DeadlineExceededError, FeedError, FlowcError,
                            PeerUnavailableError)
from runtime.feeds import FeedCheck
from runtime.module import TensorSpec
from runtime.transport import (CONTROL_TIMEOUT_S, DEFAULT_MAX_MESSAGE_BYTES,
                               DEFAULT_MAX_TENSOR_BYTES, StepNotRegisteredError, TaskClient, TransportError,
                               UnauthenticatedError, UnavailableError, task_name)

DEFAULT_STEP_TIMEOUT_S = 300.0          # a step without RunOptions(timeout_in_ms=...)
REGISTER_TIMEOUT_S = 600.0              # building a partition runs the C compiler
RPC_SLACK_S = 5.0                       # the RPC outlives the step's own deadline by this
DEADLINE_GRACE_S = 0.5                  # the master waits this past a step's deadline for the
                                        # tasks' own errors before it names the silent ones
ABORT_WAIT_S = 1.0                      # how long aborted tasks have to answer


# --- the task side -----------------------------------------------------------------------------
def build_partition(ir_text: str, feeds: List[str], fetches: List[str]):
    """Build one task's partition (IR text from the master) into a loaded module.

    ``feeds`` name its Placeholder nodes and ``fetches`` its ``_Retval`` nodes, in the order
    the master sends and expects them. Pairs between devices of this task are renumbered as
    slots of this task's rendezvous; pairs with other tasks go through the transport."""
    graph = parse_graph(ir_text, filename="<partition>")
    feed_nodes = [_node(graph, n, "Placeholder") for n in feeds]
    retvals = [_node(graph, n, "_Retval") for n in fetches]
    slots: Dict[int, int] = {}
    for n in graph:
        if n.op in ("_Send", "_Recv") and not is_cross_task(n.attrs):
            n.attrs["slot"] = slots.setdefault(n.attrs["slot"], len(slots))
    step = StepGraph(graph, feed_nodes, list(feeds), retvals, list(fetches))
    load, arch = load_artifact, None
    gpus = sorted({n.assigned_device for n in graph if "/device:GPU:" in (n.assigned_device or "")})
    if gpus:
        # this task's GPUs: each module is built for its GPU's architecture and loaded in its
        # context (the CUDA simulator's, under FLOWC_CUDA_SIMULATOR=1)
        from runtime.cuda_module import CudaContext, gpu_index, load_cuda_artifact
        contexts = {d: CudaContext(gpu_index(d)) for d in gpus}
        arch = {d: c.arch for d, c in contexts.items()}
        first = contexts[gpus[0]]
        load = lambda p, verified=None: load_cuda_artifact(p, first,      # noqa: E731
                                                           verified=verified)
    h = hashlib.sha256(ir_text.encode())
    h.update(json.dumps([feeds, fetches, sorted((arch or {}).items())]).encode())
    h.update(toolchain_fingerprint().encode())
    artifact = load_or_write(step, h.hexdigest(), load, cuda_arch=arch)
    return artifact.executable


def _node(graph: Graph, name: str, op: str) -> Node:
    n = graph.get(name)
    if n is None or n.op != op:
        raise CompileError(f"the partition has no {op} node '{name}'")
    return n


# --- the master side ---------------------------------------------------------------------------
@dataclass
class TaskPartition:
    job: str
    task: int
    ir: str
    feeds: List[str]             # Placeholder node names
    feed_index: List[int]        # their positions in the step's feeds
    fetches: List[str]           # _Retval node names
    fetch_index: List[int]       # their positions in the step's fetches
    key: str

    @property
    def name(self) -> str:
        return task_name(self.job, self.task)


@dataclass
class ClusterStep:
    feeds: List[TensorSpec]
    fetches: List[TensorSpec]
    partitions: List[TaskPartition]


def compile_for_cluster(graph: Graph, feeds: Sequence[Output], fetches: Sequence[Output],
                        targets: Sequence[Node], cluster: ClusterSpec,
                        default_task: Tuple[str, int],
                        options: Optional[PipelineOptions] = None,
                        devices: Optional[Sequence[str]] = None) -> ClusterStep:
    """Optimize the step for the cluster's devices (``devices``, as the tasks report them;
    default one CPU per task) and cut it into one partition per task. Unconstrained ops go
    to the default task's first GPU where it has one (TensorFlow's rule), else to its CPU."""
    step = make_step_graph(graph, feeds, fetches, targets)
    devices = tuple(devices or cluster.devices())
    home = task_device(*default_task)
    gpus = [d for d in devices if d.startswith(home.rsplit("/device:", 1)[0] + "/device:GPU:")]
    if any("/device:GPU:" in d for d in devices):
        _keep_variables_off_gpus(step.graph, home)
    opts = dataclasses.replace(options or PipelineOptions(), devices=devices,
                               default_device=gpus[0] if gpus else home)
    optimize(step, opts)
    feed_specs = [TensorSpec(name, n.output_types[0].dtype, n.output_types[0].shape)
                  for n, name in zip(step.feeds, step.feed_names)]
    fetch_specs = [TensorSpec(name, r.inputs[0].type.dtype, r.inputs[0].type.shape)
                   for r, name in zip(step.retvals, step.fetch_names)]
    feed_pos = {n.name: i for i, n in enumerate(step.feeds)}
    fetch_pos = {r.name: i for i, r in enumerate(step.retvals)}
    by_task = split_by_task(step.graph)
    partitions = []
    for (job, task), part in by_task.items():
        ph = sorted((n.name for n in part if n.op == "Placeholder"), key=lambda s: feed_pos[s])
        rv = sorted((n.name for n in part if n.op == "_Retval"), key=lambda s: fetch_pos[s])
        ir = print_graph(part)
        h = hashlib.sha256(ir.encode())
        h.update(json.dumps([ph, rv]).encode())
        partitions.append(TaskPartition(job, task, ir, ph, [feed_pos[s] for s in ph], rv,
                                        [fetch_pos[s] for s in rv], h.hexdigest()))
    return ClusterStep(feed_specs, fetch_specs, partitions)


def _keep_variables_off_gpus(graph: Graph, home: str) -> None:
    """Before pruning (``graph`` is still the whole graph): a variable whose colocation group
    has an op without a GPU kernel asks for the CPU of its task (``home``'s where it names
    none), so no step puts it on a GPU where another step cannot use it (the local session
    does the same, ``dsl/session_devices.py``)."""
    for n in variables_without_gpu_kernels(graph):
        fields = parse_device_spec(home)
        asked = parse_device_spec(n.device) if n.device else {}
        if "job" in asked:
            fields = {k: v for k, v in asked.items() if k != "device"}
        fields["device"] = "CPU:0"
        n.device = format_spec(fields)


def split_by_task(graph: Graph) -> Dict[Tuple[str, int], Graph]:
    """The subgraph of each task of a partitioned graph: the nodes of all its devices (its CPU
    and GPUs, joined by ``_Send``/``_Recv`` pairs of the task's own rendezvous)."""
    tasks: Dict[Tuple[str, int], List[str]] = {}
    for n in graph:
        where = task_of_device(n.assigned_device or "")
        if where is None:
            raise CompileError(f"cannot run {n.assigned_device} on the cluster: it names no "
                               "task", n)
        devices = tasks.setdefault(where, [])
        if n.assigned_device not in devices:
            devices.append(n.assigned_device)
    if len(tasks) == 1:
        return {next(iter(tasks)): graph}
    return {where: subgraph(graph, f"{graph.name}.{where[0]}_{where[1]}",
                            lambda n, where=where: task_of_device(n.assigned_device) == where)
            for where in tasks}


class Master:
    """Talks to the tasks of the cluster ``target`` belongs to (``grpc://host:port``)."""

    def __init__(self, target: str, token: Optional[str] = None,
                 step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES):
        if not target.startswith("grpc://"):
            raise ValueError(f"a distributed session's target is grpc://host:port, not {target!r}")
        address = target[len("grpc://"):]
        self.token = token
        self.step_timeout_s = step_timeout_s
        first = TaskClient(address, address, token, max_message_bytes, max_tensor_bytes)
        try:
            status, _ = first.call("Status", {}, timeout=CONTROL_TIMEOUT_S)
        finally:
            first.close()
        self.cluster = ClusterSpec.from_json(status.get("cluster"), f"{target}'s cluster")
        self.target_task = (status["job"], int(status["task"]))
        self._devices: Dict[Tuple[str, int], List[str]] = {}
        if isinstance(status.get("devices"), list):
            self._devices[self.target_task] = [str(d) for d in status["devices"]]
        self.clients: Dict[Tuple[str, int], TaskClient] = {
            (job, k): TaskClient(addr, task_name(job, k), token, max_message_bytes,
                                 max_tensor_bytes)
            for job, k, addr in self.cluster.tasks()}
        self._registered: Dict[Tuple[str, int], set] = {t: set() for t in self.clients}
        self._lock = threading.Lock()
        self.reregistrations = 0         # steps registered again because a task restarted

    def close(self) -> None:
        for c in self.clients.values():
            c.close()

    def _client(self, task: Tuple[str, int]) -> TaskClient:
        """The client of ``task``; a new one where the old one lost its task
        (``TaskClient.lost``), so a restarted task is reached at once, not after gRPC's
        reconnect backoff."""
        with self._lock:
            c = self.clients[task]
            if c.lost:
                c = self.clients[task] = c.renewed()
        return c

    def status(self, job: str, task: int) -> dict:
        return self._client((job, task)).call("Status", {})[0]

    # --- compiling and registering ----------------------------------------------------
    def devices(self) -> List[str]:
        """The devices of the cluster, as its tasks report them (``Status``: each task's CPU
        and the GPUs it can host), asked once per task (and again where a task restarted,
        ``_devices_changed``); a task that does not answer counts
        as its CPU alone (a step that needs it fails naming it when it runs)."""
        missing = [t for t in self.clients if t not in self._devices]
        futures = [(t, self._client(t).future("Status", {}, timeout=CONTROL_TIMEOUT_S))
                   for t in missing]
        for t, f in futures:
            try:
                status = self._client(t).result(f, "Status")[0]
                if isinstance(status.get("devices"), list):
                    self._devices[t] = [str(d) for d in status["devices"]]
            except FlowcError:
                pass
        return [d for t in self.clients for d in self._devices.get(t, [task_device(*t)])]

    def compile(self, graph: Graph, feeds, fetches, targets,
                options: Optional[PipelineOptions] = None) -> "RemoteStep":
        def build() -> ClusterStep:
            step = compile_for_cluster(graph, feeds, fetches, targets, self.cluster,
                                       self.target_task, options, devices=self.devices())
            self._register_all(step)
            return step
        return RemoteStep(self, build(), build)

    def _register_all(self, step: ClusterStep) -> None:
        self._check_alive([(p.job, p.task) for p in step.partitions])
        futures = [(p, self._register_future(p)) for p in step.partitions]
        errors = []
        for p, f in futures:
            try:
                self.clients[(p.job, p.task)].result(f, "RegisterPartition")
                with self._lock:
                    self._registered[(p.job, p.task)].add(p.key)
            except FlowcError as e:
                errors.append(e)
        if errors:
            raise _first_cause(errors)

    def _devices_changed(self, step: ClusterStep) -> bool:
        """Ask the tasks of ``step`` for their devices again (a task restarted): whether any
        reports other devices than the step was placed for."""
        tasks = {(p.job, p.task) for p in step.partitions}
        with self._lock:
            before = {t: self._devices.pop(t, None) for t in tasks}
        self.devices()
        return any(before[t] is not None and self._devices.get(t) != before[t] for t in tasks)

    def _check_alive(self, tasks: List[Tuple[str, int]]) -> None:
        """``Status`` of each task, with a short deadline: registering runs the C compiler and
        has a long one, so a task that is gone or hung is found here, by name."""
        clients = [self._client(t) for t in tasks]
        futures = [(c, c.future("Status", {})) for c in clients]
        errors = []
        for client, f in futures:
            try:
                client.result(f, "Status")
            except FlowcError as e:
                errors.append(e)
        if errors:
            raise _first_cause(errors)

    def _register_future(self, p: TaskPartition):
        # The IR text travels as a byte tensor, not in the header: a partition with large
        # constants is megabytes of text, and tensors stream in chunks past the message limit.
        ir = np.frombuffer(p.ir.encode(), dtype=np.uint8)
        return self._client((p.job, p.task)).future(
            "RegisterPartition", {"key": p.key, "feeds": p.feeds, "fetches": p.fetches,
                                  "names": ["ir"]}, [ir], timeout=REGISTER_TIMEOUT_S)

    def _register(self, p: TaskPartition) -> None:
        self.clients[(p.job, p.task)].result(self._register_future(p), "RegisterPartition")

    # --- running ------------------------------------------------------------------------
    def run(self, step: ClusterStep, arrays: Sequence[np.ndarray], timeout_ms: int = 0,
            scalars: bool = True) -> list:
        try:
            return self._run(step, arrays, timeout_ms, scalars)
        except StepNotRegisteredError:
            with self._lock:
                self.reregistrations += 1
            if self._devices_changed(step):      # restarted with other GPUs: place again
                raise DevicesChangedError("a task of the step restarted with other devices "
                                          "than the step was placed for") from None
            for p in step.partitions:            # a task restarted: register again, once
                self._register(p)
            return self._run(step, arrays, timeout_ms, scalars)

    def _run(self, step: ClusterStep, arrays, timeout_ms: int, scalars: bool) -> list:
        step_id = random.getrandbits(62)
        limit_s = timeout_ms / 1000.0 if timeout_ms and timeout_ms > 0 else self.step_timeout_s
        header = {"step_id": step_id, "timeout_ms": int(limit_s * 1000)}
        done = threading.Condition()
        state = {"left": len(step.partitions), "failed": False}
        calls = []

        def finished(f):
            try:
                bad = f.exception() is not None
            except Exception:                    # noqa: BLE001  (cancelled: it did not answer)
                bad = True
            with done:
                state["left"] -= 1
                if bad:
                    state["failed"] = True
                done.notify_all()

        started = time.monotonic()
        for p in step.partitions:
            client = self._client((p.job, p.task))
            f = client.future("RunStep", dict(header, key=p.key, feeds=p.feeds),
                              [arrays[i] for i in p.feed_index], timeout=limit_s + RPC_SLACK_S)
            calls.append((p, client, f))
            f.add_done_callback(finished)
        # Until every task answered, one failed, or the deadline passed (and a moment more, for
        # the tasks' own deadline errors, which name the peer they waited for, to come in).
        with done:
            done.wait_for(lambda: state["left"] == 0 or state["failed"],
                          timeout=limit_s + DEADLINE_GRACE_S)
            failed = state["failed"]
            left = state["left"]
        silent: List[Tuple[TaskPartition, TaskClient]] = []
        if failed or left:
            # The others are told to stop; those that still do not answer (a task cut off by
            # the network, or hung) are named now, not when gRPC or TCP give up on them.
            self._abort(step_id, [c for p, c, f in calls if not f.done()])
            with done:
                done.wait_for(lambda: state["left"] == 0, timeout=ABORT_WAIT_S)
            for p, c, f in calls:
                if not f.done():
                    f.cancel()
                    silent.append((p, c))
        past_deadline = time.monotonic() - started >= limit_s
        results: List[object] = [None] * len(step.fetches)
        errors: List[FlowcError] = []
        for p, c in silent:
            where = f"{p.name} at {c.address}"
            if past_deadline:
                errors.append(DeadlineExceededError(
                    f"{where} did not answer RunStep within the step's deadline "
                    f"({limit_s:g} s): it is unreachable (a network partition?) or hung"))
            else:
                errors.append(AbortedError(f"{where} did not answer after the step was "
                                           "aborted"))
        for p, client, f in calls:
            if any(p is q for q, _ in silent):
                continue
            try:
                header, tensors = client.result(f, "RunStep")
            except FlowcError as e:
                errors.append(e)
                continue
            if len(tensors) != len(p.fetch_index):
                errors.append(TransportError(f"{p.name} returned {len(tensors)} fetches, "
                                             f"expected {len(p.fetch_index)}"))
                continue
            for i, t in zip(p.fetch_index, tensors):
                results[i] = t[()] if scalars and t.ndim == 0 else t
        if errors:
            raise _first_cause(errors)
        return results

    def _abort(self, step_id: int, clients: List[TaskClient]) -> None:
        """``AbortStep`` to each of ``clients``, not waiting for their answers (best effort: a
        task may be dead or cut off); an aborted task's ``RunStep`` answers soon after."""
        for c in clients:
            c.future("AbortStep", {"step_id": step_id}, timeout=ABORT_WAIT_S)


def _first_cause(errors: List[FlowcError]) -> FlowcError:
    """The error that explains the failure: an unreachable, refusing or restarted task first
    (as the master saw it, then as a task's receive did), then any error that is not an abort
    another task's failure caused."""
    for e in errors:
        if isinstance(e, (UnavailableError, UnauthenticatedError, StepNotRegisteredError)):
            return e
    for e in errors:
        if isinstance(e, PeerUnavailableError):
            return e
    for e in errors:
        if not isinstance(e, AbortedError):
            return e
    return errors[0]


class DevicesChangedError(FlowcError):
    """A task restarted with other devices (a GPU more or less) than a step was placed for:
    the step must be placed, partitioned and registered again (``RemoteStep`` does so)."""


class RemoteStep:
    """A compiled step on the cluster, with the interface of a local ``Executable``.
    ``rebuild`` compiles and registers the step again (for the devices the tasks report
    now): a run that finds a task restarted with other devices runs the rebuilt step."""

    def __init__(self, master: Master, step: ClusterStep,
                 rebuild: Optional[Callable[[], ClusterStep]] = None):
        self.master = master
        self.step = step
        self.rebuild = rebuild
        self.feeds = step.feeds
        self.fetches = step.fetches
        self.feed_checks = [FeedCheck(s.name, s.dtype, s.shape) for s in step.feeds]

    def _run(self, arrays, timeout_ms: int, scalars: bool) -> list:
        try:
            return self.master.run(self.step, arrays, timeout_ms, scalars)
        except DevicesChangedError:
            if self.rebuild is None:
                raise
            self.step = self.rebuild()
            return self.master.run(self.step, arrays, timeout_ms, scalars)

    @property
    def tasks(self) -> List[str]:
        return [p.name for p in self.step.partitions]

    def run(self, feed_values: Sequence, store=None, timeout_ms: int = 0) -> list:
        if len(feed_values) != len(self.feeds):
            raise FeedError(f"expected {len(self.feeds)} feeds, got {len(feed_values)}")
        arrays = [check(v) for check, v in zip(self.feed_checks, feed_values)]
        return self._run(arrays, timeout_ms, scalars=False)

    def call(self, arrays: Sequence[np.ndarray], scalars: bool = True, store=None,
             timeout_ms: int = 0) -> list:
        return self._run(arrays, timeout_ms, scalars)
