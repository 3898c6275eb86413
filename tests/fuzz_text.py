"""Mutations of valid source text for fuzzing the parsers (tests/compiler/ir/ and tests/dsl/).

Two kinds of edit, as hypothesis strategies:

- ``("at", where, cut, insert)``: at ``where`` (a fraction of the text's length) delete ``cut``
  characters and insert ``insert`` (random text or a hostile piece): mostly syntax errors;
- ``("token", kind, which, replacement)``: replace one token of a kind (a number, a string, an
  operand...) found by a regular expression, ``which`` picking among them, by a hostile value
  of that kind or by another token of that kind from the same text (an operand that names a
  ``_Retval``, say). The text stays well formed around it, so the literal reaches the code that
  reads its value: that is where the 4,300-digit integers and the bad escapes were.

Bytes are mutated the first way only (``byte_edits``).
"""
from __future__ import annotations

import re
from typing import Dict, List, Sequence, Tuple

from hypothesis import strategies as st

NUMBER = r"(?<![\w%.])[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?![\w.])"
STRING = r'"(?:[^"\\\n]|\\.)*"'

HUGE = "9" * 5000
HOSTILE_NUMBERS = [HUGE, "-" + HUGE, "9223372036854775808", "-9223372036854775809",
                   "9223372036854775807", "-9223372036854775808", "1e999", "-1e999",
                   "9" * 400 + ".5", "1e39", "1e-999", "0" * 5000 + "1", "300", "65536",
                   "4294967296", "00"]
HOSTILE_STRINGS = ['"\\x00"', '"\\x4"', '"\\q"', '"\\ud800"', '"\\ud83d\\ude00"', '"\\u12"',
                   '"\\N{NOPE}"', '"\\U00110000"', '"\\777"', '"a\tb"', '"a\x00b"', '"\\0"',
                   '"\\\\"', '""', '"' + "a" * 3000 + '"', '"\\u00e9"', '"/job:ps/task:0"']


def nest(value: str, depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + value + closer * depth


def at_edits(pieces: Sequence[str]):
    """Random insertions, deletions and replacements at random places."""
    return st.tuples(st.just("at"), st.floats(0, 1), st.integers(0, 12),
                     st.one_of(st.sampled_from(list(pieces)), st.text(max_size=6)))


def token_edits(kinds: Dict[str, Tuple[str, Sequence[str]]]):
    """Replacements of one token of a kind: ``kinds`` maps a name to (regular expression,
    hostile replacements)."""
    def for_kind(kind):
        hostile = list(kinds[kind][1])
        hostile_value = st.sampled_from(hostile)
        replacement = st.one_of(hostile_value, hostile_value, st.integers(0, 10 ** 6).map(
            lambda i: ("other", i)))                          # 2 in 3 hostile
        return st.tuples(st.just("token"), st.just(kind), st.integers(0, 10 ** 6), replacement)
    return st.sampled_from(sorted(kinds)).flatmap(for_kind)


def mutate(text: str, edits: List[tuple], kinds: Dict[str, Tuple[str, Sequence[str]]]) -> str:
    """``text`` with ``edits`` applied in order."""
    for edit in edits:
        if edit[0] == "at":
            _, where, cut, insert = edit
            pos = int(where * len(text))
            text = text[:pos] + insert + text[pos + cut:]
            continue
        _, kind, which, replacement = edit
        found = list(re.finditer(kinds[kind][0], text))
        if not found:
            continue
        m = found[which % len(found)]
        if isinstance(replacement, tuple):                   # another token of the kind
            replacement = found[replacement[1] % len(found)].group()
        text = text[:m.start()] + replacement + text[m.end():]
    return text


def byte_edits():
    return st.tuples(st.floats(0, 1), st.integers(0, 4), st.binary(max_size=6))


def mutate_bytes(raw: bytes, edits) -> bytes:
    for where, cut, insert in edits:
        pos = int(where * len(raw))
        raw = raw[:pos] + insert + raw[pos + cut:]
    return raw
