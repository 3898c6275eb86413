"""Fuzzing the ``*.flow`` front end: the example models, mutated (``fuzz_text``) by random
insertions, deletions and replacements, by replacing one of their numbers, strings or names with
a hostile one (integer literals of thousands of digits, floats beyond a double, bad escapes,
raw NULs, brackets and operators thousands deep, integer powers beyond int64) or with another of
the same text, or by random bytes, parse, and build, or raise ``FlowError`` with a file, line
and column: no other exception, and no hang.

Parsing is fuzzed on every example; building (the evaluator, which reads the literals) on the
small ones, with ``check_data=False`` (a missing data file is not what is fuzzed here).
Deterministic for CI: ``derandomize=True`` and no example database.
"""
import functools
import glob
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl.flow.errors import FlowError, Source
from dsl.flow.loader import build_flow, load_flow
from dsl.flow.parser import parse_text
from fuzz_text import (HOSTILE_NUMBERS, HOSTILE_STRINGS, HUGE, NUMBER, STRING, at_edits,
                       byte_edits, mutate, mutate_bytes, nest, token_edits)
from repo_paths import EXAMPLES

FLOW_FILES = sorted(glob.glob(os.path.join(EXAMPLES, "*.flow")))
BUILD_FILES = [os.path.join(EXAMPLES, name) for name in ("mlp.flow", "rnn_while.flow",
                                                         "digits_mlp.flow")]

KINDS = {
    "number": (NUMBER, HOSTILE_NUMBERS + [
        "9 ** 9 ** 9", "2 ** 64", "(-2) ** 63", "4294967296 * 4294967296",
        "-(-9223372036854775808)", "[1] * 10000000000", nest("1", 3000), nest("1", 3000, "(", ")"),
        nest("1", 3000, "-", ""), "1" + " + 1" * 3000, "[" + HUGE + "]"]),
    "string": (STRING, HOSTILE_STRINGS + ['"\0"', '"lay\0ers.flow"']),
    "name": (r"(?<![\w.\"])[A-Za-z_]\w*", ["f32", "nope", "relu", "x" * 3000, "if", "while"]),
}
PIECES = HOSTILE_NUMBERS + HOSTILE_STRINGS + [
    "\x00", "\ud800", "\ufeff", "\r", "\\\n", 'device "/cpu:0" {\n' * 300, "}\n" * 300,
    "f32[" + HUGE + "]", 'import "\\0"', 'data = "a\\0b"', "(", ")", "[", "]", "{", "}", ",",
    "=", ":", "?", '"', "#", "\n", "let ", "def f(a) { return f(a) }\n", "f(", "**", "-", "@",
    "not ", " and ", "if (", "while ("]
EDITS = st.lists(st.one_of(at_edits(PIECES), token_edits(KINDS)), min_size=1, max_size=3)
# Building stops at the first syntax error: mostly tokens replaced, one or two.
BUILD_EDITS = st.lists(st.one_of(token_edits(KINDS), token_edits(KINDS), at_edits(PIECES)),
                       min_size=1, max_size=2)
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@functools.lru_cache(maxsize=None)
def _text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _assert_located(e: FlowError) -> None:
    """A FlowError at a line and column (of the file, or of a file it imports)."""
    assert e.line >= 1 and e.col >= 1, str(e)
    assert e.file.endswith(".flow"), str(e)


def test_every_example_parses_and_the_small_ones_build():
    assert len(FLOW_FILES) >= 5
    for path in FLOW_FILES:
        parse_text(Source(_text(path) + "\n", path))
    for path in BUILD_FILES:
        build_flow(_text(path), path, check_data=False)


@settings(max_examples=250, **SETTINGS)
@given(st.sampled_from(FLOW_FILES), EDITS)
def test_mutated_examples_parse_or_raise_a_located_flow_error(path, edits):
    text = mutate(_text(path), edits, KINDS)
    try:
        parse_text(Source(text, path))
    except FlowError as e:
        _assert_located(e)


@settings(max_examples=150, **SETTINGS)
@given(st.sampled_from(BUILD_FILES), BUILD_EDITS)
def test_mutated_examples_build_or_raise_a_located_flow_error(path, edits):
    text = mutate(_text(path), edits, KINDS)
    try:
        build_flow(text, path, check_data=False)
    except FlowError as e:
        _assert_located(e)


@settings(max_examples=100, **SETTINGS)
@given(st.sampled_from(BUILD_FILES), st.lists(byte_edits(), min_size=1, max_size=3))
def test_flow_files_with_random_bytes_load_or_raise_a_located_flow_error(path, edits):
    raw = mutate_bytes(_text(path).encode("utf-8"), edits)
    with tempfile.TemporaryDirectory() as folder:
        for name in ("layers.flow",):                       # what the examples import
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(_text(os.path.join(EXAMPLES, name)))
        target = os.path.join(folder, os.path.basename(path))
        with open(target, "wb") as f:
            f.write(raw)
        try:
            load_flow(target, check_data=False)
        except FlowError as e:
            _assert_located(e)
