"""Compiler errors: each carries the node name and source location it is about."""
from __future__ import annotations

from typing import Optional

from runtime.errors import FlowcError


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
    """An op is unknown or used with the wrong inputs or attributes."""


class CodegenError(CompileError):
    """An op cannot be emitted for the chosen target."""


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


class ExecutionError(FlowcError):
    """A node failed while running in the reference interpreter."""

    def __init__(self, message: str, node=None):
        self.node_name = getattr(node, "name", None)
        loc = getattr(node, "location", None)
        prefix = (f"{loc}: " if loc else "") + (f"node '{node.name}' ({node.op}): " if node is not None else "")
        super().__init__(prefix + message)
