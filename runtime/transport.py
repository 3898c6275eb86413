"""Moving requests and tensors between a master and task servers over gRPC (grpcio).

There is no ``.proto`` and no protoc step: every RPC of the ``flowc.Task`` service is a unary
call whose request and response are one *frame* (bytes), serialized and parsed here with
explicit functions. A frame is

    b"FLW1" | u32 header length | header (UTF-8 JSON object) | tensor records

and the header's ``"tensors"`` list names the records that follow, in order. A tensor record is
``i32 dtype code | i32 rank | i64 dims[rank] | u64 nbytes | raw bytes`` (little-endian, C
order; dtype codes are ``runtime.dtypes``'s ABI codes). ``docs/distributed.md`` describes
the methods and their headers.

Every call has a deadline; a server can require a shared token (the ``flowc-token`` metadata);
message sizes are capped on both ends (``DEFAULT_MAX_MESSAGE_BYTES``). A failed call becomes a
flowc error: the server sends the error's class name in the ``flowc-error`` trailing metadata,
so a ``DeadlineExceededError`` on a task is a ``DeadlineExceededError`` in the client, and a
task that cannot be reached is an ``UnavailableError`` naming the task and its address.

This module also provides the host ops that cross-task ``_Send``/``_Recv`` kernels call
(``_RemoteSend``, ``_RemoteRecv``): a send leaves the tensor in its task's outbox under
(step id, rendezvous key); a receive fetches it from the sending task with ``RecvTensor``.
"""
from __future__ import annotations

import hmac
import json
import math
import struct
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

import grpc
import numpy as np

from runtime import errors as _errors
from runtime.dtypes import DType
from runtime.errors import (AbortedError, DeadlineExceededError, FeedError, FlowcError,
                            OutOfRangeError, RuntimeExecutionError)

SERVICE = "flowc.Task"
METHODS = ("RegisterPartition", "RunStep", "RecvTensor", "AbortStep", "Deregister", "Status")
MAGIC = b"FLW1"
TOKEN_METADATA = "flowc-token"
ERROR_METADATA = "flowc-error"
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
MAX_HEADER_BYTES = 1 << 20
MAX_RANK = 8
CONTROL_TIMEOUT_S = 10.0               # Status, Deregister, AbortStep


# --- errors ----------------------------------------------------------------------------------
class TransportError(FlowcError):
    """A call between the master and a task (or between tasks) failed."""


class UnavailableError(TransportError):
    """A task cannot be reached (not started, killed, or its address is wrong)."""


class UnauthenticatedError(TransportError):
    """The server requires a token and the call did not carry the right one."""


class WireFormatError(TransportError):
    """A frame is malformed: bad magic, truncated, a header that is not JSON, bad tensors."""


class StepNotRegisteredError(TransportError):
    """RunStep named a step key the task does not have (it restarted, or it was deregistered)."""


def _error_classes() -> Dict[str, type]:
    classes = {c.__name__: c for c in (TransportError, UnavailableError, UnauthenticatedError,
                                       WireFormatError, StepNotRegisteredError)}
    for name in dir(_errors):
        obj = getattr(_errors, name)
        if isinstance(obj, type) and issubclass(obj, FlowcError):
            classes[name] = obj
    return classes


_GRPC_CODE_OF = [
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (WireFormatError, grpc.StatusCode.INVALID_ARGUMENT),
    (StepNotRegisteredError, grpc.StatusCode.NOT_FOUND),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (AbortedError, grpc.StatusCode.ABORTED),
    (OutOfRangeError, grpc.StatusCode.OUT_OF_RANGE),
    (FeedError, grpc.StatusCode.INVALID_ARGUMENT),
]


def grpc_code_of(err: BaseException) -> grpc.StatusCode:
    for cls, code in _GRPC_CODE_OF:
        if isinstance(err, cls):
            return code
    return grpc.StatusCode.UNKNOWN


# --- frames ----------------------------------------------------------------------------------
_U32 = struct.Struct("<I")
_REC = struct.Struct("<ii")
_U64 = struct.Struct("<Q")


def encode_frame(header: dict, tensors: Sequence[np.ndarray] = ()) -> bytes:
    """One frame: ``header`` (JSON; gets a ``"tensors"`` count) followed by the tensors."""
    header = dict(header)
    header["tensors"] = len(tensors)
    head = json.dumps(header, separators=(",", ":")).encode()
    parts: List[object] = [MAGIC, _U32.pack(len(head)), head]
    for t in tensors:
        arr = np.asarray(t, order="C")
        try:
            dtype = DType.from_numpy(arr.dtype)
        except TypeError:
            raise WireFormatError(f"cannot send a tensor of numpy dtype {arr.dtype}") from None
        if arr.ndim > MAX_RANK:
            raise WireFormatError(f"cannot send a {arr.dtype} tensor of rank {arr.ndim}")
        parts.append(_REC.pack(dtype.code, arr.ndim))
        parts.append(struct.pack(f"<{arr.ndim}q", *arr.shape))
        parts.append(_U64.pack(arr.nbytes))
        if arr.nbytes:
            parts.append(memoryview(arr).cast("B"))
    return b"".join(parts)


def decode_frame(data: bytes, copy: bool = False) -> Tuple[dict, List[np.ndarray]]:
    """Parse a frame; raises ``WireFormatError`` saying what is wrong. Without ``copy`` the
    arrays are read-only views of ``data``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireFormatError("a frame must be bytes")
    view = memoryview(data)
    if len(view) < 8 or bytes(view[:4]) != MAGIC:
        raise WireFormatError("not a flowc frame (bad magic)")
    (hlen,) = _U32.unpack_from(view, 4)
    if hlen > MAX_HEADER_BYTES or 8 + hlen > len(view):
        raise WireFormatError(f"truncated frame: header of {hlen} bytes, frame of {len(view)}")
    try:
        header = json.loads(bytes(view[8:8 + hlen]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WireFormatError(f"frame header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise WireFormatError("frame header is not a JSON object")
    count = header.get("tensors", 0)
    if not isinstance(count, int) or count < 0:
        raise WireFormatError("frame header has a bad tensor count")
    pos = 8 + hlen
    tensors = []
    for k in range(count):
        if pos + _REC.size > len(view):
            raise WireFormatError(f"truncated frame: tensor {k} is missing")
        code, rank = _REC.unpack_from(view, pos)
        pos += _REC.size
        try:
            dtype = DType.from_code(code)
        except KeyError:
            raise WireFormatError(f"tensor {k} has an unknown dtype code {code}") from None
        if dtype in (DType.resource, DType.bf16):
            raise WireFormatError(f"tensor {k} has dtype {dtype.ir_name}, which cannot be sent")
        if not 0 <= rank <= MAX_RANK:
            raise WireFormatError(f"tensor {k} has rank {rank} (0..{MAX_RANK})")
        if pos + 8 * rank + 8 > len(view):
            raise WireFormatError(f"truncated frame: tensor {k}'s dims are cut off")
        dims = struct.unpack_from(f"<{rank}q", view, pos)
        pos += 8 * rank
        (nbytes,) = _U64.unpack_from(view, pos)
        pos += 8
        if any(d < 0 for d in dims):
            raise WireFormatError(f"tensor {k} has a negative dim {list(dims)}")
        itemsize = np.dtype(dtype.np).itemsize
        if math.prod(dims) * itemsize != nbytes:
            raise WireFormatError(f"tensor {k}: {nbytes} bytes do not hold {dtype.ir_name}{list(dims)}")
        if pos + nbytes > len(view):
            raise WireFormatError(f"truncated frame: tensor {k} has {len(view) - pos} of its "
                                  f"{nbytes} bytes")
        arr = np.ndarray(dims, dtype=dtype.np, buffer=view, offset=pos) if nbytes else \
            np.zeros(dims, dtype=dtype.np)
        tensors.append(arr.copy() if copy else arr)
        pos += nbytes
    if pos != len(view):
        raise WireFormatError(f"{len(view) - pos} stray bytes after the frame's tensors")
    return header, tensors


def header_field(header: dict, name: str, kind, what: str = ""):
    """``header[name]``, checked to be of ``kind``; a ``WireFormatError`` otherwise."""
    value = header.get(name)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is list and ok:
        ok = all(isinstance(v, str) for v in value)
    if not ok:
        raise WireFormatError(f"{what or 'request'} needs '{name}' ({getattr(kind, '__name__', kind)})")
    return value


# --- channels and the client side ------------------------------------------------------------
def channel_options(max_message_bytes: int) -> list:
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.enable_retries", 0)]


def task_name(job: str, task: int) -> str:
    return f"/job:{job}/task:{task}"


class TaskClient:
    """Calls to one task. Errors come back as flowc errors; an unreachable task is an
    ``UnavailableError`` naming it (``/job:ps/task:0 at localhost:2222``)."""

    def __init__(self, address: str, name: str = "", token: Optional[str] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        self.address = address
        self.name = name or address
        self.token = token
        self._channel = grpc.insecure_channel(address, options=channel_options(max_message_bytes))
        self._calls = {m: self._channel.unary_unary(f"/{SERVICE}/{m}",
                                                    request_serializer=_identity,
                                                    response_deserializer=_identity)
                       for m in METHODS}

    def close(self) -> None:
        self._channel.close()

    def _metadata(self):
        return ((TOKEN_METADATA, self.token),) if self.token else None

    def call(self, method: str, header: dict, tensors: Sequence[np.ndarray] = (),
             timeout: float = CONTROL_TIMEOUT_S) -> Tuple[dict, List[np.ndarray]]:
        request = encode_frame(header, tensors)
        try:
            response = self._calls[method](request, timeout=max(timeout, 0.001),
                                           metadata=self._metadata())
        except grpc.RpcError as e:
            raise self.error(e, method) from None
        try:
            return decode_frame(response, copy=True)
        except WireFormatError as e:
            raise TransportError(f"{self.name} at {self.address} answered {method} with a "
                                 f"malformed frame: {e}") from None

    def future(self, method: str, header: dict, tensors: Sequence[np.ndarray] = (),
               timeout: float = CONTROL_TIMEOUT_S):
        return self._calls[method].future(encode_frame(header, tensors),
                                          timeout=max(timeout, 0.001), metadata=self._metadata())

    def result(self, future, method: str) -> Tuple[dict, List[np.ndarray]]:
        try:
            response = future.result()
        except grpc.RpcError as e:
            raise self.error(e, method) from None
        return decode_frame(response, copy=True)

    def error(self, e: grpc.RpcError, method: str) -> FlowcError:
        """The flowc error a failed call stands for."""
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = (e.details() if hasattr(e, "details") else str(e)) or ""
        remote = None
        try:
            for k, v in (e.trailing_metadata() or ()):
                if k == ERROR_METADATA:
                    remote = v
        except Exception:                            # noqa: BLE001  (no metadata: local error)
            remote = None
        where = f"{self.name} at {self.address}"
        if remote is not None:                       # the task answered with a flowc error
            cls = _error_classes().get(remote, TransportError)
            if issubclass(cls, RuntimeExecutionError):
                return cls(details)
            return cls(details)
        if code == grpc.StatusCode.UNAVAILABLE:
            return UnavailableError(f"{where} is unavailable ({method}: {details})")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return DeadlineExceededError(f"{where} did not answer {method} within its deadline")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return UnauthenticatedError(f"{where} refused {method}: {details}")
        if code == grpc.StatusCode.CANCELLED:
            return AbortedError(f"{method} to {where} was cancelled")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return TransportError(f"{where} refused {method}: {details} (a message over the "
                                  "size limit?)")
        return TransportError(f"{method} to {where} failed: {code.name}: {details}")


def _identity(b):
    return b


# --- traffic counters ---------------------------------------------------------------------------
class TrafficCounters:
    """Calls and bytes of request and response frames per RPC method, as a task served them
    (its ``Status`` reply carries ``snapshot()`` under ``traffic``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: Dict[str, List[int]] = {}          # method -> [calls, request, response]

    def add(self, method: str, request_bytes: int = 0, response_bytes: int = 0,
            calls: int = 0) -> None:
        with self._lock:
            c = self._counts.setdefault(method, [0, 0, 0])
            c[0] += calls
            c[1] += request_bytes
            c[2] += response_bytes

    def snapshot(self) -> Dict[str, Dict[str, int]]:
        with self._lock:
            return {m: {"calls": c[0], "request_bytes": c[1], "response_bytes": c[2]}
                    for m, c in self._counts.items()}


# --- the sending side: tensors waiting for their receiver ------------------------------------
class Outbox:
    """Tensors sent by this task's steps, by (step id, rendezvous key), until a receiver takes
    them with ``RecvTensor``. A failed step is marked aborted so its receivers stop waiting;
    entries nobody takes are dropped after ``ttl_s``."""

    def __init__(self, ttl_s: float = 600.0):
        self._items: Dict[Tuple[int, str], Tuple[np.ndarray, float]] = {}
        self._aborted: Dict[int, float] = {}
        self._cv = threading.Condition()
        self.ttl_s = ttl_s

    def put(self, step_id: int, key: str, value: np.ndarray) -> None:
        now = time.monotonic()
        with self._cv:
            self._purge(now)
            if (step_id, key) in self._items:
                raise RuntimeExecutionError(f"{key} was sent twice in step {step_id}")
            self._items[(step_id, key)] = (value, now)
            self._cv.notify_all()

    def take(self, step_id: int, key: str, timeout_s: float) -> np.ndarray:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while (step_id, key) not in self._items:
                if step_id in self._aborted:
                    raise AbortedError(f"step {step_id} was aborted before {key} was sent")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DeadlineExceededError(f"timed out waiting for {key} to be sent")
                self._cv.wait(min(left, 1.0))
            return self._items.pop((step_id, key))[0]

    def abort(self, step_id: int) -> None:
        with self._cv:
            self._aborted[step_id] = time.monotonic()
            for k in [k for k in self._items if k[0] == step_id]:
                del self._items[k]
            self._cv.notify_all()

    def pending(self) -> int:
        with self._cv:
            return len(self._items)

    def _purge(self, now: float) -> None:
        old = now - self.ttl_s
        for k in [k for k, (_, t) in self._items.items() if t < old]:
            del self._items[k]
        for s in [s for s, t in self._aborted.items() if t < old]:
            del self._aborted[s]


# --- steps in flight: how a host op finds its step -------------------------------------------
class StepContext:
    """One running step on a task: its id, deadline, and the calls it has in flight."""

    def __init__(self, server, step_id: int, deadline: float):
        self.server = server
        self.step_id = step_id
        self.deadline = deadline
        self.aborted = False
        self._futures: list = []
        self._lock = threading.Lock()

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            futures = list(self._futures)
        for f in futures:
            f.cancel()

    def track(self, future) -> None:
        with self._lock:
            if self.aborted:
                future.cancel()
            self._futures.append(future)


# Steps running in this process, by the address of their rendezvous (the per-call pointer the
# generated code passes to the host ops, so concurrent steps never mix).
_active: Dict[int, StepContext] = {}
_active_lock = threading.Lock()


def activate(ref: int, ctx: StepContext) -> None:
    with _active_lock:
        _active[ref] = ctx


def deactivate(ref: int) -> None:
    with _active_lock:
        _active.pop(ref, None)


def _step(ref, node: str) -> StepContext:
    ctx = _active.get(int(np.asarray(ref)))
    if ctx is None:
        raise RuntimeExecutionError(f"node '{node}': a cross-task send or receive ran outside a "
                                    "task server's step (run this graph with a grpc:// "
                                    "session)", node)
    return ctx


def _remote_send(store, node: str, attrs: dict, value, ref) -> list:
    ctx = _step(ref, node)
    ctx.server.outbox.put(ctx.step_id, attrs["key"], value)
    return []


def _remote_recv(store, node: str, attrs: dict, ref) -> list:
    ctx = _step(ref, node)
    return [ctx.server.fetch_remote(ctx, attrs["send_device"], attrs["key"], node)]


def _register_host_ops() -> None:
    from runtime.resources import register_host_op
    register_host_op("_RemoteSend", _remote_send)
    register_host_op("_RemoteRecv", _remote_recv)


_register_host_ops()
