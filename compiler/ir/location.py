"""Source locations: where a node was written (a DSL file or the user's Python frame)."""
from __future__ import annotations

import os
import sys
from typing import NamedTuple, Optional


class SourceLocation(NamedTuple):
    file: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @staticmethod
    def parse(text: str) -> Optional["SourceLocation"]:
        parts = text.strip().rsplit(":", 2)
        if len(parts) != 3:
            return None
        try:
            return SourceLocation(parts[0], int(parts[1]), int(parts[2]))
        except ValueError:
            return None


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_INTERNAL = tuple(os.path.join(_ROOT, pkg) + os.sep for pkg in ("compiler", "dsl", "runtime"))


def _is_internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_INTERNAL) or filename.startswith("<frozen")


def _column(frame) -> int:
    """1-based column of the expression being evaluated in ``frame`` (0 if unknown)."""
    try:
        import itertools
        pos = next(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, None))
        return (pos[2] or 0) + 1 if pos[2] is not None else 0
    except (AttributeError, StopIteration):
        return 0


def caller_location() -> Optional[SourceLocation]:
    """The innermost Python frame outside flowc's own packages (the user's line)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_internal(fn):
            return SourceLocation(fn if fn.startswith("<") else os.path.relpath(fn), f.f_lineno,
                                  _column(f))
        f = f.f_back
    return None
