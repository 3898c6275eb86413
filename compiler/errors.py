"""Compiler errors: each carries the node name and source location it is about."""
from __future__ import annotations

from typing import Optional

from runtime import errors as _runtime_errors
from runtime.errors import FlowcError, InvalidArgumentError


class CompileError(FlowcError):
    """An error about a node of the graph: names the node and where it was written."""

    def __init__(self, message: str, node=None, location=None):
        self.node_name = getattr(node, "name", node)
        self.location = location if location is not None else getattr(node, "location", None)
        self.detail = message
        prefix = ""
        if self.location is not None:
            prefix += f"{self.location}: "
        if self.node_name is not None:
            op = getattr(node, "op", None)
            prefix += f"node '{self.node_name}'" + (f" ({op})" if op else "") + ": "
        super().__init__(prefix + message)


class GraphError(CompileError):
    """The graph is malformed (verifier failures, unknown names, cycles)."""


class ShapeError(CompileError):
    """Shapes or dtypes do not fit an op's signature."""


class OpError(CompileError):
    """An op is unknown or used with the wrong inputs or attributes (while the graph is built
    or compiled; not ``runtime.errors.OpError``, TensorFlow's base of a failed step's errors)."""


class CodegenError(CompileError):
    """An op cannot be emitted for the chosen target."""


class StaticValueNeeded(CodegenError):
    """The C backend needs something known at compile time (a rank, a dim, an axis or a
    permutation) that this step only computes at run time. ``fl.Session`` then compiles the
    step again for the shapes (and, where needed, the values) it is fed (``dsl/
    rank_specialized.py``); ``node`` is the IR node that needed it."""

    def __init__(self, message: str, node=None, location=None):
        super().__init__(message, node, location)
        self.node = node if hasattr(node, "inputs") else None


class BuildError(FlowcError):
    """The system compiler rejected generated source."""


class SourceError(FlowcError):
    """An error at a position of a text file: ``file:line:col: error: message``, then the
    source line and a caret under the column."""

    def __init__(self, message: str, file: str = "<input>", line: int = 0, col: int = 0,
                 source_line: Optional[str] = None):
        self.file, self.line, self.col, self.detail = file, line, col, message
        text = f"{file}:{line}:{col}: error: {message}"
        if source_line is not None:
            text += "\n  " + source_line + "\n  " + " " * max(col - 1, 0) + "^"
        super().__init__(text)


class IRSyntaxError(SourceError):
    """IR text that does not parse."""


def _where(node) -> str:
    """``file:line:col: node 'name' (Op): ``, the prefix of a run-time error about ``node``."""
    if node is None:
        return ""
    loc = getattr(node, "location", None)
    return (f"{loc}: " if loc else "") + f"node '{node.name}' ({node.op}): "


def node_error(cls: type, message: str, node=None) -> "_runtime_errors.OpError":
    """A run-time error of class ``cls`` (one of ``runtime.errors``' TensorFlow classes) about
    ``node`` (an IR node, or None): the message names the node, its op and its location, as
    the C kernels' messages do, and ``node_def``/``location`` carry them."""
    return cls(_where(node) + message, node)


class ExecutionError(InvalidArgumentError):
    """A node failed while running in the reference interpreter because of the values it got:
    TensorFlow's ``InvalidArgumentError`` (the C kernels report the same failures as one).
    Failures of another kind are raised as their own class (``node_error``)."""

    def __init__(self, message: str, node=None):
        super().__init__(_where(node) + message, node)
