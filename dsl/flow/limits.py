"""What the text DSL refuses as too large, with the reason in words (the evaluator adds where):

- An integer literal or a result of arithmetic on two plain integers must fit int64, as an
  integer of a TensorFlow graph does (``compiler.ir.literals``: the IR text's rule too). A
  literal of thousands of digits is refused before Python's 4,300-digit ``int(str)`` limit would
  raise, and ``a ** b`` on integers before it is computed (``9 ** 9 ** 9`` would take hours).
  ``-9223372036854775808`` is int64's least value: its digits are accepted after a minus.
- A float literal must be a finite double (``1e999`` is not; ``inf`` is not a literal).
- A list or a string repeated by ``*`` makes at most ``MAX_REPEAT`` (16M) elements.
- A statement nested so deeply that evaluating it exhausts Python's stack is an error at its
  deepest part (``deepest``), not a ``RecursionError``.
"""
from __future__ import annotations

from typing import Any, Tuple

import lark

from compiler.ir.literals import (INT64_MAX, INT64_MIN, LiteralError, parse_dim, parse_float,
                                  parse_int)

__all__ = ["INT64_MIN", "INT64_MAX", "LiteralError", "int_literal", "dim_literal",
           "float_literal", "checked", "checked_pow", "checked_mul", "MAX_REPEAT", "deepest"]

_INT64_MIN_DIGITS = str(-INT64_MIN)                 # "9223372036854775808"


def int_literal(text: str, negated: bool = False) -> int:
    """The value of an integer literal (``[0-9]+``); with ``negated``, of ``-literal``."""
    if len(text) < 19:                              # the common case: fits, no checks needed
        return -int(text) if negated else int(text)
    if negated and text.lstrip("0") == _INT64_MIN_DIGITS:
        return INT64_MIN
    value = parse_int(text)
    return -value if negated else value


def dim_literal(text: str) -> int:
    """The value of a dim of a type (``[0-9]+``): at most 2**63-1, as TensorFlow's int64 dims."""
    return int(text) if len(text) < 19 else parse_dim(text)


def float_literal(text: str) -> float:
    """The value of a float literal: a finite double."""
    return parse_float(text)


def checked(value: Any, what: str) -> Any:
    """``value``, which ``what`` computed; a plain integer must fit int64."""
    if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{what} is out of range: integers are int64 ({INT64_MIN} to "
                         f"{INT64_MAX})")
    return value


def checked_pow(a: Any, b: Any) -> Any:
    """``a ** b``; for two plain integers, an int64, refused before a huge one is computed."""
    if type(a) is int and type(b) is int and b > 0 and abs(a) > 1:
        # |a| ** b >= 2 ** (floor(log2 |a|) * b): at 2 ** 64 it is out of range, so only
        # results below 2 ** 4096 are ever computed
        if (abs(a).bit_length() - 1) * b >= 64:
            return checked(INT64_MAX + 1, f"{a} ** {b}")
        return checked(a ** b, f"{a} ** {b}")
    return a ** b


MAX_REPEAT = 1 << 24


def checked_mul(a: Any, b: Any) -> Any:
    """``a * b``; a list or a string repeated (``[0.0] * n``) makes at most ``MAX_REPEAT``
    elements: ``[1] * 10 ** 10`` is refused, not built until memory runs out."""
    for seq, times in ((a, b), (b, a)):
        if isinstance(seq, (list, str)) and type(times) is int and \
                len(seq) * max(times, 0) > MAX_REPEAT:
            raise ValueError(f"repeating a {type(seq).__name__} of {len(seq)} element(s) {times} "
                             f"times makes more than {MAX_REPEAT} elements")
    return a * b


def deepest(tree) -> Tuple[Any, int]:
    """The first of the deepest nodes of ``tree`` (a token where it has one) and its depth,
    found without recursion: where a statement too deep to evaluate is deepest."""
    best, best_depth = tree, 0
    stack = [(tree, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > best_depth:
            best, best_depth = item, depth
        if isinstance(item, lark.Tree):
            stack.extend((child, depth + 1) for child in reversed(item.children)
                         if child is not None)
    return best, best_depth
