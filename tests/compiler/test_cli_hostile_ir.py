"""Hostile IR files through ``flowc``: each is a user error printed as ``flowc: error:
FILE:LINE:COL: ...`` (exit status 1), never a Python traceback (``cli_runner`` checks that).

The inputs are the ones a fuzzer or a careless generator writes: integer literals beyond int64
(and beyond Python's 4,300-digit int-from-string limit), finite-looking floats that overflow a
double, strings with escapes JSON does not have, lone surrogates or raw control characters,
attr lists nested thousands deep, a ``_Retval`` read as an input, and files that are not UTF-8.
"""
import pytest

from cli_runner import flowc

HEAD = "graph @g {\n  %x = Placeholder() {dtype=f32, shape=[3]} : f32[3]\n"
HUGE = "9" * 5000                       # over Python's 4,300-digit int() limit


def _line(node: str) -> str:
    return HEAD + node + "\n}\n"


# name -> (IR text, line of the error, what its column points at (the first occurrence of this
# text on that line, or (text, offset)), words the message must hold)
CASES = {
    "int_over_4300_digits": (
        _line("  %y = Placeholder() {dtype=f32, shape=[" + HUGE + "]} : f32[3]"),
        3, "999", "integer 9999999999... (5000 digits) is out of range: integers are int64"),
    "int_just_over_int64": (
        _line("  %y = Placeholder() {dtype=f32, shape=[9223372036854775808]} : f32[3]"),
        3, "922", "integer 9223372036854775808 is out of range"),
    "negative_int_under_int64": (
        _line("  %c = Const() {dtype=i64, value=tensor<i64[1]>[-9223372036854775809]} : i64[1]"),
        3, "-922", "integer -9223372036854775809 is out of range"),
    "misplaced_5000_digit_literal": (
        _line("  %y = Neg(%x) " + HUGE + " : f32[3]"),
        3, "999", "unexpected '9999999999... (5000 digits)'"),
    "float_overflows_a_double": (
        _line("  %y = Placeholder() {dtype=f32, shape=[3], _s=" + HUGE + ".5} : f32[3]"),
        3, "999", "is out of range for a 64-bit float; write inf for infinity"),
    "f32_element_out_of_range": (
        _line("  %c = Const() {dtype=f32, value=tensor<f32[2]>[1.0, 1e39]} : f32[2]"),
        3, "1e39", "element 1 (1e+39) is out of range for f32"),
    "i8_element_out_of_range": (
        _line("  %c = Const() {dtype=i8, value=tensor<i8[2]>[300, 1]} : i8[2]"),
        3, "300", "element 0 (300) is out of range for i8"),
    "dim_over_4300_digits": (
        HEAD + "  %y = Neg(%x) {T=f32} : f32[3, " + HUGE + "]\n}\n",
        3, "999", "dimension 9999999999... (5000 digits) is out of range"),
    "output_index_over_4300_digits": (
        _line("  %y = Neg(%x:" + HUGE + ") {T=f32} : f32[3]"),
        3, "%x:", "%x has 1 output(s)"),
    "location_line_over_4300_digits": (
        _line("  %y = Neg(%x) {T=f32} : f32[3]  # m.flow:" + HUGE + ":1"),
        3, "# m.flow", "bad location"),
    "string_with_x_escape": (
        _line('  %y = Neg(%x) {T=f32, _s="\\x00"} : f32[3]'),
        3, "\\x00", "unknown escape '\\x'"),
    "string_with_raw_tab": (
        _line('  %y = Neg(%x) {T=f32, _s="a\tb"} : f32[3]'),
        3, "\t", "raw control character '\\t'"),
    "string_with_short_u_escape": (
        _line('  %y = Neg(%x) {T=f32, _s="ab\\u12"} : f32[3]'),
        3, "\\u12", "\\u takes four hex digits"),
    "string_with_lone_surrogate": (
        _line('  %y = Neg(%x) {T=f32, _s="ok\\ud83d\\ude00 \\\\ud800 \\ud800"} : f32[3]'),
        3, "\\ud800\"", "lone surrogate \\ud800"),
    "device_with_bad_escape": (
        _line('  %y = Neg(%x) {T=f32} : f32[3] @"/cpu:0\\q"'),
        3, "\\q", "unknown escape '\\q'"),
    "assigned_device_with_bad_escape": (
        _line('  %y = Neg(%x) {T=f32} : f32[3] on "/cpu:0\\q"'),
        3, "\\q", "unknown escape '\\q'"),
    "attr_lists_nested_5000_deep": (
        _line("  %y = Neg(%x) {T=f32, _s=" + "[" * 5000 + "]" * 5000 + "} : f32[3]"),
        3, ("[", 64), "lists nest more than 64 deep"),
    "int_attr_given_a_float_beyond_int64": (
        HEAD + "  %r = _Retval(%x) {T=f32, index=1e39}\n}\n",
        3, "1e39", "attr index of _Retval is out of range: 1e+39 is not an int64"),
    "int_attr_given_inf": (
        HEAD + "  %y = Unpack(%x) {num=inf, T=f32}\n}\n",
        3, "inf", "attr num of Unpack must be a int, got inf"),
    "number_attr_of_int64_max": (
        HEAD + "  %y = Merge(%x, %x) {N=9223372036854775807}\n}\n",
        3, "%y", "%y: has 2 data inputs but Merge takes 9223372036854775807"),
    "unterminated_string": (
        _line('  %y = Neg(%x) {T=f32, _s="abc} : f32[3]'),
        3, '"abc', "unterminated string: a string ends with '\"' on the same line"),
    "retval_read_as_an_input": (
        HEAD + "  %r = _Retval(%x) {T=f32, index=0}\n  %y = Neg(%r) {T=f32} : f32[3]\n}\n",
        4, "%r)", "%y: operand '%r' does not exist: %r is a _Retval"),
    "retval_read_by_an_untyped_node": (
        HEAD + "  %r = _Retval(%x) {T=f32, index=0}\n  %y = Neg(%r) {T=f32}\n}\n",
        4, "%r)", "%r is a _Retval"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_ir_is_a_located_error(name, tmp_path, capsys):
    text, line, anchor, words = CASES[name]
    anchor, offset = anchor if isinstance(anchor, tuple) else (anchor, 0)
    col = text.split("\n")[line - 1].index(anchor) + offset + 1
    path = tmp_path / f"{name}.ir"
    path.write_text(text, encoding="utf-8")
    rc, out, err = flowc(capsys, "check", path)
    assert rc == 1 and out == ""
    assert err.startswith(f"flowc: error: {path}:{line}:{col}: "), err[:300]
    assert words in err, err[:300]
    assert len(err.splitlines()[0]) < 400         # a 5,000-digit literal is not echoed whole


@pytest.mark.parametrize("command", ["check", "opt", "ir"])
def test_a_file_that_is_not_utf8_is_located_at_its_first_bad_byte(command, tmp_path, capsys):
    path = tmp_path / "binary.ir"
    before = '  %x = Placeholder() {dtype=f32, shape=[3], _s="\u00e9'     # then a stray byte
    path.write_bytes(b"graph @g {\n" + before.encode() + b'\xff"} : f32[3]\n}\n')
    rc, out, err = flowc(capsys, command, path)
    assert rc == 1 and out == ""
    assert err.startswith(f"flowc: error: {path}:2:{len(before) + 1}: not UTF-8 text: byte 0xff "
                          "(invalid start byte)"), err
    assert "\n  " + before + "\ufffd" in err                # the line, the byte shown as U+FFFD


def test_nul_bytes_are_a_syntax_error(tmp_path, capsys):
    path = tmp_path / "nul.ir"
    path.write_bytes(b"\x00\x00graph @g {\n}\n")
    rc, out, err = flowc(capsys, "opt", path)
    assert rc == 1 and err.startswith(f"flowc: error: {path}:1:1: unexpected character '\\x00'")


def test_int64_bounds_and_escapes_that_fit_still_parse(tmp_path, capsys):
    path = tmp_path / "edges.ir"
    path.write_text(HEAD + "  %c = Const() {dtype=i64, value=tensor<i64[2]>[-9223372036854775808, "
                    "9223372036854775807]} : i64[2]\n"
                    '  %y = Neg(%x) {T=f32, _s="\\u00e9\\ud83d\\ude00\\/\\t", '
                    '_f=1.7976931348623157e308} : f32[3]\n}\n')
    rc, out, err = flowc(capsys, "opt", path)
    assert rc == 0, err
    assert "9223372036854775807]" in out and '"\\u00e9\\ud83d\\ude00/\\t"' in out
    assert "_f=1.7976931348623157e+308" in out
