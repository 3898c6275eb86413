"""The text DSL's one error type: every problem in a ``*.flow`` file, with its position."""
from __future__ import annotations

from compiler.errors import SourceError


class FlowError(SourceError):
    """A syntax or semantic error in a ``*.flow`` file: ``file:line:col: error: message``,
    then the source line and a caret under the column."""


class Source:
    """One ``*.flow`` file's text, for positions in error messages."""

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.lines = text.split("\n")

    def error(self, message: str, line: int, col: int) -> FlowError:
        """A ``FlowError`` at ``line:col`` of this file, quoting the line."""
        src = self.lines[line - 1].rstrip("\r") if 0 < line <= len(self.lines) else None
        return FlowError(message, self.filename, line, col, src)

    def end_position(self) -> tuple:
        """(line, col) just after the last non-blank character."""
        line = len(self.lines)
        while line > 1 and not self.lines[line - 1].strip():
            line -= 1
        return line, len(self.lines[line - 1].rstrip()) + 1
