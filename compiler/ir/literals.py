"""Literals of the IR text to values, each checked as TensorFlow checks an attr value: a number
must fit its type, a string must be text.

- Integers are int64, TensorFlow's widest integer type (``AttrValue.i``, ``TensorShapeProto``
  dims): a literal outside -2**63 .. 2**63-1 is an error, also one longer than Python's
  4,300-digit limit on ``int(str)`` (which would otherwise raise deep inside parsing).
- Floats are doubles: a finite literal too large for one (``1e999``) is an error rather than a
  silent ``inf``; infinity is written ``inf``, as the printer does.
- Strings are JSON strings (the printer writes them with ``json.dumps``): an escape JSON does not
  have (``\\x00``), a raw control character or a lone UTF-16 surrogate (``\\ud800``, not
  Unicode text) is an error.

Each problem is a ``LiteralError`` (a ``ValueError``) with the offset in the literal's text of
the character it is about, so the parser can point its caret there.
"""
from __future__ import annotations

import json
import math
import re
from typing import Optional

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
UINT64_MAX = 2 ** 64 - 1
_INT64_DIGITS = len(str(INT64_MAX))            # 19: longer literals need no conversion to refuse

_JSON_ESCAPES = '\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX'
# What a lone surrogate can hide in: a \uXXXX escape, another escape (skipped), or the raw
# character itself (text handed to the parser as a Python string may hold one).
_ESCAPE_OR_SURROGATE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|.)|[\ud800-\udfff]', re.S)


class LiteralError(ValueError):
    """A literal that does not stand for a value; ``offset``: where in its text."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


def abbreviate(text: str, keep: int = 10) -> str:
    """``text`` for a message: a literal of thousands of digits shows its first few."""
    if len(text) <= 2 * keep + 4:
        return text
    digits = text.lstrip("+-")
    size = f"{len(digits)} digits" if digits.isdigit() else f"{len(text)} characters"
    return f"{text[:keep]}... ({size})"


def _digits_value(sign: str, digits: str) -> Optional[int]:
    """The int of ``sign digits`` when it has at most 19 significant digits, else None."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _INT64_DIGITS:
        return None
    value = int(significant)
    return -value if sign == "-" else value


def parse_int(text: str) -> int:
    """An integer literal (``[-+]?[0-9]+``) that fits int64."""
    sign = text[:1] if text[:1] in "+-" else ""
    value = _digits_value(sign, text[len(sign):])
    if value is None or not INT64_MIN <= value <= INT64_MAX:
        raise LiteralError(f"integer {abbreviate(text)} is out of range: integers are int64 "
                           f"({INT64_MIN} to {INT64_MAX})")
    return value


def parse_element_int(text: str) -> int:
    """An integer element of a tensor constant: an int64, or a u64 up to 2**64-1 (whether it
    fits the constant's dtype is checked with the tensor)."""
    sign = text[:1] if text[:1] in "+-" else ""
    digits = text[len(sign):].lstrip("0") or "0"
    value = int(digits) if len(digits) <= _INT64_DIGITS + 1 else None
    if value is not None and sign == "-":
        value = -value
    if value is None or not INT64_MIN <= value <= UINT64_MAX:
        raise LiteralError(f"integer {abbreviate(text)} is out of range: tensor elements are "
                           f"int64 or u64 ({INT64_MIN} to {UINT64_MAX})")
    return value


def parse_dim(text: str) -> int:
    """A dimension of a type (``[0-9]+``): 0 to 2**63-1, as TensorFlow's int64 dims."""
    value = _digits_value("", text)
    if value is None or value > INT64_MAX:
        raise LiteralError(f"dimension {abbreviate(text)} is out of range: dims are int64 "
                           f"(at most {INT64_MAX})")
    return value


def parse_float(text: str) -> float:
    """A float literal whose value is a finite double."""
    value = float(text)
    if math.isinf(value):
        raise LiteralError(f"number {abbreviate(text)} is out of range for a 64-bit float; "
                           "write inf for infinity")
    return value


def parse_string(text: str) -> str:
    """A JSON string literal, quotes included, whose value is Unicode text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise _json_problem(text, e) from None
    if not isinstance(value, str):
        raise LiteralError("expected a string in double quotes")
    if any("\ud800" <= c <= "\udfff" for c in value):
        _lone_surrogate(text)
    return value


def _shown(c: str) -> str:
    return c if c.isprintable() else repr(c)[1:-1]


def _json_problem(text: str, e: json.JSONDecodeError) -> LiteralError:
    pos = e.pos
    if e.msg.startswith("Invalid \\uXXXX"):
        pos = text.rfind("\\", 0, pos + 1)
        return LiteralError("bad escape: \\u takes four hex digits (as \\u00e9)", max(pos, 0))
    if e.msg.startswith("Invalid \\escape") and pos + 1 < len(text):
        return LiteralError(f"unknown escape '\\{_shown(text[pos + 1])}' in a string; strings "
                            f"are JSON, with the escapes {_JSON_ESCAPES}", pos)
    if e.msg.startswith("Invalid control character") and pos < len(text):
        return LiteralError(f"raw control character {text[pos]!r} in a string; write it as "
                            f"\\u{ord(text[pos]):04x}", pos)
    return LiteralError(f"bad string: {e.msg}", min(pos, max(len(text) - 1, 0)))


def _lone_surrogate(text: str) -> None:
    """Raise at the first surrogate of ``text`` that is not half of a \\uD8xx\\uDCxx pair."""
    lone = None
    for m in _ESCAPE_OR_SURROGATE.finditer(text):
        hexits = m.group(1)
        if lone is not None:                     # a high half: is this its low half?
            if hexits and 0xDC00 <= int(hexits, 16) <= 0xDFFF and m.start() == lone.end():
                lone = None
                continue
            break
        if hexits:
            code = int(hexits, 16)
        elif not m.group().startswith("\\"):
            code = ord(m.group())                # a raw surrogate: never half of a pair
        else:
            continue                             # another escape
        if 0xD800 <= code <= 0xDBFF and hexits:
            lone = m                             # unless its low half follows
        elif 0xD800 <= code <= 0xDFFF:
            lone = m
            break
    code = 0xD800 if lone is None else (
        int(lone.group(1), 16) if lone.group(1) else ord(lone.group()))
    raise LiteralError(f"lone surrogate \\u{code:04x} in a string: half of a UTF-16 pair is "
                       "not Unicode text", lone.start() if lone is not None else 0)
