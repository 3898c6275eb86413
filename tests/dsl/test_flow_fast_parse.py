"""The fast LALR loop (dsl/flow/lalr_driver.py) against lark's own parser: for any text, the
same tree with the same token types and positions, or a rejection exactly where lark raises."""
import glob
import os

import lark
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsl.flow.lalr_driver import Rejected
from dsl.flow.parser import _parser, fast_parser
from repo_paths import ROOT

FLOW_FILES = sorted(glob.glob(os.path.join(ROOT, "examples", "**", "*.flow"), recursive=True)
                    + glob.glob(os.path.join(ROOT, "tests", "**", "*.flow"), recursive=True))


def _tokens(tree):
    return [(t.type, str(t), t.start_pos, t.line, t.column, t.end_line, t.end_column, t.end_pos)
            for t in tree.scan_values(lambda v: isinstance(v, lark.Token))]


def _both(text: str):
    """(lark's tree or None, the fast loop's tree or None) for ``text``."""
    try:
        slow = _parser().parse(text)
    except lark.UnexpectedInput:
        slow = None
    try:
        fast = fast_parser().parse(text)
    except Rejected:
        fast = None
    return slow, fast


def _assert_same(text: str) -> None:
    slow, fast = _both(text)
    assert (slow is None) == (fast is None), text
    if slow is not None:
        assert slow == fast and _tokens(slow) == _tokens(fast), text


def test_the_fast_loop_is_used_with_this_lark():
    assert fast_parser() is not None


def test_every_flow_file_parses_to_the_same_tree_or_is_rejected_by_both():
    assert len(FLOW_FILES) > 40
    accepted = 0
    for path in FLOW_FILES:
        with open(path, encoding="utf-8") as f:
            text = f.read() + "\n"
        _assert_same(text)
        accepted += _both(text)[1] is not None
    assert accepted >= 20


def test_soft_keywords_comments_continuations_and_brackets_across_lines():
    _assert_same('input x: f32[?, 2]  # features\nlet data = x\nlet loss = reduce_sum(data,\n'
                 '   axis=1)  # a comment inside\n\n\nlet train = [loss,\n  loss]\n'
                 'let y = 1 + \\\n  2\nloss = train[0] * 2.0 ** -1\n'
                 'metric m = if (true) { return loss } else { return loss }\n')


def test_blanks_before_tokens_between_lines_and_at_the_very_end():
    for text in ["let x = 1   ", "let x = 1 \t\f", "let  x\t=\f1\n  \n", "  let x = 1\n",
                 "let x = f( 1 ,\t2 )  # c\n", "let x = 1 \\\n  + 2\n", "let x =   $\n",
                 "\t", "", " \n "]:
        _assert_same(text)


SNIPPETS = ["input x: f32[?, 3]\n", "let y = ", "x", " + ", " @ ", "nn.relu(", ")", "(", "[",
            "]", ", ", "1", "2.5", "1e-5", ".5", '"s"', "true", " == ", " = ", "\n", "\n\n",
            "{", "}", "def f(a) ", "return ", "output ", "name_scope \"n\" ", "device \"/c\" ",
            "import \"l.flow\"", "var ", ":", "?", "not ", " and ", " or ", "transpose_b=", "-",
            "**", "#c\n", "reduce_sum(", "axis=", "f(", "y", "\\\n", "$", "\t", "\"", "data",
            "loss", "train", "metric ", "optimizer", "carry", "while (", "if (", "else ", "a.b",
            "[1:2]", "::", " <= ", " != ", "  "]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SNIPPETS), max_size=40))
def test_random_programs_parse_the_same_with_both(parts):
    _assert_same("".join(parts) + "\n")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abx01.e-+*/@()[]{},:=?\"#\\ \t\n", max_size=60))
def test_random_text_parses_the_same_with_both(text):
    _assert_same(text + "\n")


def test_the_fast_loop_runs_only_on_tested_lark_releases():
    from dsl.flow.lalr_driver import lark_version_tested
    assert lark_version_tested()              # the installed lark (setup.cfg pins the range)
    assert fast_parser() is not None
    assert not lark_version_tested("1.4.0") and not lark_version_tested("2.0")
    assert not lark_version_tested("1.0.9") and not lark_version_tested("garbage")
    assert lark_version_tested("1.1.9") and lark_version_tested("1.3.1")
