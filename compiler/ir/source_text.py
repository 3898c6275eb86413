"""Reading a source file (IR text, a ``*.flow`` model) for a parser: its text as UTF-8, or an
error at the line and column of the first byte that is not UTF-8.

A binary file, or text in another encoding, is a user error about a place in the file, like a
syntax error: the parsers' error types (``IRSyntaxError``, ``FlowError``) carry it, so
``flowc`` prints ``file:line:col: not UTF-8 text: byte 0xff (invalid start byte)`` with the
line (the bad bytes shown as U+FFFD) and a caret, never a ``UnicodeDecodeError``.
"""
from __future__ import annotations

from typing import Callable

from compiler.errors import SourceError


def decode_source(raw: bytes, filename: str,
                  error: Callable[..., SourceError] = SourceError) -> str:
    """``raw`` as UTF-8 text; ``error(message, filename, line, col, source_line)`` where it is
    not (line and column of the first bad byte, counted in characters as the parsers do)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        line_start = raw.rfind(b"\n", 0, e.start) + 1
        line_end = raw.find(b"\n", e.start)
        col = len(raw[line_start:e.start].decode("utf-8")) + 1     # valid up to the bad byte
        shown = raw[line_start:line_end if line_end >= 0 else len(raw)]
        shown_line = shown.decode("utf-8", "replace").rstrip("\r")
        raise error(f"not UTF-8 text: byte 0x{raw[e.start]:02x} ({e.reason})", filename, line,
                    col, shown_line) from None


def read_source(path: str, error: Callable[..., SourceError] = SourceError,
                shown: str = "") -> str:
    """The text of the file at ``path`` (``shown``, or ``path``, names it in errors). OSErrors
    (no such file, a folder, no permission) propagate for the caller to word."""
    with open(path, "rb") as f:
        raw = f.read()
    return decode_source(raw, shown or path, error)
