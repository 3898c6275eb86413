"""String literals of the text DSL: Python's escapes, each checked, with the offset of what is
wrong so the error's caret points at it.

A ``*.flow`` string is written as a Python string in double quotes (docs/dsl.md): ``\\n``,
``\\t``, ``\\\\``, ``\\"``, ``\\'``, ``\\a \\b \\f \\r \\v``, octal ``\\0``-``\\377``, ``\\xhh``,
``\\uhhhh``, ``\\Uhhhhhhhh`` and ``\\N{NAME}`` mean what they mean in Python. Where Python is
lenient or fails late, the DSL refuses at the literal:

- an unknown escape (``\\q``, ``\\d``): Python keeps the backslash with a warning (an error in
  its future); a path or a device spec with a stray backslash is a mistake; so is an octal
  escape beyond ``\\377`` (also a warning in Python);
- a surrogate (``\\ud800``): half of a UTF-16 pair is not a character (Python keeps it, and
  encoding the string later fails far from the literal); the hint names the ``\\U`` escape
  of the pair's character;
- a raw NUL character or carriage return, which Python refuses in a string literal (``\\0``
  and ``\\r`` write them).

Each problem is a ``StringError`` (a ``ValueError``) with ``offset``, the position in the
literal (quotes included) of the character it is about.
"""
from __future__ import annotations

import functools
import re
import unicodedata

_SIMPLE = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n",
           "r": "\r", "t": "\t", "v": "\v", "\n": ""}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}
_HEX = re.compile(r"[0-9a-fA-F]+")
_OCTAL = re.compile(r"[0-7]{1,3}")
_NAME = re.compile(r"\{([^{}\n]*)\}")
# What a stretch without escapes may not hold: a NUL, a carriage return (Python ends the line
# there: its string would be unterminated), a surrogate (only a Python caller's text can: a file
# decoded from UTF-8 has none).
_FORBIDDEN = re.compile("[\x00\r\ud800-\udfff]")


class StringError(ValueError):
    """A string literal that stands for no string; ``offset``: where in the literal."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@functools.lru_cache(maxsize=4096)
def decode_string(literal: str) -> str:
    """The value of a string literal written ``"..."`` (quotes included). Cached: models
    repeat their strings."""
    body = literal[1:-1]
    if "\\" not in body and _FORBIDDEN.search(body) is None:
        return body
    out = []
    i = 0
    while i < len(body):
        j = body.find("\\", i)
        end = len(body) if j < 0 else j
        _check_raw(body, i, end)
        out.append(body[i:end])
        if j < 0:
            break
        value, i = _escape(body, j)
        out.append(value)
    return "".join(out)


_RAW_NAMES = {"\x00": ("NUL character", "\\0"), "\r": ("carriage return", "\\r")}


def _check_raw(body: str, start: int, end: int) -> None:
    m = _FORBIDDEN.search(body, start, end)
    if m is None:
        return
    if m.group() in _RAW_NAMES:
        name, escape = _RAW_NAMES[m.group()]
        raise StringError(f"a string cannot hold a raw {name}; write {escape}", 1 + m.start())
    raise StringError(f"a string cannot hold a lone surrogate (\\u{ord(m.group()):04x}): it "
                      "is half of a UTF-16 pair, not a character", 1 + m.start())


def _escape(body: str, j: int):
    """The value of the escape at ``body[j]`` (a backslash) and the index after it."""
    at = 1 + j                                   # in the literal, after its opening quote
    c = body[j + 1] if j + 1 < len(body) else ""
    if c in _SIMPLE and c:
        return _SIMPLE[c], j + 2
    if c in "01234567" and c:
        digits = _OCTAL.match(body, j + 1).group()
        if int(digits, 8) > 0o377:
            raise StringError(f"octal escape '\\{digits}' is out of range (\\0 to \\377)", at)
        return chr(int(digits, 8)), j + 1 + len(digits)
    if c in _HEX_DIGITS and c:
        size = _HEX_DIGITS[c]
        m = _HEX.match(body, j + 2, j + 2 + size)
        if m is None or len(m.group()) != size:
            raise StringError(f"bad escape '\\{c}': \\{c} takes {_WORDS[size]} hex digits "
                              f"(as {_EXAMPLES[c]})", at)
        code = int(m.group(), 16)
        if code > 0x10FFFF:
            raise StringError(f"\\{c}{m.group()} is not a Unicode character (they end at "
                              "U+10FFFF)", at)
        if 0xD800 <= code <= 0xDFFF:
            raise StringError(_surrogate_message(body, j, c, m.group(), code), at)
        return chr(code), j + 2 + size
    if c == "N":
        m = _NAME.match(body, j + 2)
        if m is None:
            raise StringError("bad escape '\\N': \\N takes a character name in braces, as "
                              "\\N{BULLET}", at)
        try:
            value = unicodedata.lookup(m.group(1))
        except KeyError:
            value = ""
        if len(value) != 1:
            raise StringError(f"unknown Unicode character name '{m.group(1)}' in \\N{{...}}",
                              at)
        return value, m.end()
    _check_raw(body, j + 1, j + 2)
    shown = c if c.isprintable() else repr(c)[1:-1]
    raise StringError(f"unknown escape '\\{shown}' in a string; write '\\\\' for a backslash",
                      at)


_WORDS = {2: "two", 4: "four", 8: "eight"}
_EXAMPLES = {"x": "\\x41", "u": "\\u00e9", "U": "\\U0001f600"}


def _surrogate_message(body: str, j: int, c: str, digits: str, code: int) -> str:
    text = f"\\{c}{digits} is half of a UTF-16 surrogate pair, not a character"
    low = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))").match(
        body, j + 2 + len(digits))
    if 0xD800 <= code <= 0xDBFF and low is not None:
        code2 = int(low.group(1) or low.group(2), 16)
        if 0xDC00 <= code2 <= 0xDFFF:
            whole = 0x10000 + ((code - 0xD800) << 10) + (code2 - 0xDC00)
            return text + f"; write the character as \\U{whole:08x}"
    return text
