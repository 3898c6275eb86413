"""Hostile ``*.flow`` files through ``flowc``: each is a user error printed as ``flowc: error:
FILE:LINE:COL: ...`` (exit status 1), never a Python traceback (``cli_runner`` checks that),
nor a hang.

The inputs: integer literals beyond int64 (and beyond Python's 4,300-digit int-from-string
limit), integer arithmetic beyond int64 (``9 ** 9 ** 9`` would compute for hours), lists
repeated into billions of elements, floats beyond a double, string escapes Python refuses or
only warns about, raw NULs, NULs in paths, statements nested deeper than Python's stack, and
files that are not UTF-8.
"""
import pytest

from cli_runner import flowc

HUGE = "9" * 5000                       # over Python's 4,300-digit int() limit
BLOCK = "input x: f32[3]\nname_scope {} {{\n  let y = x + 1.0\n}}\noutput y\n"


def _scoped(literal: str) -> str:
    return BLOCK.format(literal)


# name -> (text, line of the error, what its column points at (first occurrence on that line),
# words the message must hold)
CASES = {
    "int_over_4300_digits": (
        "input x: f32[3]\noutput y = x * " + HUGE + "\n",
        2, "999", "integer 9999999999... (5000 digits) is out of range: integers are int64"),
    "int_just_over_int64": (
        "input x: i64[3]\noutput y = x * 9223372036854775808\n",
        2, "922", "integer 9223372036854775808 is out of range"),
    "dim_over_4300_digits": (
        "input x: f32[3, " + HUGE + "]\noutput y = x\n",
        1, "999", "dimension 9999999999... (5000 digits) is out of range: dims are int64"),
    "misplaced_5000_digit_literal": (
        "input x: f32[3]\nlet y = x " + HUGE + "\n",
        2, "999", "unexpected '9999999999... (5000 digits)'; expected an operator"),
    "float_overflows_a_double": (
        "input x: f32[3]\noutput y = x * 1.5e999\n",
        2, "1.5e999", "number 1.5e999 is out of range for a 64-bit float"),
    "integer_power_beyond_int64_is_not_computed": (
        "input x: f32[3]\nlet k = 9 ** 9 ** 9\noutput y = x\n",
        2, "9 **", "cannot apply '**': 9 ** 387420489 is out of range: integers are int64"),
    "integer_product_beyond_int64": (
        "input x: f32[3]\nlet k = 4294967296 * 4294967296\noutput y = x\n",
        2, "4294967296", "cannot apply '*': 4294967296 * 4294967296 is out of range"),
    "list_repeated_ten_billion_times": (
        "input x: f32[3]\nlet k = [0.0] * 10000000000\noutput y = x\n",
        2, "[0.0]", "cannot apply '*': repeating a list of 1 element(s) 10000000000 times makes "
        "more than 16777216 elements"),
    "negating_int64_min": (
        "input x: f32[3]\nlet k = -(-9223372036854775808)\noutput y = x\n",
        2, "-(", "cannot negate: -(-9223372036854775808) is out of range"),
    "unknown_escape": (_scoped('"a\\qb"'), 2, "\\q", "unknown escape '\\q' in a string"),
    "short_x_escape": (_scoped('"\\x4"'), 2, "\\x", "bad escape '\\x': \\x takes two hex digits"),
    "unknown_character_name": (
        _scoped('"\\N{NO SUCH NAME}"'), 2, "\\N", "unknown Unicode character name 'NO SUCH NAME'"),
    "character_beyond_unicode": (
        _scoped('"a\\U00110000"'), 2, "\\U", "\\U00110000 is not a Unicode character"),
    "octal_escape_beyond_a_byte": (
        _scoped('"\\777"'), 2, "\\777", "octal escape '\\777' is out of range"),
    "surrogate_pair_escapes": (
        _scoped('"\\ud83d\\ude00"'), 2, "\\ud83d",
        "\\ud83d is half of a UTF-16 surrogate pair, not a character; write the character as "
        "\\U0001f600"),
    "raw_nul_in_a_string": (
        _scoped('"a\x00b"'), 2, "\x00", "a string cannot hold a raw NUL character; write \\0"),
    "nul_in_an_import_path": (
        'import "lay\\0ers.flow"\n', 1, '"lay', "the path of an import cannot hold a NUL"),
    "nul_in_a_data_path": (
        'data = "a\\0b.npz"\n', 1, '"a', "the path of a data file cannot hold a NUL"),
    "lists_nested_3000_deep": (
        "input x: f32[3]\nlet y = " + "[" * 3000 + "1" + "]" * 3000 + "\noutput z = x\n",
        2, "1", "nested too deeply: evaluating this statement ran out of Python's stack"),
    "a_sum_of_5000_terms": (
        "input x: f32[3]\nlet y = x" + " + 1.0" * 5000 + "\noutput y\n",
        2, "x", "nested too deeply"),
    "unary_minus_5000_times": (
        "input x: f32[3]\noutput y = " + "-" * 5000 + "x\n",
        2, "x", "nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_flow_is_a_located_error(name, tmp_path, capsys):
    text, line, anchor, words = CASES[name]
    col = text.split("\n")[line - 1].index(anchor) + 1
    path = tmp_path / f"{name}.flow"
    path.write_text(text, encoding="utf-8")
    rc, out, err = flowc(capsys, "check", path)
    assert rc == 1 and out == ""
    assert err.startswith(f"flowc: error: {path}:{line}:{col}: {words}"), err[:400]
    assert len(err.splitlines()[0]) < 400         # a 5,000-digit literal is not echoed whole


def test_blocks_nested_beyond_the_stack_are_a_located_error(tmp_path, capsys):
    depth = 1500
    path = tmp_path / "blocks.flow"
    path.write_text("input x: f32[3]\n" + 'device "/cpu:0" {\n' * depth + "let y = x\n"
                    + "}\n" * depth + "output z = x\n")
    rc, out, err = flowc(capsys, "check", path)
    assert rc == 1 and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"flowc: error: {path}:") and "nested too deeply" in first, first
    line = int(first.split(f"{path}:")[1].split(":")[0])
    assert 2 <= line <= depth + 2                 # inside the nest, where the stack ran out


def test_a_file_that_is_not_utf8_is_located_at_its_first_bad_byte(tmp_path, capsys):
    path = tmp_path / "latin1.flow"
    path.write_bytes("input x: f32[3]\nlet y = x  # café\n".encode("latin-1"))
    rc, out, err = flowc(capsys, "check", path)
    assert rc == 1 and out == ""
    col = len("let y = x  # caf") + 1
    assert err.startswith(f"flowc: error: {path}:2:{col}: not UTF-8 text: byte 0xe9"), err
    assert "\n  let y = x  # caf\ufffd\n" in err


def test_an_imported_file_that_is_not_utf8_is_located_in_that_file(tmp_path, capsys):
    (tmp_path / "lib.flow").write_bytes(b"let two = 2.0\n\xff\xfe\n")
    path = tmp_path / "main.flow"
    path.write_text('import "lib.flow"\ninput x: f32[3]\noutput y = x * two\n')
    rc, out, err = flowc(capsys, "check", path)
    assert rc == 1 and out == ""
    assert err.startswith(f"flowc: error: {tmp_path / 'lib.flow'}:2:1: not UTF-8 text: "
                          "byte 0xff"), err


def test_a_binary_file_is_an_error_not_a_traceback(tmp_path, capsys):
    path = tmp_path / "random.flow"
    path.write_bytes(bytes(range(256)) * 4)
    rc, out, err = flowc(capsys, "check", path)
    assert rc == 1 and out == ""
    assert err.startswith(f"flowc: error: {path}:2:118: not UTF-8 text: byte 0x80"), err[:200]


def test_the_edges_of_int64_and_valid_escapes_still_build(tmp_path, capsys):
    path = tmp_path / "edges.flow"
    path.write_text(
        "input x: i64[3]\n"
        "input f: f64[3]\n"
        "let low = -9223372036854775808\n"
        "let high = 9223372036854775807\n"
        "let powers = 2 ** 62 + (-2) ** 63 + 2 ** 62\n"         # -2**63 + 2**63 = 0
        'name_scope "\\x41\\102\\N{LATIN SMALL LETTER C}\\u0064" {\n'
        "  output y = x * low + high * 0 + powers\n"
        "}\n"
        "output w = f * 1.7976931348623157e308\n")
    rc, out, err = flowc(capsys, "ir", path)
    assert rc == 0, err
    assert "%ABcd/Mul " in out and "tensor<i64[]>[-9223372036854775808]" in out
    assert "tensor<f64[]>[1.7976931348623157e+308]" in out
