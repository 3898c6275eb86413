"""Errors raised by the runtime. Each names what failed and where."""
from __future__ import annotations


class FlowcError(Exception):
    """Base of every error flowc raises on purpose."""


class ArtifactError(FlowcError):
    """An artifact is missing, tampered with, or of another format version."""


class FeedError(FlowcError):
    """A fed value does not fit its placeholder (dtype, shape) or a needed feed is missing."""


class RuntimeExecutionError(FlowcError):
    """A compiled kernel reported an error; the message names the node and its source."""

    def __init__(self, message: str, node: str | None = None, location: str | None = None,
                 code: int | None = None):
        self.node = node
        self.location = location
        self.code = code
        super().__init__(message)


class DeadlineExceededError(RuntimeExecutionError):
    """A step did not finish within its deadline (``RunOptions(timeout_in_ms=...)``)."""


class AbortedError(RuntimeExecutionError):
    """A step was stopped because another part of it failed."""


class InvalidArgumentError(RuntimeExecutionError):
    """A kernel got a value it cannot use, or (``--check-numerics``) an op produced NaN or Inf."""


class PeerUnavailableError(RuntimeExecutionError):
    """A step's receive could not reach the task that sends the tensor (killed, restarted, or
    not started): the node is the receive. A lost task, as a transport's UnavailableError is,
    so MonitoredTrainingSession recovers from it."""


class OutOfRangeError(RuntimeExecutionError):
    """An input is exhausted (a closed, empty queue) or an index is out of range."""
