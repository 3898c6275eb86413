"""Errors raised by the runtime: TensorFlow's error classes (``tf.errors``), each naming what
failed and where.

Every error of a running step is an ``OpError`` of one of TensorFlow's canonical classes
(``InvalidArgumentError``, ``OutOfRangeError``, ...), whichever backend ran it: the C runtime's
``flowc_status`` codes (``runtime/csrc/flowc_rt.h``) map to the classes here
(``class_for_status``), the numpy interpreter raises the same classes, and the task servers
send the class, its code, the node and its location over gRPC (``runtime/transport.py``).
``docs/errors.md`` lists which class each failure is. The names ``dsl.errors`` (``fl.errors``)
re-exports are these.

An ``OpError`` has TensorFlow's ``error_code``, ``message``, ``node_def`` (the failing node's
name and op type, ``None`` where no node failed) and ``op`` (the ``fl.Operation`` where
``fl.Session`` raised it), and flowc's source ``location`` (``file:line:col``) of the node.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Dict, NamedTuple, Optional, Type

# --- TensorFlow's canonical codes (tensorflow/core/protobuf/error_codes.proto; gRPC's too) -----
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16

# --- flowc_status codes: the C runtime's ABI (flowc_rt.h), numbered apart from TensorFlow's ----
FLOWC_OK = 0
FLOWC_ERROR = 1
FLOWC_OUT_OF_RANGE = 2
FLOWC_INVALID_ARGUMENT = 3
FLOWC_RESOURCE_EXHAUSTED = 4
FLOWC_FAILED_PRECONDITION = 5
FLOWC_NOT_FOUND = 6
FLOWC_DATA_LOSS = 7
FLOWC_DEADLINE_EXCEEDED = 8
FLOWC_ABORTED = 9
FLOWC_UNAVAILABLE = 10
FLOWC_CANCELLED = 11
FLOWC_UNIMPLEMENTED = 12
FLOWC_INTERNAL = 13
FLOWC_ALREADY_EXISTS = 14
FLOWC_PERMISSION_DENIED = 15
FLOWC_UNAUTHENTICATED = 16


class FlowcError(Exception):
    """Base of every error flowc raises on purpose."""


class ArtifactError(FlowcError):
    """An artifact is missing, tampered with, or of another format version."""


class NodeDef(NamedTuple):
    """What an error knows of the node that failed (``OpError.node_def``): its name, its op
    type (``None`` where the C runtime reported only the name) and its device."""
    name: str
    op: Optional[str] = None
    device: Optional[str] = None


def _node_name(node) -> Optional[str]:
    if node is None or isinstance(node, str):
        return node or None
    return getattr(node, "name", None) or None


class OpError(FlowcError):
    """A step failed (``tf.errors.OpError``): the base of TensorFlow's error classes.

    Made flowc's way, ``OpError(message, node=None, location=None, code=None)``: ``message``
    already names the node and where it was written (the C runtime and the interpreter write
    ``file:line:col: node 'name': ...``); ``node`` is the node's name (or an object with a
    ``name``, ``op`` and ``location``), ``code`` the ``flowc_status`` code it came with. Or
    TensorFlow's way, ``OpError(node_def, op, message[, error_code])``. Keywords ``op_type``
    (the node's op), ``device``, ``node_def``, ``op`` and ``error_code`` may be given either way.
    """

    error_code: int = UNKNOWN          # TensorFlow's code of the class
    status_code: int = FLOWC_ERROR     # the flowc_status code the C runtime reports it with

    def __init__(self, *args, message: Optional[str] = None, node=None,
                 location: Optional[str] = None, code: Optional[int] = None,
                 node_def=None, op=None, op_type: Optional[str] = None,
                 device: Optional[str] = None, error_code: Optional[int] = None):
        if 3 <= len(args) <= 4 and not isinstance(args[0], str) and isinstance(args[2], str):
            node_def, op, message = args[:3]             # TensorFlow's order
            if len(args) == 4:
                error_code = args[3]
        elif len(args) > 4:
            raise TypeError(f"{type(self).__name__} takes (message, node, location, code) or "
                            f"(node_def, op, message[, error_code]); got {len(args)} arguments")
        else:
            given = dict(zip(("message", "node", "location", "code"), args))
            message = given.get("message", message)
            node = given.get("node", node)
            location = given.get("location", location)
            code = given.get("code", code)
        if isinstance(op, str):                          # an op type, not an Operation
            op_type, op = op_type or op, None
        source = node if node is not None else node_def
        if source is None and op is not None:
            source = op
        self.node_name: Optional[str] = _node_name(source)
        if source is not None and not isinstance(source, str):
            op_type = op_type or _str_or_none(getattr(source, "op", None)) \
                or _str_or_none(getattr(source, "type", None))
            device = device or _str_or_none(getattr(source, "device", None))
            if location is None and getattr(source, "location", None) is not None:
                location = str(source.location)
        self.location: Optional[str] = str(location) if location else None
        self.op_type = op_type
        self.device = device or None
        self._op = op
        if code is not None:
            self.status_code = int(code)
        if error_code is not None and int(error_code) != type(self).error_code:
            self.error_code = int(error_code)
        self._message = "" if message is None else str(message)
        super().__init__(self._message)

    # --- TensorFlow's attributes ---------------------------------------------------------
    @property
    def message(self) -> str:
        """The error message: what failed, naming the node and where it was written."""
        return self._message

    @property
    def node_def(self) -> Optional[NodeDef]:
        """The failing node (name, op type, device), or ``None`` where no node failed."""
        if self.node_name is None:
            return None
        return NodeDef(self.node_name, self.op_type, self.device)

    @property
    def op(self):
        """The failing ``fl.Operation`` where ``fl.Session`` raised the error, else ``None``."""
        return self._op

    @op.setter
    def op(self, value) -> None:
        self._op = value

    # --- flowc's names of the same facts -------------------------------------------------
    @property
    def node(self) -> Optional[str]:
        """The failing node's name (what ``RuntimeExecutionError.node`` always was)."""
        return self.node_name

    @property
    def code(self) -> int:
        """The ``flowc_status`` code (flowc_rt.h) of this error."""
        return self.status_code

    def add_node(self, node: str, location: Optional[str] = None,
                 op_type: Optional[str] = None) -> "OpError":
        """Name the node this error happened in, where the code that raised it did not know
        it (a queue, an accumulator): prefixes the message as the kernels write it. Returns
        ``self``; an error that names its node already is left as it is."""
        if self.node_name is not None or not node:
            return self
        self.node_name, self.op_type = node, self.op_type or op_type
        self.location = self.location or (str(location) if location else None)
        prefix = (f"{self.location}: " if self.location else "") + f"node '{node}'" \
            + (f" ({op_type})" if op_type else "") + ": "
        self._message = prefix + self._message
        self.args = (self._message,)
        return self

    def __reduce__(self):
        return (_rebuild, (type(self), self._message), self.__dict__.copy())


def _str_or_none(value) -> Optional[str]:
    return value if isinstance(value, str) and value else None


def _rebuild(cls, message: str):
    """Unpickle an ``OpError`` (of any subclass: its own ``__init__`` is not called again)."""
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    return err


# TensorFlow's subclasses, one per canonical code.
class CancelledError(OpError):
    """An operation was cancelled: an enqueue to a closed queue, a step cancelled with it."""
    error_code, status_code = CANCELLED, FLOWC_CANCELLED


class UnknownError(OpError):
    """An error of no known kind (a host function's Python exception, a C failure without a
    code)."""
    error_code, status_code = UNKNOWN, FLOWC_ERROR


class InvalidArgumentError(OpError):
    """A kernel got a value it cannot use (an index out of range of a gather, a shape that
    does not fit, an integer division by zero, a missing feed), or (``--check-numerics``) an
    op produced NaN or Inf."""
    error_code, status_code = INVALID_ARGUMENT, FLOWC_INVALID_ARGUMENT


class DeadlineExceededError(OpError):
    """A step did not finish within its deadline (``RunOptions(timeout_in_ms=...)``)."""
    error_code, status_code = DEADLINE_EXCEEDED, FLOWC_DEADLINE_EXCEEDED


class NotFoundError(OpError):
    """Something a step names does not exist (a checkpoint file, a registered step)."""
    error_code, status_code = NOT_FOUND, FLOWC_NOT_FOUND


class AlreadyExistsError(OpError):
    """Something a step creates exists already."""
    error_code, status_code = ALREADY_EXISTS, FLOWC_ALREADY_EXISTS


class PermissionDeniedError(OpError):
    """The caller may not do this (a file it may not write)."""
    error_code, status_code = PERMISSION_DENIED, FLOWC_PERMISSION_DENIED


class ResourceExhaustedError(OpError):
    """Out of memory (host or GPU), or a message over its size limit."""
    error_code, status_code = RESOURCE_EXHAUSTED, FLOWC_RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError):
    """The state does not allow the operation: a read of a variable that was never
    initialized, a cross-task op run outside a task server."""
    error_code, status_code = FAILED_PRECONDITION, FLOWC_FAILED_PRECONDITION


class AbortedError(OpError):
    """A step was stopped because another part of it failed, or it applied to a closed
    accumulator."""
    error_code, status_code = ABORTED, FLOWC_ABORTED


class OutOfRangeError(OpError):
    """An input is exhausted: a dequeue or take from a closed queue or accumulator with too few
    elements (the end-of-input signal)."""
    error_code, status_code = OUT_OF_RANGE, FLOWC_OUT_OF_RANGE


class UnimplementedError(OpError):
    """The operation is not implemented or not supported here."""
    error_code, status_code = UNIMPLEMENTED, FLOWC_UNIMPLEMENTED


class InternalError(OpError):
    """An invariant of flowc or of a library it calls broke (a CUDA call, cuBLAS)."""
    error_code, status_code = INTERNAL, FLOWC_INTERNAL


class UnavailableError(OpError):
    """A task cannot be reached (killed, restarted, not started)."""
    error_code, status_code = UNAVAILABLE, FLOWC_UNAVAILABLE


class DataLossError(OpError):
    """Data is lost or corrupt (a truncated or damaged checkpoint file)."""
    error_code, status_code = DATA_LOSS, FLOWC_DATA_LOSS


class UnauthenticatedError(OpError):
    """A call did not carry the credentials (a task's token) it needs."""
    error_code, status_code = UNAUTHENTICATED, FLOWC_UNAUTHENTICATED


CANONICAL_CLASSES = (CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
                     NotFoundError, AlreadyExistsError, PermissionDeniedError,
                     ResourceExhaustedError, FailedPreconditionError, AbortedError,
                     OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
                     DataLossError, UnauthenticatedError)
_CLASS_OF_CODE: Dict[int, Type[OpError]] = {c.error_code: c for c in CANONICAL_CLASSES}


# --- flowc's own names, kept ---------------------------------------------------------------
RuntimeExecutionError = OpError      # what a failed compiled step always raised: now the base


class FeedError(InvalidArgumentError):
    """A fed value does not fit its placeholder (dtype, shape) or a needed feed is missing
    (TensorFlow: ``InvalidArgumentError``, "You must feed a value for placeholder")."""


class PeerUnavailableError(UnavailableError):
    """A step's receive could not reach the task that sends the tensor (killed, restarted, or
    not started): the node is the receive. A lost task, as a transport's UnavailableError is,
    so MonitoredTrainingSession recovers from it."""


# flowc_status code -> the class the C runtime's error is (a receive that cannot reach its
# peer is the one FLOWC_UNAVAILABLE the C runtime reports).
_CLASS_OF_STATUS: Dict[int, Type[OpError]] = {c.status_code: c for c in CANONICAL_CLASSES}
_CLASS_OF_STATUS[FLOWC_UNAVAILABLE] = PeerUnavailableError
STATUS_CLASSES = MappingProxyType(_CLASS_OF_STATUS)


def class_for_status(status_code: int) -> Type[OpError]:
    """The class of an error the C runtime reported with ``status_code`` (flowc_rt.h); an
    unknown code is an ``UnknownError``."""
    return _CLASS_OF_STATUS.get(status_code, UnknownError)


def exception_type_from_error_code(error_code: int) -> Type[OpError]:
    """TensorFlow's class for its canonical ``error_code`` (``tf.errors``' function)."""
    try:
        return _CLASS_OF_CODE[error_code]
    except KeyError:
        raise KeyError(f"{error_code} is not a canonical error code (1 to 16)") from None


def error_code_from_exception_type(cls: type) -> int:
    """The canonical code of an ``OpError`` class (``tf.errors``' function)."""
    if not (isinstance(cls, type) and issubclass(cls, OpError)):
        raise KeyError(f"{cls!r} is not an OpError class")
    return cls.error_code


def status_code_of(exc: BaseException) -> int:
    """The ``flowc_status`` code to report ``exc`` with when it crosses into C (a host call):
    its class's, out of memory for a ``MemoryError``, else FLOWC_ERROR (an ``UnknownError``,
    as TensorFlow reports a Python function's exception)."""
    code = getattr(exc, "status_code", None)
    if isinstance(code, int) and code > 0:
        return code
    if isinstance(exc, MemoryError):
        return FLOWC_RESOURCE_EXHAUSTED
    return FLOWC_ERROR
