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
message sizes are capped on both ends (``DEFAULT_MAX_MESSAGE_BYTES``). Larger requests and
responses travel as streams whose tensors grow as their chunks arrive (``StreamAssembler``),
so memory follows the bytes received, never what a head claims. A malformed frame, header or
header field is a ``WireFormatError`` saying what is wrong (``INVALID_ARGUMENT``). A failed
call becomes a flowc error: the server sends the error's class name in the ``flowc-error``
trailing metadata and its TensorFlow code, node and location in ``flowc-error-detail-bin``, so
an ``InvalidArgumentError`` at node 'g' on a task is an ``InvalidArgumentError`` at node 'g' in
the client (``error_metadata``, ``remote_error``), and a task that cannot be reached is an
``UnavailableError`` (``fl.errors.UnavailableError``) naming the task and its address.

This module also provides the host ops that cross-task ``_Send``/``_Recv`` kernels call
(``_RemoteSend``, ``_RemoteRecv``): a send leaves the tensor in its task's outbox under
(step id, rendezvous key); a receive fetches it from the sending task with ``RecvTensor``.
"""
from __future__ import annotations

import itertools
import json
import math
import secrets
import struct
import threading
import time
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import grpc
import numpy as np

from runtime import checkpoint as _checkpoint
from runtime import errors as _errors
from runtime.dtypes import DType
from runtime.errors import (AbortedError, DeadlineExceededError, FailedPreconditionError,
                            FlowcError, InternalError)

SERVICE = "flowc.Task"
METHODS = ("RegisterPartition", "RunStep", "RecvTensor", "AbortStep", "Deregister", "Status")
MAGIC = b"FLW1"
TOKEN_METADATA = "flowc-token"
ERROR_METADATA = "flowc-error"
ERROR_DETAIL_METADATA = "flowc-error-detail-bin"
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
MAX_HEADER_BYTES = 1 << 20
MAX_RANK = 8
MAX_HEADER_INT = (1 << 63) - 1          # step ids, timeouts: what fits an int64
MAX_ARRAY_BYTES = (1 << 63) - 1         # numpy's limit on itemsize * the product of nonzero dims
CONTROL_TIMEOUT_S = 10.0               # Status, Deregister, AbortStep
STREAM_MAGIC = b"FLS1"
STREAM_REQUEST = "StreamRequest"       # stream-unary: a request too large for one message
STREAM_RESPONSE = "StreamResponse"     # unary-stream: a parked response too large for one
STREAM_TICKET = "stream_ticket"        # the response header field naming a parked response
DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024
MIN_CHUNK_BYTES = 64 * 1024
DEFAULT_MAX_TENSOR_BYTES = 16 * 1024 * 1024 * 1024


# --- errors ----------------------------------------------------------------------------------
class TransportError(_errors.OpError):
    """A call between the master and a task (or between tasks) failed. Each subclass is also
    TensorFlow's class for its failure (``UnavailableError`` is ``fl.errors.UnavailableError``)."""


class UnavailableError(TransportError, _errors.UnavailableError):
    """A task cannot be reached (not started, killed, or its address is wrong)."""


class UnauthenticatedError(TransportError, _errors.UnauthenticatedError):
    """The server requires a token and the call did not carry the right one."""


class WireFormatError(TransportError, _errors.InvalidArgumentError):
    """A frame is malformed: bad magic, truncated, a header that is not JSON, bad tensors."""


class MessageTooLargeError(TransportError, _errors.ResourceExhaustedError):
    """A tensor is larger than the configured maximum (``max_tensor_bytes``); names both."""


class StepNotRegisteredError(TransportError, _errors.NotFoundError):
    """RunStep named a step key the task does not have (it restarted, or it was deregistered)."""


class TooManyStreamsError(TransportError, _errors.ResourceExhaustedError):
    """A task refused a stream: it already has as many open as it allows, in all or from the
    caller's host (``flowc serve --max-streams``, ``--max-streams-per-peer``)."""


class StreamIdleError(TransportError, DeadlineExceededError):
    """A stream sent nothing for longer than the receiver's idle timeout
    (``flowc serve --stream-idle-timeout``); says how much of it had arrived."""


class InsecureBindError(TransportError, _errors.FailedPreconditionError):
    """A task was asked to listen beyond loopback without a token (and without ``insecure``)."""


def _error_classes() -> Dict[str, type]:
    """Error classes by name, as a task names them in ``flowc-error`` (a name both have is the
    transport's) and, qualified with their module, in the error's detail."""
    runtime = {name: obj for module in (_errors, _checkpoint)           # aliases too
               for name, obj in vars(module).items()
               if isinstance(obj, type) and issubclass(obj, FlowcError)}
    own = [TransportError, UnavailableError, UnauthenticatedError, WireFormatError,
           StepNotRegisteredError, MessageTooLargeError, TooManyStreamsError, StreamIdleError,
           InsecureBindError]
    classes = dict(runtime)
    classes.update({c.__name__: c for c in own})
    classes.update({_qualified(c): c for c in list(runtime.values()) + own})
    return classes


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


_GRPC_CODE_OF = [
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (WireFormatError, grpc.StatusCode.INVALID_ARGUMENT),
    (StepNotRegisteredError, grpc.StatusCode.NOT_FOUND),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (MessageTooLargeError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (TooManyStreamsError, grpc.StatusCode.RESOURCE_EXHAUSTED),
]
_GRPC_CODE_BY_NUMBER = {c.value[0]: c for c in grpc.StatusCode}


def grpc_code_of(err: BaseException) -> grpc.StatusCode:
    """The gRPC status of a failed call: a transport error's own, else the error's TensorFlow
    code (gRPC's codes are TensorFlow's), else UNKNOWN."""
    for cls, code in _GRPC_CODE_OF:
        if isinstance(err, cls):
            return code
    if isinstance(err, _errors.OpError):
        return _GRPC_CODE_BY_NUMBER.get(err.error_code, grpc.StatusCode.UNKNOWN)
    return grpc.StatusCode.UNKNOWN


def error_metadata(err: BaseException) -> Tuple[Tuple[str, object], ...]:
    """The trailing metadata a task answers a failed call with: the error's class name
    (``flowc-error``) and, for an ``OpError``, its TensorFlow code, node, op type and source
    location (``flowc-error-detail-bin``: JSON), so the client raises the same error."""
    pairs: List[Tuple[str, object]] = [(ERROR_METADATA, type(err).__name__)]
    if isinstance(err, _errors.OpError):
        detail = {"class": _qualified(type(err)), "error_code": err.error_code,
                  "node": err.node_name, "location": err.location, "op_type": err.op_type}
        pairs.append((ERROR_DETAIL_METADATA, json.dumps(detail).encode()))
    return tuple(pairs)


def remote_error(class_name: str, details: str, detail_json) -> FlowcError:
    """The error a task reported (``error_metadata``): its class where this process has it,
    else TensorFlow's class of its code; with its node, op type and location."""
    detail = {}
    if detail_json:
        try:
            detail = json.loads(bytes(detail_json).decode())
        except (ValueError, TypeError):
            detail = {}
        if not isinstance(detail, dict):
            detail = {}
    classes = _error_classes()
    cls = classes.get(detail.get("class")) if isinstance(detail.get("class"), str) else None
    cls = cls or classes.get(class_name)
    code = detail.get("error_code")
    if cls is None or not issubclass(cls, _errors.OpError) and isinstance(code, int):
        try:
            cls = _errors.exception_type_from_error_code(code)
        except KeyError:
            cls = cls or TransportError
    if not issubclass(cls, _errors.OpError):
        return cls(details)
    strings = {k: detail.get(k) if isinstance(detail.get(k), str) else None
               for k in ("node", "location", "op_type")}
    err = cls.__new__(cls)
    _errors.OpError.__init__(err, details, strings["node"], strings["location"],
                             op_type=strings["op_type"])
    return err


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
        parts.append(_record_head(arr))
        if arr.nbytes:
            parts.append(_raw_bytes(arr))
    return b"".join(parts)


def _raw_bytes(arr: np.ndarray) -> memoryview:
    """The bytes of a C-contiguous array (through uint8: the buffer protocol has no bfloat16)."""
    return memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))


def decode_frame(data: bytes, copy: bool = False) -> Tuple[dict, List[np.ndarray]]:
    """Parse a frame; raises ``WireFormatError`` saying what is wrong. Without ``copy`` the
    arrays are read-only views of ``data``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireFormatError("a frame must be bytes")
    view = memoryview(data)
    header, count, pos = _read_header(view, MAGIC, "frame")
    tensors = []
    for k in range(count):
        dtype, dims, nbytes, pos = _read_record(view, pos, k)
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


def _read_header(view: memoryview, magic: bytes, what: str) -> Tuple[dict, int, int]:
    """The JSON header after ``magic``, its tensor count, and the position after it."""
    if len(view) < 8 or bytes(view[:4]) != magic:
        raise WireFormatError(f"not a flowc {what} (bad magic)")
    (hlen,) = _U32.unpack_from(view, 4)
    if hlen > MAX_HEADER_BYTES or 8 + hlen > len(view):
        raise WireFormatError(f"truncated {what}: header of {hlen} bytes, message of {len(view)}")
    try:
        header = json.loads(bytes(view[8:8 + hlen]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WireFormatError(f"{what} header is not JSON: {e}") from None
    except (ValueError, RecursionError) as e:   # an integer of thousands of digits; nesting
        raise WireFormatError(f"{what} header is JSON flowc does not read: "
                              f"{type(e).__name__}: {str(e)[:120]}") from None
    if not isinstance(header, dict):
        raise WireFormatError(f"{what} header is not a JSON object")
    count = header.get("tensors", 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise WireFormatError(f"{what} header has a bad tensor count {str(count)[:40]!r} (a "
                              "non-negative integer)")
    return header, count, 8 + hlen


def _record_head(arr: np.ndarray) -> bytes:
    """A tensor record without its data: dtype code, rank, dims, byte count."""
    try:
        dtype = DType.from_numpy(arr.dtype)
    except TypeError:
        raise WireFormatError(f"cannot send a tensor of numpy dtype {arr.dtype}") from None
    if arr.ndim > MAX_RANK:
        raise WireFormatError(f"cannot send a {arr.dtype} tensor of rank {arr.ndim}")
    return (_REC.pack(dtype.code, arr.ndim) + struct.pack(f"<{arr.ndim}q", *arr.shape)
            + _U64.pack(arr.nbytes))


def _read_record(view: memoryview, pos: int, k: int):
    """Tensor record ``k``'s head at ``pos``: (dtype, dims, nbytes, position of its data)."""
    if pos + _REC.size > len(view):
        raise WireFormatError(f"truncated frame: tensor {k} is missing")
    code, rank = _REC.unpack_from(view, pos)
    pos += _REC.size
    try:
        dtype = DType.from_code(code)
    except KeyError:
        raise WireFormatError(f"tensor {k} has an unknown dtype code {code}") from None
    if dtype is DType.resource:
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
    if math.prod(max(d, 1) for d in dims) * itemsize > MAX_ARRAY_BYTES:
        raise WireFormatError(f"tensor {k} has dims {list(dims)} that no {dtype.ir_name} array "
                              "can hold (its nonzero dims overflow a 64-bit size)")
    if math.prod(dims) * itemsize != nbytes:
        raise WireFormatError(f"tensor {k}: {nbytes} bytes do not hold {dtype.ir_name}{list(dims)}")
    return dtype, dims, nbytes, pos


def header_field(header: dict, name: str, kind, what: str = ""):
    """``header[name]``, checked to be of ``kind``; a ``WireFormatError`` otherwise."""
    value = header.get(name)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is list and ok:
        ok = all(isinstance(v, str) for v in value)
    if not ok:
        raise WireFormatError(f"{what or 'request'} needs '{name}' ({getattr(kind, '__name__', kind)})")
    return value


def header_int(header: dict, name: str, what: str = "", low: int = 0,
               high: int = MAX_HEADER_INT) -> int:
    """``header[name]``, an integer in ``[low, high]``; a ``WireFormatError`` otherwise (a
    step id or a timeout of a thousand digits is malformed, not a server bug)."""
    value = header_field(header, name, int, what)
    if not low <= value <= high:
        raise WireFormatError(f"{what or 'request'}: '{name}' must be in [{low}, {high}] "
                              f"(got {str(value)[:40]})")
    return value


# --- streams: tensors too large for one message travel as chunks -----------------------------
@dataclass(frozen=True)
class StreamLimits:
    """Sizes on the wire. A request or response whose tensors total more than ``chunk_bytes``
    travels as a stream: a head message (``FLS1``, the header and every tensor's record without
    its data) and then the tensors' bytes in chunks of at most ``chunk_bytes``, so no message
    comes near ``max_message_bytes``. No single tensor may exceed ``max_tensor_bytes``."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES
    chunk_bytes: int = 0                       # 0: half the message limit, at most 4 MiB

    def __post_init__(self):
        if not self.chunk_bytes:
            chunk = min(DEFAULT_CHUNK_BYTES, max(MIN_CHUNK_BYTES, self.max_message_bytes // 2))
            object.__setattr__(self, "chunk_bytes", chunk)
        if self.chunk_bytes >= self.max_message_bytes:
            raise ValueError(f"chunks of {self.chunk_bytes} bytes do not fit in messages of at "
                             f"most {self.max_message_bytes} bytes")


def payload_bytes(tensors: Sequence[np.ndarray]) -> int:
    return sum(np.asarray(t).nbytes for t in tensors)


def tensor_names(header: dict, count: int) -> List[str]:
    """What to call a message's tensors in errors: its ``names``, feeds or fetches, else its key."""
    for field in ("names", "feeds", "fetches"):
        names = header.get(field)
        if isinstance(names, list) and len(names) == count:
            return [str(n) for n in names]
    key = header.get("key")
    return [f"{key}" if isinstance(key, str) and count == 1 else f"#{k}" for k in range(count)]


def check_tensor_sizes(tensors: Sequence[np.ndarray], names: Sequence[str], limit: int) -> None:
    """``MessageTooLargeError`` naming the first tensor over ``limit`` bytes, if any."""
    for name, t in zip(names, tensors):
        nbytes = np.asarray(t).nbytes
        if nbytes > limit:
            raise MessageTooLargeError(_too_large(name, nbytes, limit))


def _too_large(name: str, nbytes: int, limit: int) -> str:
    return (f"tensor '{name}' has {nbytes} bytes, over the limit of {limit} bytes for one "
            "tensor between tasks (max_tensor_bytes; flowc serve --max-tensor-mb)")


def encode_stream(header: dict, tensors: Sequence[np.ndarray],
                  chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[bytes]:
    """The messages of a stream: the head (checked now), then the data in chunks (lazily)."""
    header = dict(header)
    header["tensors"] = len(tensors)
    head = json.dumps(header, separators=(",", ":")).encode()
    arrays = [np.asarray(t, order="C") for t in tensors]
    parts = [STREAM_MAGIC, _U32.pack(len(head)), head] + [_record_head(a) for a in arrays]
    return itertools.chain([b"".join(parts)], _chunks(arrays, chunk_bytes))


def _chunks(arrays: Sequence[np.ndarray], chunk_bytes: int) -> Iterator[bytes]:
    for arr in arrays:
        if arr.nbytes:
            data = _raw_bytes(arr)
            for start in range(0, arr.nbytes, chunk_bytes):
                yield bytes(data[start:start + chunk_bytes])


class StreamAssembler:
    """A stream's tensors, built as its chunks arrive (``decode_stream`` feeds it).

    The head's records are checked at once (shapes, and each tensor at most
    ``max_tensor_bytes``, so a head that claims too much is refused before anything else), but
    their sizes are not trusted for memory: a tensor's buffer starts at the size of the bytes
    that came for it and doubles as more come, never past what its record claims. A head
    that claims 15 GiB and then sends nothing costs nothing; memory follows the bytes received
    (at most twice them). A finished tensor is the buffer itself, reshaped: no copy."""

    def __init__(self, head, max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES):
        if not isinstance(head, (bytes, bytearray, memoryview)):
            raise WireFormatError("empty stream (no head message)")
        view = memoryview(head)
        self.header, count, pos = _read_header(view, STREAM_MAGIC, "stream head")
        names = tensor_names(self.header, count)
        self._records = []                       # (dtype, dims, nbytes) per tensor
        for k in range(count):
            dtype, dims, nbytes, pos = _read_record(view, pos, k)
            if nbytes > max_tensor_bytes:
                raise MessageTooLargeError(_too_large(names[k], nbytes, max_tensor_bytes))
            self._records.append((dtype, dims, nbytes))
        if pos != len(view):
            raise WireFormatError(f"{len(view) - pos} stray bytes after the stream head's records")
        self.expected = sum(r[2] for r in self._records)     # what the head claims
        self.received = 0                                    # data bytes that came
        self.tensors: List[np.ndarray] = []
        self._buf: Optional[np.ndarray] = None   # the tensor being filled (flat, growing)
        self._filled = 0                         # its bytes so far
        self._take_empty()

    @property
    def allocated_bytes(self) -> int:
        """Bytes held for tensor data: the finished tensors and the growing buffer."""
        done = sum(t.nbytes for t in self.tensors)
        return done + (0 if self._buf is None else self._buf.nbytes)

    def add(self, chunk) -> None:
        """Copy one chunk into the tensors it belongs to, growing the current buffer."""
        data = np.frombuffer(chunk, dtype=np.uint8)
        while len(data):
            if len(self.tensors) == len(self._records):
                raise WireFormatError(f"{len(data)} stray bytes after the stream's tensors")
            dtype, dims, nbytes = self._records[len(self.tensors)]
            take = min(len(data), nbytes - self._filled)
            end = self._filled + take
            self._reserve(end, dtype, nbytes)
            self._buf.view(np.uint8)[self._filled:end] = data[:take]
            self._filled = end
            self.received += take
            data = data[take:]
            if end == nbytes:
                tensor, self._buf, self._filled = self._buf, None, 0
                tensor.shape = dims              # in place: the tensor owns its memory
                self.tensors.append(tensor)
                self._take_empty()

    def finish(self) -> Tuple[dict, List[np.ndarray]]:
        """(header, tensors) once every byte came; ``WireFormatError`` when some did not."""
        if len(self.tensors) < len(self._records):
            raise WireFormatError(f"truncated stream: a tensor has {self._filled} of its "
                                  f"{self._records[len(self.tensors)][2]} bytes")
        return self.header, self.tensors

    def progress(self) -> str:
        return f"{self.received} of the {self.expected} bytes its head announced"

    def _reserve(self, need: int, dtype: DType, nbytes: int) -> None:
        """Make the buffer hold ``need`` bytes: double it (at least), at most ``nbytes``."""
        itemsize = np.dtype(dtype.np).itemsize
        if self._buf is None:
            self._buf = np.empty(-(-need // itemsize), dtype=dtype.np)
        elif need > self._buf.nbytes:
            size = min(nbytes, max(need, 2 * self._buf.nbytes))
            self._buf.resize(-(-size // itemsize), refcheck=False)   # no other view is alive

    def _take_empty(self) -> None:
        """Tensors with no data are complete without chunks."""
        while len(self.tensors) < len(self._records) and self._records[len(self.tensors)][2] == 0:
            dtype, dims, _ = self._records[len(self.tensors)]
            self.tensors.append(np.empty(dims, dtype=dtype.np))


def decode_stream(messages: Iterable[bytes],
                  max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES) -> Tuple[dict, List[np.ndarray]]:
    """Assemble a stream into (header, tensors) with a ``StreamAssembler``: memory grows with
    the bytes that arrive, not with what the head claims. A bad head, a tensor over
    ``max_tensor_bytes``, missing or extra bytes raise ``WireFormatError``/
    ``MessageTooLargeError``; a ``StreamIdleError`` from ``messages`` (a receiver's idle
    timeout) comes out saying how much had arrived."""
    messages = iter(messages)
    try:
        first = next(messages, None)
    except StreamIdleError as e:
        raise StreamIdleError(f"{e}, before the stream's head") from None
    assembler = StreamAssembler(first, max_tensor_bytes)
    try:
        for chunk in messages:
            assembler.add(chunk)
    except StreamIdleError as e:
        raise StreamIdleError(f"{e}, after {assembler.progress()}") from None
    return assembler.finish()


class ParkedResponses:
    """Responses too large for one message, kept under a random ticket until the caller
    fetches them with ``StreamResponse``; a ticket nobody fetches expires after ``ttl_s``."""

    def __init__(self, ttl_s: float = 120.0):
        self._items: Dict[str, Tuple[dict, list, float]] = {}
        self._lock = threading.Lock()
        self.ttl_s = ttl_s

    def put(self, header: dict, tensors: list) -> str:
        ticket = secrets.token_hex(16)
        now = time.monotonic()
        with self._lock:
            for t in [t for t, (_, _, at) in self._items.items() if at < now - self.ttl_s]:
                del self._items[t]
            self._items[ticket] = (header, tensors, now)
        return ticket

    def take(self, ticket: str) -> Tuple[dict, list]:
        with self._lock:
            item = self._items.pop(ticket, None)
        if item is None:
            raise WireFormatError(f"no streamed response {ticket[:8]}… (it expired after "
                                  f"{self.ttl_s:.0f} s or was already taken)")
        return item[0], item[1]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


# --- channels and the client side ------------------------------------------------------------
def channel_options(max_message_bytes: int) -> list:
    return [("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.enable_retries", 0),
            ("grpc.initial_reconnect_backoff_ms", 200),     # a restarted task is found soon
            ("grpc.max_reconnect_backoff_ms", 2000)]


try:                                             # gRPC core's connectivity state code
    from grpc._cython import cygrpc as _cygrpc
    _TRANSIENT_FAILURE = _cygrpc.ConnectivityState.transient_failure
except (ImportError, AttributeError):            # then no client is ever taken as lost
    _TRANSIENT_FAILURE = object()


def task_name(job: str, task: int) -> str:
    return f"/job:{job}/task:{task}"


class TaskClient:
    """Calls to one task. Errors come back as flowc errors; an unreachable task is an
    ``UnavailableError`` naming it (``/job:ps/task:0 at localhost:2222``). Requests and
    responses larger than one chunk travel as streams (``StreamLimits``)."""

    def __init__(self, address: str, name: str = "", token: Optional[str] = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 max_tensor_bytes: int = DEFAULT_MAX_TENSOR_BYTES):
        self.address = address
        self.name = name or address
        self.token = token
        self.limits = StreamLimits(max_message_bytes, max_tensor_bytes)
        self._channel = grpc.insecure_channel(address, options=channel_options(max_message_bytes))
        self._calls = {m: self._channel.unary_unary(f"/{SERVICE}/{m}",
                                                    request_serializer=_identity,
                                                    response_deserializer=_identity)
                       for m in METHODS}
        self._stream_request = self._channel.stream_unary(
            f"/{SERVICE}/{STREAM_REQUEST}", request_serializer=_identity,
            response_deserializer=_identity)
        self._stream_response = self._channel.unary_stream(
            f"/{SERVICE}/{STREAM_RESPONSE}", request_serializer=_identity,
            response_deserializer=_identity)

    @property
    def lost(self) -> bool:
        """The channel lost its task and waits out a reconnect backoff (up to
        ``grpc.max_reconnect_backoff_ms``) before it tries again; until then every call fails
        at once as unavailable, even when the task is back. A new client connects at once.

        The state is read from the channel's core object, as gRPC's own connectivity watcher
        reads it (``subscribe`` runs a polling thread that fails when the channel is closed
        under it); where that is not there, a channel is never taken as lost."""
        try:
            state = self._channel._channel.check_connectivity_state(False)
        except (AttributeError, ValueError):
            return False
        return state == _TRANSIENT_FAILURE

    def renewed(self) -> "TaskClient":
        """A new client of the same task (token and limits), for one that is ``lost``; this
        one is closed (it carries no call: every call on it fails)."""
        self.close()
        return TaskClient(self.address, self.name, self.token, self.limits.max_message_bytes,
                          self.limits.max_tensor_bytes)

    def close(self) -> None:
        self._channel.close()

    def _metadata(self):
        return ((TOKEN_METADATA, self.token),) if self.token else None

    def _start(self, method: str, header: dict, tensors: Sequence[np.ndarray], timeout: float,
               as_future: bool):
        """Send the request: one frame, or a stream when its tensors exceed one chunk."""
        if payload_bytes(tensors) <= self.limits.chunk_bytes:
            rpc, request = self._calls[method], encode_frame(header, tensors)
        else:
            check_tensor_sizes(tensors, tensor_names(header, len(tensors)),
                               self.limits.max_tensor_bytes)
            rpc = self._stream_request
            request = encode_stream(dict(header, method=method), tensors,
                                    self.limits.chunk_bytes)
        start = rpc.future if as_future else rpc
        return start(request, timeout=max(timeout, 0.001), metadata=self._metadata())

    def call(self, method: str, header: dict, tensors: Sequence[np.ndarray] = (),
             timeout: float = CONTROL_TIMEOUT_S) -> Tuple[dict, List[np.ndarray]]:
        deadline = time.monotonic() + timeout
        try:
            response = self._start(method, header, tensors, timeout, as_future=False)
        except grpc.RpcError as e:
            raise self.error(e, method) from None
        return self._response(response, method, deadline)

    def future(self, method: str, header: dict, tensors: Sequence[np.ndarray] = (),
               timeout: float = CONTROL_TIMEOUT_S) -> "CallFuture":
        deadline = time.monotonic() + timeout
        return CallFuture(self._start(method, header, tensors, timeout, as_future=True),
                          deadline)

    def result(self, future: "CallFuture", method: str) -> Tuple[dict, List[np.ndarray]]:
        try:
            response = future.result()
        except grpc.RpcError as e:
            raise self.error(e, method) from None
        except grpc.FutureCancelledError:
            raise AbortedError(f"{method} to {self.name} at {self.address} was cancelled") \
                from None
        return self._response(response, method, future.deadline)

    def _response(self, response: bytes, method: str, deadline: float):
        """The decoded response; a parked one (too large for one message) is fetched as a
        stream within what is left of the call's deadline."""
        try:
            header, tensors = decode_frame(response, copy=True)
        except WireFormatError as e:
            raise TransportError(f"{self.name} at {self.address} answered {method} with a "
                                 f"malformed frame: {e}") from None
        ticket = header.get(STREAM_TICKET)
        if ticket is None:
            return header, tensors
        try:
            chunks = self._stream_response(encode_frame({"ticket": ticket}),
                                           timeout=max(deadline - time.monotonic(), 0.001),
                                           metadata=self._metadata())
            return decode_stream(chunks, self.limits.max_tensor_bytes)
        except grpc.RpcError as e:
            raise self.error(e, f"{method} (streamed response)") from None
        except WireFormatError as e:
            raise TransportError(f"{self.name} at {self.address} streamed a malformed "
                                 f"{method} response: {e}") from None

    def error(self, e: grpc.RpcError, method: str) -> FlowcError:
        """The flowc error a failed call stands for."""
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = (e.details() if hasattr(e, "details") else str(e)) or ""
        remote = detail = None
        try:
            for k, v in (e.trailing_metadata() or ()):
                if k == ERROR_METADATA:
                    remote = v
                elif k == ERROR_DETAIL_METADATA:
                    detail = v
        except Exception:                            # noqa: BLE001  (no metadata: local error)
            remote = None
        where = f"{self.name} at {self.address}"
        if remote is not None:                       # the task answered with a flowc error
            return remote_error(remote, details, detail)
        if code == grpc.StatusCode.UNAVAILABLE:
            return UnavailableError(f"{where} is unavailable ({method}: {details})")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return DeadlineExceededError(f"{where} did not answer {method} within its deadline")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return UnauthenticatedError(f"{where} refused {method}: {details}")
        if code == grpc.StatusCode.CANCELLED:
            return AbortedError(f"{method} to {where} was cancelled")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return MessageTooLargeError(f"{where} refused {method}: {details} (a message over "
                                        "the size limit?)")
        return TransportError(f"{method} to {where} failed: {code.name}: {details}")


class CallFuture:
    """A call in flight (``TaskClient.future``): the gRPC future and the call's deadline,
    which also bounds fetching a streamed response."""

    def __init__(self, future, deadline: float):
        self._future = future
        self.deadline = deadline

    def add_done_callback(self, fn) -> None:
        self._future.add_done_callback(lambda _: fn(self))

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> bool:
        return self._future.cancel()

    def exception(self):
        return self._future.exception()

    def result(self):
        return self._future.result()


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
                raise InternalError(f"{key} was sent twice in step {step_id}")
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
        raise FailedPreconditionError(f"node '{node}': a cross-task send or receive ran outside "
                                      "a task server's step (run this graph with a grpc:// "
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
