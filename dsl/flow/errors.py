"""The text DSL's one error type: every problem in a ``*.flow`` file, with its position."""
from __future__ import annotations

from compiler.errors import SourceError


class FlowError(SourceError):
    """A syntax or semantic error in a ``*.flow`` file: ``file:line:col: error: message``,
    then the source line and a caret under the column."""


class FlowErrors(FlowError):
    """Several errors in one model (``flowc check`` reports every one): the message lists
    them in order; ``file``/``line``/``col`` are the first one's; ``errors`` has them all."""

    def __init__(self, errors):
        first = errors[0]
        super().__init__(first.detail, first.file, first.line, first.col)
        self.errors = list(errors)
        self.args = ("\n".join(str(e) for e in self.errors) + f"\n{len(self.errors)} errors",)


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
