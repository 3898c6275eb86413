"""A fast LALR(1) loop for ``*.flow`` text, over lark's own parse table, contextual lexers and
tree-building callbacks.

lark's general parser spends most of a parse on bookkeeping per token and per reduction
(hashing grammar rules, counting lines, building tokens through keyword arguments). This loop
does the same work with the same tables, so it accepts the same language and builds the same
tree, several times faster. It only handles text that parses: at the first thing it cannot
accept it raises ``Rejected``, and the caller parses again with lark, whose exception says what
was wrong (see ``parse_text`` in ``dsl/flow/parser.py``).
"""
from __future__ import annotations

import functools
import operator
import re
from typing import Callable, Dict, List, Optional, Tuple

import lark
from lark.lexer import PatternStr, Token, UnlessCallback
from lark.parse_tree_builder import (ChildFilterLALR, ChildFilterLALR_NoPlaceholders,
                                     ExpandSingleChild)


class Rejected(Exception):
    """The text does not parse: lark's parser says why."""


class Unsupported(Exception):
    """The grammar uses a lark feature this loop does not reproduce."""


# One parser state's lexer: the regular expression of the terminals it accepts (after the
# blanks before them: its group 1), keyword types by terminal (a NAME that spells an accepted
# keyword is that keyword), the terminals it skips, those that may contain a newline, and
# lark's own expression of the terminals (for what the first one misses: blanks at the end).
_StateLexer = Tuple[Callable, Dict[str, Dict[str, str]], frozenset, frozenset, Callable]

_TOKEN_FIELDS = ('type', 'start_pos', 'value', 'line', 'column', 'end_line', 'end_column',
                 'end_pos')
_new_str = str.__new__


class TableDrivenParser:
    """Parses text with ``parser``'s tables (a ``lark.Lark`` built with ``parser='lalr'`` and
    the contextual lexer). The post-lexer ``parser`` was built with is given here as what it
    does: ``newline`` tokens are dropped inside brackets (``brackets``: opener type to closer
    type) and right after another ``newline``. ``blank`` is the grammar's ignored run of
    blanks (``%ignore /[\t \f]+/``): the lexer skips it in the same match as the token after
    it (blanks never start a token, so no token changes)."""

    def __init__(self, parser: lark.Lark, newline: str, brackets: Dict[str, str],
                 blank: str = r"[\t \f]"):
        frontend = parser.parser
        if not set(_TOKEN_FIELDS) <= set(getattr(Token, "__slots__", ())):
            raise Unsupported("tokens with other fields")
        if parser.options.parser != "lalr" or parser.options.lexer != "contextual":
            raise Unsupported("only LALR with the contextual lexer")
        table = frontend.parser._parse_table
        callbacks = frontend.parser.parser.callbacks
        if any(isinstance(key, str) for key in callbacks):
            raise Unsupported("token callbacks")
        starts = list(table.start_states)
        if len(starts) != 1:
            raise Unsupported("several start symbols")
        self._start_state = table.start_states[starts[0]]
        self._end_state = table.end_states[starts[0]]
        # Actions as integers: a shift (or goto) is the next state, a reduction is ~rule.
        rule_index: Dict[object, int] = {}
        self._rules: List[Tuple[int, str, Callable]] = []
        self._actions: Dict[int, Dict[str, int]] = {}
        for state, actions in table.states.items():
            row: Dict[str, int] = {}
            for symbol, (action, arg) in actions.items():
                symbol = str(symbol)          # lark's names may be tokens: slow to compare
                if action.name == "Shift":
                    row[symbol] = arg
                    continue
                index = rule_index.get(id(arg))
                if index is None:
                    index = rule_index[id(arg)] = len(self._rules)
                    callback = callbacks[arg]
                    if len(arg.expansion) == 1 and type(callback) is ExpandSingleChild:
                        callback = None             # the rule's value is its one child
                    else:
                        callback = _direct_callback(callback)
                    self._rules.append((len(arg.expansion), str(arg.origin.name), callback))
                row[symbol] = ~index
            self._actions[state] = row
        # A reduction by a one-symbol rule whose value is its child (``?sum: product``) only
        # changes the state; an atom climbs ten of them (postfix, power, ..., expr). The
        # state they lead to, given the state below and the lookahead, is remembered.
        self._unit_chains: Dict[Tuple[int, int, str], int] = {}
        self._contextual = frontend.lexer.lexer
        if type(self._contextual).__name__ != "ContextualLexer":
            raise Unsupported("a lexer other than the contextual one")
        if not any(_is_run_of(t.pattern.to_regexp(), blank) for t in parser.terminals
                   if t.name in parser.ignore_tokens):
            raise Unsupported("no ignored run of blanks")
        self._blank = blank
        self._newline = newline
        self._openers = frozenset(brackets)
        self._closers = frozenset(brackets.values())
        self._lexers: Dict[int, _StateLexer] = {}
        for state in self._actions:                 # fail now, not at the first parse
            self._lexer(state)
        # Terminals no rule keeps in the tree (punctuation): they need no Token object.
        self._dropped = _dropped_terminals(callbacks)

    def _lexer(self, state: int) -> _StateLexer:
        found = self._lexers.get(state)
        if found is not None:
            return found
        basic = self._contextual.lexers[state]
        scanner = basic.scanner
        if len(scanner._mres) != 1 or basic.user_callbacks:
            raise Unsupported("a split scanner or user lexer callbacks")
        keywords: Dict[str, Dict[str, str]] = {}
        for terminal, callback in basic.callback.items():
            if not isinstance(callback, UnlessCallback):
                raise Unsupported(f"lexer callback {callback!r}")
            words = callback.scanner.terminals
            if not all(isinstance(t.pattern, PatternStr) and not t.pattern.flags for t in words):
                raise Unsupported("keywords with flags")
            keywords[terminal] = {t.pattern.value: t.name for t in words}
        terminals = scanner._mres[0]
        alternatives = [(t.name, t.pattern.to_regexp()) for t in scanner.terminals]
        if "|".join(f"(?P<{name}>{pattern})" for name, pattern in alternatives) != \
                terminals.pattern:
            raise Unsupported("a scanner expression built another way")
        # Each terminal's name is an empty group after its pattern: an alternative then starts
        # with the pattern itself, whose first character the regular expression engine checks
        # before it tries the alternative (a group in front hides it), and the last group to
        # close still names the terminal.
        tagged = "|".join(f"(?:{pattern})(?P<{name}>)" for name, pattern in alternatives)
        match = re.compile(f"({self._blank}*+)(?:{tagged})", terminals.flags).match
        found = self._lexers[state] = (match, keywords, basic.ignore_types, basic.newline_types,
                                       terminals.match)
        return found

    def parse(self, text: str) -> lark.Tree:
        """The tree lark would build for ``text``; ``Rejected`` where lark would raise.

        One loop lexes a token in the context of the current parser state (as lark's contextual
        lexer), applies the newline filter, and feeds the token to the parser."""
        states: List[int] = [self._start_state]
        values: list = []
        actions, rules, lexers = self._actions, self._rules, self._lexers
        unit_chains, dropped = self._unit_chains, self._dropped
        newline, openers, closers = self._newline, self._openers, self._closers
        pos, end, line, line_start = 0, len(text), 1, 0
        depth, after_newline = 0, False
        while pos < end:
            state = states[-1]
            match, keywords, ignore, newline_types, plain_match = lexers[state]
            m = match(text, pos)
            if m is not None:
                type_, start, pos = m.lastgroup, m.end(1), m.end()
            else:                   # blanks before no token (at the end): lark's own match
                m = plain_match(text, pos)
                if m is None:
                    raise Rejected()
                type_, start, pos = m.lastgroup, pos, m.end()
            value = text[start:pos]
            token_line, column = line, start - line_start + 1
            if type_ in newline_types:
                newlines = value.count("\n")
                if newlines:
                    line += newlines
                    line_start = start + value.rindex("\n") + 1
            if type_ in ignore:
                continue
            if type_ in keywords:
                type_ = keywords[type_].get(value, type_)
            if type_ in openers:
                depth += 1
            elif type_ in closers:
                depth = depth - 1 if depth else 0
            if type_ == newline:
                if depth or after_newline:
                    continue
                after_newline = True
            else:
                after_newline = False
            if type_ in dropped:
                token = None                    # a place in the rule no tree keeps
            else:
                # lark.Token(type_, value, start, line, column, end_line, end_column, end_pos),
                # without the constructor's call overhead (tens of thousands of tokens)
                token = _new_str(Token, value)
                token.type, token.start_pos, token.value = type_, start, value
                token.line, token.column = token_line, column
                token.end_line, token.end_column, token.end_pos = line, pos - line_start + 1, pos
            row = actions[state]
            while True:
                try:
                    code = row[type_]
                except KeyError:
                    raise Rejected() from None
                if code >= 0:
                    states.append(code)
                    values.append(token)
                    break
                size, origin, callback = rules[~code]
                if callback is None:            # X: Y, where X is Y: only the state changes
                    key = (states[-2], state, type_)
                    if key in unit_chains:
                        state = unit_chains[key]
                    else:
                        state = self._unit_chain(key)
                    states[-1] = state
                    row = actions[state]
                    continue
                if size:
                    children = values[-size:]
                    del states[-size:]
                    del values[-size:]
                else:
                    children = []
                values.append(callback(children))
                state = actions[states[-1]][origin]
                states.append(state)
                row = actions[state]
        return self._finish(states, values)

    def _unit_chain(self, key: Tuple[int, int, str]) -> int:
        """The state after the one-symbol reductions that start in state ``key[1]`` (above
        state ``key[0]``) with lookahead ``key[2]``; the first action not such a reduction
        is taken there."""
        below, state, lookahead = key
        actions, rules = self._actions, self._rules
        code = actions[state].get(lookahead)
        while code is not None and code < 0 and rules[~code][2] is None:
            state = actions[below][rules[~code][1]]
            code = actions[state].get(lookahead)
        self._unit_chains[key] = state
        return state

    def _finish(self, states: List[int], values: list) -> lark.Tree:
        """Reduce at the end of the text until the start symbol is complete."""
        actions, rules = self._actions, self._rules
        while True:
            code = actions[states[-1]].get("$END")
            if code is None or code >= 0:
                raise Rejected()
            size, origin, callback = rules[~code]
            if callback is None:
                states[-1] = actions[states[-2]][origin]
            else:
                if size:
                    children = values[-size:]
                    del states[-size:]
                    del values[-size:]
                else:
                    children = []
                values.append(callback(children))
                states.append(actions[states[-1]][origin])
            if states[-1] == self._end_state:
                return values[-1]


def _direct_callback(callback: Callable) -> Callable:
    """lark's callback for a rule that keeps some of its symbols as a tree's children, as one
    function that picks them (lark's loops over the kept positions on every reduction); other
    callbacks as they are."""
    if _builds_tree(callback):                # keeps every child: only the name changes
        return functools.partial(lark.Tree, str(callback.args[0]))
    if type(callback) is not ChildFilterLALR_NoPlaceholders:
        return callback
    builder = callback.node_builder
    if not _builds_tree(builder):
        return callback
    # the rule's name as a plain string (lark's may be a Token, slower to compare)
    data, tree = str(builder.args[0]), lark.Tree
    include = callback.to_include
    if include and include[0] == (0, True) and not any(expand for _, expand in include[1:]):
        # a left-recursive repetition (``items: items "," item``): the items so far, grown in
        # place as lark's filter does (each list is the child of one rule only)
        rest = [i for i, _ in include[1:]]
        if len(rest) == 1:
            (j,) = rest

            def grow(children):
                items = children[0].children
                items.append(children[j])
                return tree(data, items)
            return grow
        return callback
    if any(expand for _, expand in include):
        return callback
    kept = [i for i, _ in include]
    if not kept:
        return lambda children: tree(data, [])
    if len(kept) == 1:
        (i,) = kept
        return lambda children: tree(data, [children[i]])
    if len(kept) == 2:
        i, j = kept
        return lambda children: tree(data, [children[i], children[j]])
    pick = operator.itemgetter(*kept)
    return lambda children: tree(data, list(pick(children)))


def _dropped_terminals(callbacks: Dict[object, Callable]) -> frozenset:
    """The terminals that no rule's callback passes on to a tree: at every place a rule has
    one, the rule's child filter leaves it out. Callbacks of other kinds keep everything."""
    seen, kept = set(), set()
    for rule, callback in callbacks.items():
        if isinstance(callback, (ChildFilterLALR, ChildFilterLALR_NoPlaceholders)):
            positions = {entry[0] for entry in callback.to_include}
        else:
            positions = range(len(rule.expansion))
        for i, symbol in enumerate(rule.expansion):
            if symbol.is_term:
                seen.add(symbol.name)
                if i in positions:
                    kept.add(symbol.name)
    return frozenset(str(name) for name in seen - kept)


def _builds_tree(callback) -> bool:
    """Whether ``callback`` is ``Tree(name, children)`` with a fixed name."""
    return (isinstance(callback, functools.partial) and callback.func is lark.Tree
            and len(callback.args) == 1 and not callback.keywords)


def _is_run_of(pattern: str, blank: str) -> bool:
    """Whether ``pattern`` matches the runs of ``blank`` characters and nothing else (tried on
    every ASCII character, alone and repeated)."""
    chars = [chr(i) for i in range(128)]
    blanks = [c for c in chars if re.fullmatch(blank, c)]
    try:
        run = re.compile(pattern)
    except re.error:
        return False
    return bool(blanks) and run.fullmatch("".join(blanks) * 2) is not None and not any(
        run.match(c) for c in chars if c not in blanks)


# The lark releases whose internals (parse table, callbacks, contextual lexers) this loop was
# checked against by tests/dsl/test_flow_fast_parse.py; setup.cfg pins lark to the same range.
# Under any other release lark's own parser parses everything (the same trees, only slower),
# until that test passes there and the range is widened.
TESTED_LARK = ((1, 1), (1, 4))            # from 1.1 up to, not including, 1.4


def lark_version_tested(version: str = lark.__version__) -> bool:
    """Whether ``version`` of lark is one the loop was checked against."""
    try:
        parts = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return TESTED_LARK[0] <= parts < TESTED_LARK[1]


def table_driven_parser(parser: lark.Lark, newline: str,
                        brackets: Dict[str, str]) -> Optional[TableDrivenParser]:
    """The fast loop for ``parser``, or None where its grammar needs a feature it lacks or
    lark is a release the loop was not checked against (then lark's own parser runs)."""
    if not lark_version_tested():
        return None
    try:
        return TableDrivenParser(parser, newline, brackets)
    except (Unsupported, AttributeError, KeyError, TypeError):
        return None
