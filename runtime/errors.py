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

    def __init__(self, message: str, node: str | None = None, location: str | None = None):
        self.node = node
        self.location = location
        super().__init__(message)
