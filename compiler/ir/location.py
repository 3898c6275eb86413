"""Source locations: where a node was written (a DSL file or the user's Python frame)."""
from __future__ import annotations

import functools
import json
import os
import re
import sys
import threading
from typing import NamedTuple, Optional

# A line or column: at most 18 digits (an int64; longer would also trip int()'s digit limit).
_DIGITS = re.compile(r"^[0-9]{1,18}$")


class SourceLocation(NamedTuple):
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @staticmethod
    def parse(text: str) -> Optional["SourceLocation"]:
        """Read ``file:line:col`` (the file may be a JSON string); None if malformed."""
        text = text.strip()
        if text.startswith('"'):
            try:
                file, end = json.JSONDecoder().raw_decode(text)
            except ValueError:
                return None
            rest = text[end:].split(":")
            if len(rest) != 3 or rest[0] or not isinstance(file, str):
                return None
            parts = [file, rest[1], rest[2]]
        else:
            parts = text.rsplit(":", 2)
            if len(parts) != 3 or not parts[0]:
                return None
        if not (_DIGITS.match(parts[1]) and _DIGITS.match(parts[2])):
            return None
        return SourceLocation(parts[0], int(parts[1]), int(parts[2]))

    def to_text(self) -> str:
        """``file:line:col`` for the IR; the file is a JSON string if it would not read back."""
        return f"{_file_text(self.file)}:{self.line}:{self.col}"


@functools.lru_cache(maxsize=4096)
def _file_text(file: str) -> str:
    """A location's file as the IR writes it (a graph's nodes share a few files)."""
    if not file or file != file.strip() or file.startswith('"') or any(
            c in file for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        return json.dumps(file)
    return file


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INTERNAL = tuple(os.path.join(_ROOT, pkg) + os.sep for pkg in ("compiler", "dsl", "runtime"))


@functools.lru_cache(maxsize=4096)
def _is_internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_INTERNAL) or filename.startswith("<frozen")


@functools.lru_cache(maxsize=4096)
def _display_path(filename: str, cwd: str) -> str:
    """``filename`` relative to the working directory (pseudo-files like ``<stdin>`` as is)."""
    return filename if filename.startswith("<") else os.path.relpath(filename, cwd)


def _column(frame) -> int:
    """1-based column of the expression being evaluated in ``frame`` (0 if unknown)."""
    try:
        import itertools
        pos = next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None))
        return (pos[2] or 0) + 1 if pos[2] is not None else 0
    except (AttributeError, StopIteration):
        return 0


class _Override(threading.local):
    def __init__(self):
        self.location: Optional[SourceLocation] = None


_override = _Override()


class location_override:  # noqa: N801  (used as a function: ``with location_override(loc):``)
    """Nodes created inside get ``location`` instead of the Python frame's (front ends such as
    the text DSL use it to point at their own source). A small class rather than a generator:
    the DSL enters one per builder call."""

    __slots__ = ("location", "saved")

    def __init__(self, location: Optional[SourceLocation]):
        self.location = location
        self.saved: Optional[SourceLocation] = None

    def __enter__(self) -> None:
        self.saved = _override.location
        _override.location = self.location

    def __exit__(self, *exc) -> bool:
        _override.location = self.saved
        return False


def caller_location() -> Optional[SourceLocation]:
    """The innermost Python frame outside flowc's own packages (the user's line), unless a
    ``location_override`` block is active."""
    if _override.location is not None:
        return _override.location
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_internal(fn):
            return SourceLocation(_display_path(fn, os.getcwd()), f.f_lineno, _column(f))
        f = f.f_back
    return None
