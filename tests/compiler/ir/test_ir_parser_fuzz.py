"""Fuzzing the IR text parser: valid IR (the lit tests' files and the IR the examples' models
print), mutated (``fuzz_text``) by random insertions, deletions and replacements, by
replacing one of its numbers, strings, names, types, locations or devices with a hostile one
(literals of thousands of digits, floats beyond a double, bad escapes, lone surrogates, lists
thousands deep) or with another of the same text (an operand naming a ``_Retval``), or by random
bytes, parses or raises ``IRSyntaxError`` with a file, line and column: no other exception,
ever. What parses prints and parses back to the same text.

Deterministic for CI: ``derandomize=True`` and no example database.
"""
import functools
import glob
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.errors import IRSyntaxError
from compiler.ir.parser import parse_graphs
from compiler.ir.printer import print_graphs
from compiler.model_loader import read_ir_file
from fuzz_text import (HOSTILE_NUMBERS, HOSTILE_STRINGS, HUGE, NUMBER, STRING, at_edits,
                       byte_edits, mutate, mutate_bytes, nest, token_edits)
from repo_paths import EXAMPLES, TESTS

LIT = sorted(glob.glob(os.path.join(TESTS, "compiler", "passes", "lit", "**", "*.ir"),
                       recursive=True))
MAX_PRINTED = 16 * 1024           # printed models above this (big inline weights) parse slowly

KINDS = {
    "number": (NUMBER, HOSTILE_NUMBERS + [nest("1", 70), nest("1", 3000), "[" + HUGE + "]",
                                          "tensor<f32[1]>[1e39]", "tensor<i8[2]>[300, 1]",
                                          "[1, 2.5]", "tensor<f32[99999999999999999999]>[]"]),
    "string": (STRING, HOSTILE_STRINGS),
    "name": (r"%[A-Za-z0-9_.][A-Za-z0-9_./\->]*(?::[0-9]+)?",
             ["%x:" + HUGE, "%nope", "%x:7", "^%x", "%" + "a" * 3000]),
    "type": (r"(?<![\w<])[a-z][a-z0-9]*\[[^\]\n]*\]",
             ["f32[" + HUGE + "]", "f32[9223372036854775808]", "f32[-1]", "bogus[3]", "f32[*]",
              "f32[?,\n3]", "f32[1 2]"]),
    "location": (r"# [^\n]*", ["# m.flow:" + HUGE + ":1", '# "\\x":1:1', "# :1:1", "# m:1"]),
    "device": (r"@/[^\s#\"]*", ['@"\\q"', '@"\\ud800"', '@"/cpu:0" on "\\x"', "@"]),
}
PIECES = HOSTILE_NUMBERS + HOSTILE_STRINGS + [
    "\x00", "\ud800", "\ufeff", "\r", "[" * 300, "]" * 300, 'b64"////"', "%r = _Retval(%x) "
    "{T=f32, index=0}\n", "Neg(%r)", "%", "^%", "@", '"', "\\", ":", "{", "}", "(", ")", "#",
    "\n", ",", "=", "?", "[*]", "-", "inf", "-nan"]
EDITS = st.lists(st.one_of(at_edits(PIECES), token_edits(KINDS)), min_size=1, max_size=4)
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@functools.lru_cache(maxsize=1)
def corpus():
    """The valid IR texts to mutate: the lit files (but those using the lit runner's test-only
    op, unknown here) and the examples' models printed."""
    from dsl.flow.loader import load_flow       # only this test's corpus needs the DSL
    texts = []
    for path in LIT:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "_LitStateful" not in text:
            texts.append(text)
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.flow"))):
        printed = print_graphs([load_flow(path, check_data=False).graph])
        if len(printed) <= MAX_PRINTED and "%" in printed:
            texts.append(printed)
    return texts


def parses_or_is_located(text: str, filename: str = "fuzz.ir"):
    """The graphs of ``text``, or None after checking its error is an ``IRSyntaxError`` at a
    line and column of ``text``; any other exception fails the test."""
    try:
        graphs = parse_graphs(text, filename)
    except IRSyntaxError as e:
        assert e.file == filename, str(e)
        assert 1 <= e.line <= text.count("\n") + 1 and e.col >= 1, str(e)
        return None
    printed = print_graphs(graphs)
    assert print_graphs(parse_graphs(printed, "printed.ir")) == printed
    return graphs


def test_the_corpus_parses_and_has_the_examples():
    texts = corpus()
    assert len(texts) >= 20 + 3
    for text in texts:
        assert parses_or_is_located(text) is not None


@settings(max_examples=150, **SETTINGS)
@given(st.data(), EDITS)
def test_mutated_ir_parses_or_raises_a_located_syntax_error(data, edits):
    text = data.draw(st.sampled_from(corpus()))
    parses_or_is_located(mutate(text, edits, KINDS))


@settings(max_examples=150, **SETTINGS)
@given(st.data(), st.lists(byte_edits(), min_size=1, max_size=4))
def test_ir_files_with_random_bytes_read_or_raise_a_located_syntax_error(data, edits):
    raw = mutate_bytes(data.draw(st.sampled_from(corpus())).encode("utf-8"), edits)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "fuzz.ir")
        with open(path, "wb") as f:
            f.write(raw)
        try:
            read_ir_file(path)
        except IRSyntaxError as e:
            assert e.file == path and e.line >= 1 and e.col >= 1, str(e)


SMALL_PIECES = list("%^@{}()[],=:#\"\\?-<>*\n ") + [
    "graph @g {\n", "}\n", "%x = ", "%y", "Placeholder()", "Neg(%x)", "{dtype=f32, shape=[3]}",
    "{T=f32}", " : f32[3]", "_Retval", "9" * 30, "1e400", '"\\x"', "tensor<f32[1]>[1.0]"]


@settings(max_examples=200, **SETTINGS)
@given(st.lists(st.sampled_from(SMALL_PIECES) | st.text(max_size=3), max_size=40))
def test_arbitrary_text_parses_or_raises_a_located_syntax_error(pieces):
    parses_or_is_located("".join(pieces))


# Every registered op, as a node with random inputs and hostile attr values, typed or left for
# its shape function to type: attr values reach coerce_attr, the shape function and the
# verifier (an int attr given inf, a count attr N of 2**63-1).
ATTR_VALUES = [
    "0", "1", "-1", "2", "-9", "1000000000000", "9223372036854775807", "-9223372036854775808",
    "inf", "-inf", "nan", "1.5", "1e300", "true", "none", "f32", "i32", "bool", "resource",
    '"x"', '""', '"NHWC"', '"VALID"', "[]", "[0]", "[-1]", "[5]", "[1, 2]", "[-1, -1]",
    "[99, -99]", "[0, 0, 0, 0]", "[1, 1, 1, 1]", "[9223372036854775807]", "[[1, 2], [3]]",
    "[*]", "[?]", "[?, 3]", "[f32, i32]", "tensor<f32[2]>[1.0, 2.0]", "tensor<i32[]>[-1]",
    "tensor<i32[2]>[5, -7]", "tensor<i64[2]>[9223372036854775807, 1]"]
INPUT_TYPES = ["f32[3]", "f32[2,3]", "f32[?,3]", "f32[*]", "f32[2,3,4,5]", "f32[0]", "i32[2]",
               "i32[]", "i64[2]", "bool[3]", "resource"]


def _placeholder(k: int, ty: str) -> str:
    if ty == "resource":
        return f"  %i{k} = VarHandleOp() {{dtype=f32, shape=[3]}} : resource"
    dtype, _, dims = ty.partition("[")
    return f"  %i{k} = Placeholder() {{dtype={dtype}, shape=[{dims}}} : {ty}"


@settings(max_examples=200, **SETTINGS)
@given(st.data())
def test_every_op_with_hostile_attrs_parses_or_raises_a_located_syntax_error(data):
    from compiler.ir.op_registry import all_ops
    ops = all_ops()
    op = data.draw(st.sampled_from(sorted(ops)))
    inputs = data.draw(st.lists(st.sampled_from(INPUT_TYPES), max_size=3))
    attrs = [f"{name}={data.draw(st.sampled_from(ATTR_VALUES))}" for name in ops[op].attrs
             if data.draw(st.booleans())]
    types = data.draw(st.sampled_from(["", " : f32[3]", " : (f32[3], i32[])", " : resource"]))
    lines = [_placeholder(k, ty) for k, ty in enumerate(inputs)]
    operands = ", ".join(f"%i{k}" for k in range(len(inputs)))
    lines.append(f"  %y = {op}({operands})" + (" {" + ", ".join(attrs) + "}" if attrs else "")
                 + types)
    parses_or_is_located("graph @g {\n" + "\n".join(lines) + "\n}\n")
