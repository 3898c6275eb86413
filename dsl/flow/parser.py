"""Parsing ``*.flow`` text into a lark tree; syntax errors become ``FlowError``s that show
``file:line:col``, the line, a caret and what was expected, in words."""
from __future__ import annotations

import functools
import os
from typing import Dict, Iterable, Iterator, List, Optional, Set

import lark

from compiler.ir.literals import abbreviate
from dsl.flow.errors import FlowError, Source
from compiler.gc_pause import gc_paused
from dsl.flow.lalr_driver import Rejected, TableDrivenParser, table_driven_parser

_GRAMMAR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "grammar.lark")

_WORDS = {
    "NAME": "a name", "STRING": "a string", "INT": "an integer", "FLOAT": "a number",
    "_NL": "a new line", "$END": "the end of the file",
}
_OPENERS = {"LPAR": "RPAR", "LSQB": "RSQB"}
_CLOSERS = {"LPAR": "RPAR", "LSQB": "RSQB", "LBRACE": "RBRACE"}
_STATEMENT_KEYWORDS = ("let", "input", "output", "var", "def", "return", "import", "device",
                       "name_scope", "colocate_with", "while")
_EXPRESSION_STARTS = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "LSQB", "TRUE", "FALSE"}
_UNARY = {"NOT", "MINUS", "PLUS"}
_OPERATORS = {"+", "-", "*", "/", "@", "**", "==", "!=", "<", "<=", ">", ">=", "and", "or", "[",
              ".", "("}


class _NewlineFilter:
    """Post-lexer: drops newlines inside ( ) and [ ] and collapses runs of newlines."""

    always_accept = ("_NL",)

    def process(self, stream: Iterable[lark.Token]) -> Iterator[lark.Token]:
        depth, after_newline = 0, False
        for tok in stream:
            if tok.type in _OPENERS:
                depth += 1
            elif tok.type in _OPENERS.values():
                depth = max(0, depth - 1)
            if tok.type == "_NL":
                if depth or after_newline:
                    continue
                after_newline = True
            else:
                after_newline = False
            yield tok


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    with open(_GRAMMAR, encoding="utf-8") as f:
        return lark.Lark(f.read(), parser="lalr", propagate_positions=False,
                         maybe_placeholders=True, postlex=_NewlineFilter())


@functools.lru_cache(maxsize=1)
def fast_parser() -> Optional[TableDrivenParser]:
    """The fast loop over the grammar's tables (None if this lark version's internals differ:
    then lark parses everything, only slower). Its newline handling is ``_NewlineFilter``'s."""
    return table_driven_parser(_parser(), "_NL", _OPENERS)


@functools.lru_cache(maxsize=1)
def _literals() -> Dict[str, str]:
    """Terminal names of literal strings (``LPAR``, ``LET``) to their text."""
    return {t.name: t.pattern.value for t in _parser().terminals
            if type(t.pattern).__name__ == "PatternStr"}


def parse_text(source: Source) -> lark.Tree:
    """The syntax tree of ``source`` (a ``FlowError`` when it does not parse). The fast loop
    parses; where it rejects the text, lark parses it again to say what is wrong."""
    text = source.text + "\n"
    fast = fast_parser()
    if fast is not None:
        try:
            with gc_paused():
                return fast.parse(text)
        except Rejected:
            pass
    try:
        return _parser().parse(text)
    except lark.UnexpectedInput as e:
        raise syntax_error(e, source) from None


def _describe(terminal: str) -> str:
    if terminal in _WORDS:
        return _WORDS[terminal]
    literal = _literals().get(terminal)
    return f"'{literal}'" if literal is not None else terminal


def _expected_words(expected: Set[str]) -> str:
    """``')' or ','``; a set with many operators says "an operator" once."""
    literals = {_literals().get(t) for t in expected}
    starts_expression = {"NAME", "INT"} <= expected
    words = sorted(_describe(t) for t in expected
                   if _literals().get(t) not in _OPERATORS and t not in ("_NL", "$END")
                   and not (starts_expression and t in _EXPRESSION_STARTS | _UNARY))
    if starts_expression:
        words.append("an expression")
    elif literals & _OPERATORS:
        words.append("an operator")
    if "_NL" in expected:
        words.append("a new line")
    elif "$END" in expected:
        words.append("the end of the file")
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def syntax_error(e: lark.UnexpectedInput, source: Source) -> FlowError:
    """A ``FlowError`` for lark's error, with a plain message for common mistakes."""
    expected = _accepted(e)
    if isinstance(e, lark.UnexpectedCharacters):
        ch = source.text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(source.text) else ""
        if ch == '"':
            return source.error("unterminated string: a string ends with '\"' on the same line",
                                e.line, e.column)
        return source.error(f"unexpected character {ch!r}", e.line, e.column)
    token = getattr(e, "token", None)
    ttype = getattr(token, "type", "$END")
    if ttype == "$END" or isinstance(e, lark.UnexpectedEOF):
        opener = _unclosed(source)
        if opener is not None:
            kind, line, col = opener
            closer = _literals()[_CLOSERS[kind]]
            what = "block: this '{' has no matching '}'" if kind == "LBRACE" else \
                f"'{_literals()[kind]}': expected '{closer}' before the end of the file"
            return source.error(f"unclosed {what}", line, col)
        line, col = source.end_position()
        return source.error(f"unexpected end of file; expected {_expected_words(expected)}",
                            line, col)
    line, col = token.line, token.column
    if ttype == "_NL":
        line, col = _line_end(source, token)
        what = "end of line"
    else:
        what = repr(abbreviate(str(token.value)))       # not a 5,000-digit literal whole
    hint = _hint(ttype, abbreviate(str(token.value)), expected)
    if hint:
        return source.error(hint, line, col)
    return source.error(f"unexpected {what}; expected {_expected_words(expected)}", line, col)


def _accepted(e: lark.UnexpectedInput) -> Set[str]:
    """The terminals the parser really accepts at the error (LALR's merged states list more)."""
    interactive = getattr(e, "interactive_parser", None)
    if interactive is not None:
        try:
            return set(interactive.accepts())
        except lark.LarkError:
            pass
    return set(getattr(e, "expected", None) or getattr(e, "allowed", None) or ())


def _line_end(source: Source, token: lark.Token) -> tuple:
    line = token.line
    text = source.lines[line - 1] if 0 < line <= len(source.lines) else ""
    code = text.split("#", 1)[0].rstrip() if '"' not in text else text.rstrip()
    return line, len(code) + 1


def starts_expression(expected: Set[str]) -> bool:
    """Whether the parser waits for an expression to start."""
    return {"NAME", "INT"} <= expected


def _hint(ttype: str, text: str, expected: Set[str]) -> Optional[str]:
    """Plain words for the usual mistakes, or None."""
    literals = {_literals().get(t) for t in expected}
    if text == "=" and "==" in literals:
        return "'=' is not a comparison; use '==' to compare values"
    if ttype in _EXPRESSION_STARTS and "," in literals and (")" in literals or "]" in literals):
        closer = ")" if ")" in literals else "]"
        return f"missing ',': expected ',' or '{closer}' before {text!r}"
    if ttype == "_NL" and starts_expression(expected):
        return ("unexpected end of line: an expression continues on the next line only inside "
                "( ) or [ ]")
    if ttype == "NAME" and "let" in literals:
        return (f"unexpected {text!r}: a statement starts with a keyword "
                f"({', '.join(_STATEMENT_KEYWORDS)}); to bind a name write 'let {text} = ...'")
    if ttype == "RBRACE" and "{" not in literals and not expected & {"RBRACE"}:
        return "unexpected '}': there is no open block to close"
    return None


def _unclosed(source: Source) -> Optional[tuple]:
    """(opener terminal, line, col) of the innermost bracket left open at the end, if any."""
    stack: List[tuple] = []
    try:
        for tok in _parser().lex(source.text + "\n"):
            if tok.type in _CLOSERS:
                stack.append((tok.type, tok.line, tok.column))
            elif tok.type in _CLOSERS.values() and stack:
                stack.pop()
    except lark.LarkError:
        return None
    return stack[-1] if stack else None
