"""A task server: one task of a cluster, hosting its CPU device (and the GPUs this process can
use, ``runtime/cuda_module.py``), its variables and its queues.

The master registers partitions with it (IR text, built for this task's hardware by the
``build`` function the server was started with: ``flowc serve`` passes the compiler's; the
runtime never imports the compiler) and then runs steps, one ``RunStep`` per step. State (a
``ResourceStore``) lives as long as the server, so variables persist across client sessions.
Cross-task ``_Send``s leave their tensors in the server's ``Outbox``; ``_Recv``s fetch them
from the sending task (``RecvTensor``), bounded by the step's deadline.

Every handler parses its frame itself: a malformed or unauthenticated request gets an error
response and the server keeps serving. Streams are held to limits (``runtime/stream_guard.py``:
how many may be open, in all and per calling host, and how long one may stay silent), so
callers that open streams and send nothing cannot take the threads that ``Status``,
``RegisterPartition`` and ``AbortStep`` need. A server refuses to listen beyond loopback
without a token unless it is told ``insecure`` (``check_bind``).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import hmac
import ipaddress
import os
import socket
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import grpc
import numpy as np

from runtime.cluster import ClusterSpec, split_address, task_device, task_of_device
from runtime.errors import (AbortedError, DeadlineExceededError, FailedPreconditionError,
                            FeedError, FlowcError, InternalError, InvalidArgumentError)
from runtime.cuda_module import gpu_devices
from runtime.executor import MultiDeviceExecutable
from runtime.module import Executable, ffi
from runtime.resources import ResourceStore
from runtime.stream_guard import (CONTROL_THREADS, DEFAULT_MAX_STREAMS,
                                  DEFAULT_MAX_STREAMS_PER_PEER, DEFAULT_STREAM_IDLE_TIMEOUT_S,
                                  IdleTimeoutReader, StreamGate)
from runtime.transport import (DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_TENSOR_BYTES,
                               ERROR_METADATA, METHODS, SERVICE, STREAM_REQUEST, STREAM_RESPONSE,
                               STREAM_TICKET, TOKEN_METADATA, InsecureBindError, Outbox,
                               ParkedResponses, StepContext, StepNotRegisteredError,
                               StreamIdleError, StreamLimits, TaskClient, TrafficCounters,
                               TransportError, UnauthenticatedError, UnavailableError,
                               WireFormatError, activate,
                               channel_options,
                               check_tensor_sizes, deactivate, decode_frame, decode_stream,
                               encode_frame, encode_stream, error_metadata, grpc_code_of,
                               header_field, header_int, payload_bytes, task_name,
                               tensor_names)

# build(ir_text, feed_names, fetch_names) -> an Executable for this task's device(s).
BuildFn = Callable[[str, List[str], List[str]], Executable]

DEFAULT_STEP_TIMEOUT_S = 600.0          # a RunStep without a deadline of its own
MAX_REGISTERED_STEPS = 1024             # beyond this, the oldest registration is dropped
                                        # (its master registers it again on NOT_FOUND)


class RegisteredStep:
    def __init__(self, key: str, executable: Executable, feeds: Sequence[str],
                 fetches: Sequence[str]):
        self.key = key
        self.executable = executable
        self.feeds = list(feeds)
        self.fetches = list(fetches)
        self.checks = dict(zip(self.feeds, executable.feed_checks))
        # A partition over several devices of this task (a CPU and its GPUs) runs them
        # together; the task's rendezvous then holds the slots of their pairs.
        parts = getattr(executable, "parts", None)
        lib = (parts[0].executable if parts else executable).module.lib
        self.slots = int(getattr(executable, "slots", 0)) if parts else 0
        self.rv_size = lib.flowc_rendezvous_size()
        self.rv_init = lib.flowc_rendezvous_init
        self.rv_destroy = lib.flowc_rendezvous_destroy


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an address or a name) reaches this machine only: 127.0.0.0/8, ::1,
    ``localhost``, or a name every address of which is loopback. ``0.0.0.0`` and ``::`` (every
    interface) are not; a name that does not resolve is not."""
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback
                               for i in infos)


def check_bind(host: str, token: Optional[str], insecure: bool, where: str = "a task") -> None:
    """``InsecureBindError`` when ``host`` is reachable from other machines and there is no
    token, unless ``insecure``: anyone who reaches an open task can run steps on it and read
    its variables. Called before anything is bound."""
    if token or insecure or is_loopback_host(host):
        return
    raise InsecureBindError(f"refusing to serve {where} on {host} without a token: {host} is not "
                            "a loopback address, so any machine that reaches it could run steps "
                            "and read variables. Give a token (--token T or FLOWC_TOKEN) or "
                            "pass --insecure to serve without one")


class TaskServer:
    """Serves the ``flowc.Task`` service for task ``task`` of job ``job`` of ``cluster``.

    ``workers`` threads serve calls; streams may hold at most ``max_streams`` of them (at least
    ``CONTROL_THREADS`` stay for other calls), at most ``max_streams_per_peer`` from one host,
    and a stream silent for ``stream_idle_timeout_s`` ends. Listening beyond loopback needs a
    ``token`` or ``insecure=True``. A task listed at port 0 listens on a port the system picks,
    and from then on its ``address`` and ``cluster`` name that port."""

    def __init__(self, cluster: ClusterSpec, job: str, task: int, build: Optional[BuildFn] = None,
                 host: str = "127.0.0.1", port: Optional[int] = None, token: Optional[str] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, workers: int = 64,
                 max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES,
                 max_streams: int = DEFAULT_MAX_STREAMS,
                 max_streams_per_peer: int = DEFAULT_MAX_STREAMS_PER_PEER,
                 stream_idle_timeout_s: float = DEFAULT_STREAM_IDLE_TIMEOUT_S,
                 insecure: bool = False):
        check_bind(host, token, insecure, task_name(job, task))
        if max_streams + CONTROL_THREADS > workers:
            raise TransportError(f"{task_name(job, task)}: {max_streams} streams would leave "
                                 f"fewer than {CONTROL_THREADS} of its {workers} threads for "
                                 f"other calls (at most {workers - CONTROL_THREADS} streams)")
        if not stream_idle_timeout_s > 0:
            raise TransportError(f"the stream idle timeout must be positive (got "
                                 f"{stream_idle_timeout_s})")
        self.cluster = cluster
        self.job = job
        self.task = task
        self.address = cluster.address(job, task)
        self.name = task_name(job, task)
        self.build = build
        self.token = token or None
        self.max_message_bytes = max_message_bytes
        self.limits = StreamLimits(max_message_bytes, max_tensor_bytes)
        self.store = ResourceStore()
        self.outbox = Outbox()
        self.parked = ParkedResponses()
        self.traffic = TrafficCounters()
        self.streams = StreamGate(max_streams, max_streams_per_peer, task_name(job, task))
        self.stream_idle_timeout_s = stream_idle_timeout_s
        # its CPU, and the GPUs this process can host (none without pycuda or a GPU; the
        # CUDA simulator's one under FLOWC_CUDA_SIMULATOR=1)
        self.devices = [task_device(job, task)] + gpu_devices(job, task)
        self._steps: Dict[str, RegisteredStep] = {}
        self._building: Dict[str, threading.Lock] = {}
        self._running: Dict[int, List[StepContext]] = {}
        self._peers: Dict[tuple, TaskClient] = {}
        self._lock = threading.Lock()
        self._server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="flowc-rpc"),
            options=channel_options(max_message_bytes) + [("grpc.so_reuseport", 0)])
        handlers = {m: grpc.unary_unary_rpc_method_handler(
                        self._handler(m, getattr(self, "_" + m)),
                        request_deserializer=_identity, response_serializer=_identity)
                    for m in METHODS}
        handlers[STREAM_REQUEST] = grpc.stream_unary_rpc_method_handler(
            self._stream_request, request_deserializer=_identity, response_serializer=_identity)
        handlers[STREAM_RESPONSE] = grpc.unary_stream_rpc_method_handler(
            self._stream_response, request_deserializer=_identity, response_serializer=_identity)
        self._server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler(SERVICE, handlers)])
        bind_port = split_address(self.address)[1] if port is None else port
        try:
            self.port = self._server.add_insecure_port(f"{host}:{bind_port}")
        except RuntimeError:                     # grpcio raises when the port is taken
            self.port = 0
        if self.port == 0:
            raise TransportError(f"{self.name} cannot listen on {host}:{bind_port} (is the "
                                 "port in use?)")
        self.bound = f"{host}:{self.port}"
        listed_host, listed_port = split_address(self.address)
        if listed_port == 0:           # listed at port 0: the cluster it reports names the port
            self.address = f"{listed_host}:{self.port}"
            self.cluster = cluster.with_address(job, task, self.address)

    # --- life ---------------------------------------------------------------------------
    def start(self) -> "TaskServer":
        self._server.start()
        return self

    def wait(self) -> None:
        self._server.wait_for_termination()

    def stop(self, grace: float = 1.0) -> None:
        self.store.close_queues()
        self._server.stop(grace).wait(grace + 1)
        for c in self._peers.values():
            c.close()

    # --- the RPC plumbing ---------------------------------------------------------------
    def _handler(self, method: str, fn):
        def handle(request, context):
            return self._serve(method, context,
                               lambda: (method, fn, len(request)) + decode_frame(request))
        return handle

    def _serve(self, method: str, context, parse, stream: bool = False):
        """Check the token, take a stream slot (``stream``: refused at once when the limits
        are reached), parse the request (``parse() -> (name, fn, request bytes, header,
        tensors)``), run the method and encode its response, counting the traffic under the
        method's name; a flowc error becomes a gRPC status."""
        try:
            self._check_token(context)
            slot = self.streams.admit(context.peer(), method) if stream else \
                contextlib.nullcontext()
            with slot:
                name, fn, request_bytes, header, tensors = parse()
                self.traffic.add(name, request_bytes=request_bytes, calls=1)
                rheader, rtensors = fn(header, tensors, context)
                response, moved = self._respond(rheader, rtensors)
            self.traffic.add(name, response_bytes=moved)
            return response
        except Exception as e:                     # noqa: BLE001  (reported, keep serving)
            self._fail(method, context, e)

    def _fail(self, method: str, context, e: Exception) -> None:
        if isinstance(e, FlowcError):
            metadata, code, text = error_metadata(e), grpc_code_of(e), str(e)
        else:                                      # a bug: report it as such
            metadata, code, text = ((ERROR_METADATA, "TransportError"),), \
                grpc.StatusCode.INTERNAL, f"{self.name}: {method} failed: {type(e).__name__}: {e}"
        context.set_trailing_metadata(metadata)
        context.abort(code, text)

    # --- streams ------------------------------------------------------------------------
    def _respond(self, header: dict, tensors: list) -> Tuple[bytes, int]:
        """One frame, or, when the tensors exceed one chunk, a ticket the caller redeems with
        ``StreamResponse``; and the bytes the response moves (the frame's, or the streamed
        tensors')."""
        if payload_bytes(tensors) <= self.limits.chunk_bytes:
            frame = encode_frame(header, tensors)
            return frame, len(frame)
        check_tensor_sizes(tensors, tensor_names(header, len(tensors)),
                           self.limits.max_tensor_bytes)
        return encode_frame({STREAM_TICKET: self.parked.put(header, tensors),
                             "bytes": payload_bytes(tensors)}), payload_bytes(tensors)

    def _stream_request(self, request_iterator, context):
        """A request streamed in chunks: its head names the method it is for. Each message is
        waited for at most the idle timeout; the tensors grow as their bytes arrive."""
        def parse():
            messages = IdleTimeoutReader(request_iterator, self.stream_idle_timeout_s,
                                         f"{STREAM_REQUEST} from {context.peer()}")
            try:
                header, tensors = decode_stream(messages, self.limits.max_tensor_bytes)
            except StreamIdleError:
                self.streams.note_idle()
                raise
            finally:
                messages.close()
            method = header.pop("method", None)
            if method not in METHODS:
                raise WireFormatError(f"a streamed request names no method of {SERVICE} "
                                      f"({method!r})")
            return method, getattr(self, "_" + method), payload_bytes(tensors), header, tensors
        return self._serve(STREAM_REQUEST, context, parse, stream=True)

    def _stream_response(self, request, context):
        """The chunks of a parked response, on a stream slot held until the last one is sent
        (or the caller goes away)."""
        try:
            self._check_token(context)
            slot = self.streams.admit(context.peer(), STREAM_RESPONSE)
        except Exception as e:                     # noqa: BLE001  (reported, keep serving)
            self._fail(STREAM_RESPONSE, context, e)
        with slot:
            try:
                ticket = header_field(decode_frame(request)[0], "ticket", str, STREAM_RESPONSE)
                header, tensors = self.parked.take(ticket)
                messages = encode_stream(header, tensors, self.limits.chunk_bytes)
            except Exception as e:                 # noqa: BLE001  (reported, keep serving)
                self._fail(STREAM_RESPONSE, context, e)
            yield from messages

    def _check_token(self, context) -> None:
        if self.token is None:
            return
        given = ""
        for k, v in context.invocation_metadata() or ():
            if k == TOKEN_METADATA:
                given = v if isinstance(v, str) else v.decode(errors="replace")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            raise UnauthenticatedError(f"{self.name} at {self.address} refused the call: "
                                       + ("wrong token" if given else "no token (this task "
                                          "requires --token)"))

    @staticmethod
    def _deadline_s(context, asked_ms: int = 0) -> float:
        left = context.time_remaining()
        limit = DEFAULT_STEP_TIMEOUT_S if left is None else left
        if asked_ms and asked_ms > 0:
            limit = min(limit, asked_ms / 1000.0)
        return max(limit, 0.0)

    # --- methods ------------------------------------------------------------------------
    def _Status(self, header, tensors, context):
        with self._lock:
            steps = len(self._steps)
        return {"job": self.job, "task": self.task, "name": self.name, "address": self.address,
                "devices": self.devices, "cluster": self.cluster.to_json(), "pid": os.getpid(),
                "steps": steps, "can_build": self.build is not None,
                "variables": sorted(self.store.variables()),
                "traffic": self.traffic.snapshot(), "streams": self.streams.snapshot()}, []

    def _RegisterPartition(self, header, tensors, context):
        key = header_field(header, "key", str, "RegisterPartition")
        ir = _partition_text(header, tensors)
        feeds = header_field(header, "feeds", list, "RegisterPartition")
        fetches = header_field(header, "fetches", list, "RegisterPartition")
        if key in self._steps:
            return {"key": key, "cached": True}, []
        if self.build is None:
            raise FailedPreconditionError(f"{self.name} was started without a compiler; it "
                                          "cannot build partitions (start it with `flowc serve`)")
        with self._lock:
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            if key not in self._steps:
                exe = self.build(ir, list(feeds), list(fetches))
                if not isinstance(exe, (Executable, MultiDeviceExecutable)):
                    raise InternalError(f"{self.name}: the partition did not build into an "
                                        "executable")
                if len(exe.feeds) != len(feeds) or len(exe.fetches) != len(fetches):
                    raise InternalError(f"{self.name}: the built partition has "
                                        f"{len(exe.feeds)} feeds and {len(exe.fetches)} "
                                        f"fetches; the master asked for {len(feeds)} and "
                                        f"{len(fetches)}")
                with self._lock:
                    while len(self._steps) >= MAX_REGISTERED_STEPS:    # the oldest goes
                        self._steps.pop(next(iter(self._steps)))
                    self._steps[key] = RegisteredStep(key, exe, feeds, fetches)
                    self._building.pop(key, None)
        return {"key": key, "cached": False}, []

    def _Deregister(self, header, tensors, context):
        key = header_field(header, "key", str, "Deregister")
        with self._lock:
            found = self._steps.pop(key, None) is not None
        return {"key": key, "found": found}, []

    def _RunStep(self, header, tensors, context):
        key = header_field(header, "key", str, "RunStep")
        step_id = header_int(header, "step_id", "RunStep")
        feeds = header_field(header, "feeds", list, "RunStep")
        asked = header_int(header, "timeout_ms", "RunStep", low=-(1 << 63)) \
            if "timeout_ms" in header else 0
        step = self._steps.get(key)
        if step is None:
            raise StepNotRegisteredError(f"{self.name} has no step {key[:16]}… (it was "
                                         "restarted or the step was deregistered)")
        if len(feeds) != len(tensors):
            raise WireFormatError(f"RunStep names {len(feeds)} feeds but carries "
                                  f"{len(tensors)} tensors")
        given = dict(zip(feeds, tensors))
        missing = [f for f in step.feeds if f not in given]
        if missing or len(given) != len(step.feeds):
            raise FeedError(f"{self.name}: step feeds are {step.feeds}; got {feeds}")
        arrays = [step.checks[f](given[f]) for f in step.feeds]
        timeout_s = self._deadline_s(context, asked)
        ctx = StepContext(self, step_id, time.monotonic() + timeout_s)
        with self._lock:
            self._running.setdefault(step_id, []).append(ctx)
        rv = ffi.new("char[]", step.rv_size)
        if step.rv_init(rv, step.slots, int(timeout_s * 1000)) != 0:
            raise MemoryError("cannot create the step's rendezvous")
        ref = int(ffi.cast("intptr_t", rv))
        activate(ref, ctx)
        try:
            values = step.executable.call(arrays, scalars=False, store=self.store, rendezvous=rv,
                                          timeout_ms=max(1, int(timeout_s * 1000)))
        except BaseException:
            self.outbox.abort(step_id)
            raise
        finally:
            deactivate(ref)
            step.rv_destroy(rv)
            with self._lock:
                running = self._running.get(step_id, [])
                if ctx in running:
                    running.remove(ctx)
                if not running:
                    self._running.pop(step_id, None)
        return {"fetches": step.fetches}, values

    def _RecvTensor(self, header, tensors, context):
        step_id = header_int(header, "step_id", "RecvTensor")
        key = header_field(header, "key", str, "RecvTensor")
        return {"key": key}, [self.outbox.take(step_id, key, self._deadline_s(context))]

    def _AbortStep(self, header, tensors, context):
        step_id = header_int(header, "step_id", "AbortStep")
        self.outbox.abort(step_id)
        with self._lock:
            running = list(self._running.get(step_id, []))
        for ctx in running:
            ctx.abort()
        return {"aborted": len(running)}, []

    # --- cross-task receives ------------------------------------------------------------
    def peer(self, job: str, task: int) -> TaskClient:
        """The client of another task; a new one where the old one lost its task (a killed
        task that is back would otherwise be unavailable to this one for up to the channel's
        reconnect backoff, and the steps right after its restart would fail)."""
        with self._lock:
            c = self._peers.get((job, task))
            if c is not None and c.lost:
                c = self._peers[(job, task)] = c.renewed()
            elif c is None:
                c = self._peers[(job, task)] = TaskClient(
                    self.cluster.address(job, task), task_name(job, task), self.token,
                    self.max_message_bytes, self.limits.max_tensor_bytes)
        return c

    def fetch_remote(self, ctx: StepContext, send_device: str, key: str, node: str) -> np.ndarray:
        """The tensor ``key`` of step ``ctx`` from the task of ``send_device`` (blocks until it
        is sent, the step's deadline passes, or the step is aborted)."""
        where = task_of_device(send_device)
        if where is None:
            raise InvalidArgumentError(f"'{send_device}' names no task of the cluster", node)
        client = self.peer(*where)
        left = ctx.remaining_s()
        try:
            if left <= 0 or ctx.aborted:
                raise DeadlineExceededError(f"the step's deadline passed before receiving {key}")
            future = client.future("RecvTensor", {"step_id": ctx.step_id, "key": key},
                                   timeout=left)
            ctx.track(future)
            _, tensors = client.result(future, "RecvTensor")
        except FlowcError as e:
            if ctx.aborted:
                e = AbortedError(f"step aborted while receiving {key} from {client.name}")
            elif type(e) in (DeadlineExceededError, UnavailableError):
                # the error names the sender; the receiver too, so that a link broken between
                # two tasks (each still reaching the master) is named by both of its ends
                e = type(e)(f"{e} (the receive ran on {self.name} at {self.address})")
            raise e from None          # its class's status code goes back to the C receive
        if len(tensors) != 1:
            raise TransportError(f"{client.name} sent {len(tensors)} tensors for {key}")
        return tensors[0]


def _identity(b):
    return b


def _partition_text(header: dict, tensors: list) -> str:
    """A partition's IR text: one uint8 tensor of UTF-8 (or, from older masters, the
    header's ``ir`` string)."""
    if not tensors:
        return header_field(header, "ir", str, "RegisterPartition")
    if len(tensors) != 1 or tensors[0].dtype != np.uint8 or tensors[0].ndim != 1:
        raise WireFormatError("RegisterPartition carries its IR text as one uint8 vector")
    try:
        return tensors[0].tobytes().decode()
    except UnicodeDecodeError as e:
        raise WireFormatError(f"RegisterPartition: the IR text is not UTF-8 ({e})") from None
