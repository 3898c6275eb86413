"""Parse IR text (as printed by ``printer``) back into graphs. Round trip is exact.

Syntax errors and semantic errors (unknown op, duplicate name, undefined operand, an operand
that does not exist, such as an output of a ``_Retval``, bad attr, an input or output dtype or
arity the op's signature does not allow) are ``IRSyntaxError``s showing ``file:line:col``, the
source line and a caret. So are literals that stand for no value (``literals.py``: integers
beyond int64, floats beyond a double, strings that are not JSON or not Unicode text, elements
that do not fit a constant's dtype) and attr lists nested more than ``MAX_ATTR_NESTING`` deep:
no input makes the parser raise anything else. A node written without its types gets them from
its op's shape function.
"""
from __future__ import annotations

import functools
import hashlib
import math
import os
import stat
from typing import Dict, List, Optional, Tuple

import lark

from compiler.errors import CompileError, IRSyntaxError
from compiler.ir.attr_text import ElementError, parse_device, parse_file_data, parse_tensor
from compiler.ir.literals import (LiteralError, abbreviate, parse_dim, parse_element_int,
                                  parse_float, parse_int, parse_string)
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.location import SourceLocation
from compiler.ir.types import TensorType
from compiler.ir.verifier import verify_node
from compiler.ir.op_registry import OpDef, coerce_attr, get_op, has_op
from runtime.dtypes import DType

_GRAMMAR = os.path.join(os.path.dirname(__file__), "ir.lark")

# Attr values nest lists (a list of shapes is two deep); deeper than this is an error, not a
# RecursionError of the builder.
MAX_ATTR_NESTING = 64

# What each terminal is, in words, for "expected ..." in syntax errors.
_TERMINAL_WORDS = {
    "GRAPH_NAME": "a graph name like @main", "VALUE": "a value like %x or %x:1",
    "CTRL": "a control operand like ^%x", "OPNAME": "an op name", "NAME": "a name",
    "INT": "an integer", "FLOAT": "a number", "ESCAPED_STRING": "a string",
    "TENSOR_TYPE": "a type like f32[?,3]", "B64": 'base64 data b64"..."',
    "FILE_DATA": 'a constant\'s file file"NAME" sha256"HEX"',
    "DEVICE": "a device like @/job:ps/task:0", "DEVSPEC": "a device like /job:ps/task:0",
    "LOC": "a location like # file.py:3:1", "$END": "end of input",
}


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    with open(_GRAMMAR) as f:
        return lark.Lark(f.read(), parser="lalr", propagate_positions=True, maybe_placeholders=True)


@functools.lru_cache(maxsize=1)
def _literal_terminals() -> Dict[str, str]:
    """Anonymous terminals (``LPAR``, ``__ANON_0``) to the text they match."""
    return {t.name: t.pattern.value for t in _parser().terminals
            if type(t.pattern).__name__ == "PatternStr"}


def _describe(terminal: str) -> str:
    if terminal in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[terminal]
    literal = _literal_terminals().get(terminal)
    return f"'{literal}'" if literal is not None else terminal


class _Unknown:
    """Marker for ``?`` (an unknown dim) and ``[*]`` (an unknown rank) in attr values."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


UNKNOWN_DIM = _Unknown("?")
UNKNOWN_RANK = _Unknown("[*]")


class _SemanticError(Exception):
    """Raised while building; carries the position it is about."""

    def __init__(self, message: str, where):
        super().__init__(message)
        self.line = getattr(where, "line", None) or 0
        self.column = getattr(where, "column", None) or 0


class _Position:
    """A place inside a token: ``offset`` characters after its start (which may be on a later
    line: a type token may span lines)."""

    def __init__(self, tok: lark.Token, offset: int):
        before = str(tok)[:offset]
        newlines = before.count("\n")
        self.line = (tok.line or 1) + newlines
        self.column = (len(before) - before.rfind("\n") if newlines
                       else (tok.column or 1) + offset)


def _literal(parse, tok: lark.Token, text: Optional[str] = None, offset: int = 0):
    """``parse(text)`` (the token's text by default; ``offset``: where that text starts in the
    token); a ``LiteralError`` becomes an error at the character it is about."""
    try:
        return parse(str(tok) if text is None else text)
    except LiteralError as e:
        raise _SemanticError(str(e), _Position(tok, offset + e.offset)) from None


class _Source:
    """The text being parsed, for error messages."""

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.lines = text.split("\n")
        # where ``file"..."`` constants are: beside the IR file (None: the text has no file)
        self.folder = (None if filename.startswith("<") or not os.path.isfile(filename)
                       else os.path.dirname(os.path.abspath(filename)))

    def error(self, message: str, line: int, col: int) -> IRSyntaxError:
        src = self.lines[line - 1].rstrip("\r") if 0 < line <= len(self.lines) else None
        return IRSyntaxError(message, self.filename, line, col, src)


def parse_graphs(text: str, filename: str = "<ir>") -> List[Graph]:
    """Parse every ``graph @name { ... }`` in ``text``."""
    source = _Source(text, filename)
    try:
        tree = _parser().parse(text)
    except lark.UnexpectedInput as e:
        raise _syntax_error(e, source) from None
    try:
        return [_GraphBuilder(source).build(g) for g in tree.children]
    except _SemanticError as e:
        raise source.error(str(e), e.line, e.column) from None


def parse_graph(text: str, filename: str = "<ir>") -> Graph:
    """Parse text holding exactly one graph."""
    graphs = parse_graphs(text, filename)
    if len(graphs) != 1:
        raise IRSyntaxError(f"expected exactly one graph, found {len(graphs)}", filename, 1, 1)
    return graphs[0]


def _syntax_error(e: lark.UnexpectedInput, source: _Source) -> IRSyntaxError:
    expected = sorted(set(getattr(e, "expected", None) or getattr(e, "allowed", None) or ()))
    words = sorted({_describe(t) for t in expected})
    if isinstance(e, lark.UnexpectedEOF) or (isinstance(e, lark.UnexpectedToken)
                                            and e.token.type == "$END"):
        line = len(source.lines)
        while line > 1 and not source.lines[line - 1].strip():
            line -= 1
        col = len(source.lines[line - 1].rstrip()) + 1
        msg = "unexpected end of input"
    elif isinstance(e, lark.UnexpectedToken):
        line, col = e.line, e.column
        msg = f"unexpected {abbreviate(str(e.token.value))!r}"
    else:
        line, col = e.line, e.column
        ch = source.text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(source.text) else ""
        if ch == '"':
            return source.error("unterminated string: a string ends with '\"' on the same line",
                                line, col)
        msg = f"unexpected character {ch!r}"
    if len(words) == 1:
        msg += f"; expected {words[0]}"
    elif words:
        msg += "; expected one of: " + ", ".join(words[:10]) + (", ..." if len(words) > 10 else "")
    hint = _hint(e, expected)
    if hint:
        msg += f" ({hint})"
    return source.error(msg, line, col)


def _hint(e: lark.UnexpectedInput, expected: List[str]) -> Optional[str]:
    token = getattr(e, "token", None)
    text = str(token.value) if token is not None else ""
    if "VALUE" in expected and text[:1].isalpha():
        return f"values are written with a %, as in %{text}"
    if "GRAPH_NAME" in expected and text[:1].isalpha():
        return f"graph names are written with an @, as in @{text}"
    if "B64" in expected and text == "{":
        return "this constant was elided when printed (--elide-constants); elided IR does not parse"
    return None


# --- building graphs from the tree ---------------------------------------------------------
class _GraphBuilder:
    def __init__(self, source: _Source):
        self.source = source
        self.untyped: set = set()          # nodes written without types (inferred later)
        # (user, operand token, source, index): operands of untyped nodes, checked once their
        # outputs are known
        self.deferred: List[Tuple[Node, lark.Token, Node, int]] = []

    def build(self, tree) -> Graph:
        name_tok = tree.children[0]
        try:
            g = Graph(str(name_tok)[1:])
        except CompileError as e:
            raise _SemanticError(_detail(e), name_tok) from None
        pending: List[Tuple[Node, list, lark.Tree, bool]] = []
        for node_tree in tree.children[1:]:
            node, operands, typed = self._node(g, node_tree)
            pending.append((node, operands, node_tree, typed))
            if not typed:
                self.untyped.add(node)
        for node, operands, node_tree, _ in pending:
            self._connect(g, node, operands)
        for node, _, node_tree, typed in pending:
            if not typed:
                self._infer(node, node_tree)
        for user, tok, src, index in self.deferred:
            if index >= src.num_outputs:
                raise _SemanticError(_no_such_output(user, str(tok), src), tok)
        for node, _, node_tree, _ in pending:
            try:
                verify_node(node)
            except CompileError as e:
                raise _SemanticError(f"%{node.name}: {_detail(e)}", node_tree.children[0]) from None
        g.version = 0
        return g

    def _node(self, g: Graph, tree) -> Tuple[Node, list, bool]:
        ch = tree.children
        name_tok, op_tok = ch[0], ch[1]
        operands = [c for c in ch[2:-5] if c is not None]
        attrs_tree, types_tree, device_tok, assigned_tree, loc_tok = ch[-5:]
        name = str(name_tok)[1:]
        if ":" in name:
            raise _SemanticError(f"node name '%{name}' must not have an output index", name_tok)
        if name in g._by_name:
            raise _SemanticError(f"duplicate node name '%{name}'", name_tok)
        op_name = str(op_tok)
        if not has_op(op_name):
            raise _SemanticError(f"unknown op '{op_name}'", op_tok)
        opdef = get_op(op_name)
        attrs = self._attrs(opdef, attrs_tree)
        types = self._types(types_tree)
        loc = None
        if loc_tok is not None:
            loc = SourceLocation.parse(str(loc_tok)[1:])
            if loc is None:
                raise _SemanticError(f"bad location {abbreviate(str(loc_tok)[1:].strip(), 30)!r}; "
                                     "expected # file:line:col", loc_tok)
        device = (_literal(parse_device, device_tok, str(device_tok)[1:], 1)
                  if device_tok is not None else "")
        try:
            node = g.add_node(op_name, (), attrs, name=name, exact_name=True,
                              output_types=types or (), device=device, location=loc)
        except CompileError as e:
            raise _SemanticError(_detail(e), name_tok) from None
        if assigned_tree is not None:
            node.assigned_device = _literal(parse_device, assigned_tree.children[0])
        return node, operands, types is not None

    def _attrs(self, opdef: OpDef, tree) -> dict:
        attrs = {}
        if tree is not None:
            for a in tree.children:
                if a is None:
                    continue
                key_tok = a.children[0]
                key = str(key_tok)
                if key in attrs:
                    raise _SemanticError(f"attr '{key}' is given twice", key_tok)
                adef = opdef.attrs.get(key)
                if adef is None and not key.startswith("_"):
                    raise _SemanticError(f"op {opdef.name} has no attr '{key}'; attrs are: "
                                         f"{', '.join(opdef.attrs) or 'none'}", key_tok)
                value_tree = a.children[1]
                raw = _value(value_tree, folder=self.source.folder)
                try:
                    attrs[key] = _attr_value(opdef, key, raw, adef.kind if adef else "any")
                except (CompileError, ValueError, TypeError) as e:
                    raise _SemanticError(_detail(e), _position(value_tree)) from None
        for k, a in opdef.attrs.items():
            if k not in attrs and a.has_default:
                attrs[k] = list(a.default) if isinstance(a.default, list) else a.default
        return attrs

    def _types(self, tree) -> Optional[List[TensorType]]:
        if tree is None:
            return None
        types = []
        for t in tree.children:
            if t is None:
                continue
            if t.data == "resource_type":
                types.append(TensorType(DType.resource, ()))
            else:
                types.append(_type_token(t.children[0]))
        return types

    def _connect(self, g: Graph, node: Node, operands) -> None:
        data, ctrl = [], []
        for o in operands:
            tok = o.children[0]
            ref = str(tok)
            if o.data == "control_operand":
                src = g.get(ref[2:])
                if src is None:
                    raise _SemanticError(f"undefined operand '{ref}' (no node named "
                                         f"'{ref[2:]}' in @{g.name})", tok)
                ctrl.append(src)
                continue
            name, _, idx = ref[1:].partition(":")
            src = g.get(name)
            if src is None:
                raise _SemanticError(f"undefined operand '{ref}' (no node named '{name}' in "
                                     f"@{g.name})", tok)
            if len(idx) > 9:                   # no op has a billion outputs (nor int() 5000 digits)
                raise _SemanticError(_no_such_output(node, ref, src), tok)
            index = int(idx) if idx else 0
            if src in self.untyped:
                self.deferred.append((node, tok, src, index))
            elif index >= src.num_outputs:
                raise _SemanticError(_no_such_output(node, ref, src), tok)
            data.append(Output(src, index))
        node.set_inputs(data)
        for c in ctrl:
            node.add_control_input(c)

    def _infer(self, node: Node, tree) -> None:
        """Types were not written: compute them with the op's shape function."""
        from compiler.ir.construct import infer_types
        _fill_type_attrs(node)
        for inp in node.inputs:
            if inp.node in self.untyped:
                raise _SemanticError(f"cannot infer the types of %{node.name}: write the types "
                                     f"of %{inp.node.name}", tree.meta)
        for user, tok, src, index in self.deferred:
            if user is node and index >= src.num_outputs:
                raise _SemanticError(_no_such_output(node, str(tok), src), tok)
        try:
            node.output_types = infer_types(node)
        except CompileError as e:
            raise _SemanticError(f"cannot infer the types of %{node.name} (write them after "
                                 f"':'): {_detail(e)}", tree.meta) from None
        self.untyped.discard(node)


def _no_such_output(user: Node, ref: str, src: Node) -> str:
    """Why ``ref``, an operand of ``user``, names no tensor of ``src``."""
    why = (f"%{src.name} is a _Retval, which has no outputs (it returns its input from the "
           f"step)" if src.op == "_Retval" else f"%{src.name} has {src.num_outputs} output(s)")
    return f"%{user.name}: operand '{abbreviate(ref)}' does not exist: {why}"


def _fill_type_attrs(node: Node) -> None:
    """Type attrs (``T``) left out of hand-written IR come from the inputs they type."""
    op = get_op(node.op)
    k = 0
    for arg in op.inputs:
        if arg.number_attr:
            n = node.attrs.get(arg.number_attr)
            if not isinstance(n, int):
                return
        elif arg.type_list_attr:
            n = len(node.attrs.get(arg.type_list_attr) or ())
        else:
            n = 1
        if arg.type_attr and arg.type_attr not in node.attrs and k < len(node.inputs):
            if node.inputs[k].index < node.inputs[k].node.num_outputs:
                node.attrs[arg.type_attr] = node.inputs[k].dtype
        k += n


def _position(tree):
    """Something with ``line`` and ``column``: a token, or a tree's meta."""
    return tree if isinstance(tree, lark.Token) else tree.meta


def _detail(e: Exception) -> str:
    return getattr(e, "detail", None) or str(e)


def _type_token(tok) -> TensorType:
    text = str(tok)
    name, _, rest = text.partition("[")
    body = rest[:-1].strip()
    try:
        dtype = DType.parse(name)
    except ValueError as e:
        raise _SemanticError(str(e), tok) from None
    if body == "*":
        return TensorType(dtype, None)
    dims = []
    offset = len(name) + 1                         # where each dim's text starts in the token
    for piece in rest[:-1].split(",") if body else []:
        d = piece.strip()
        at = offset + len(piece) - len(piece.lstrip())
        offset += len(piece) + 1
        if d == "?":
            dims.append(None)
        elif d.isascii() and d.isdigit():
            dims.append(_literal(parse_dim, tok, d, at))
        else:
            raise _SemanticError(f"bad dimension {abbreviate(d)!r} in type {abbreviate(text, 20)}; "
                                 "dims are integers or ?", _Position(tok, at))
    return TensorType(dtype, tuple(dims))


def _value(tree, depth: int = 0, parse_integer=parse_int, folder: Optional[str] = None):
    """An attr value tree to Python (lists, ints, floats, strs, bools, DTypes, arrays, markers);
    ``parse_integer`` reads its integers (a tensor's elements may be u64); ``folder``: where
    the files of ``file"..."`` constants are."""
    kind = tree.data
    if kind == "int_value":
        return _literal(parse_integer, tree.children[0])
    if kind == "float_value":
        return _literal(parse_float, tree.children[0])
    if kind == "string_value":
        return _literal(parse_string, tree.children[0])
    if kind == "neg_name_value":
        tok = tree.children[0]
        if str(tok) in ("inf", "nan"):
            return float("-" + str(tok))
        raise _SemanticError(f"-{tok} is not a value", tok)
    if kind == "name_value":
        tok = tree.children[0]
        s = str(tok)
        if s in ("true", "false"):
            return s == "true"
        if s in ("inf", "nan"):
            return float(s)
        if s == "none":
            return None
        try:
            return DType.parse(s)
        except ValueError:
            raise _SemanticError(f"unknown value '{s}' (expected a number, a string in quotes, "
                                 "true, false, inf, nan, none or a dtype)", tok) from None
    if kind == "list":
        if depth >= MAX_ATTR_NESTING:
            raise _SemanticError(f"attr value lists nest more than {MAX_ATTR_NESTING} deep",
                                 tree.meta)
        return [_value(c, depth + 1, parse_integer, folder) for c in tree.children]
    if kind == "empty_list":
        return []
    if kind == "unknown_rank":
        return UNKNOWN_RANK
    if kind == "unknown_dim":
        return UNKNOWN_DIM
    if kind == "tensor":
        tok, body = tree.children
        ttype = _type_token(tok)
        try:
            if isinstance(body, lark.Token) and body.type == "FILE_DATA":
                data = _constant_file(folder, *parse_file_data(str(body)), ttype)
                return parse_tensor(ttype.dtype, ttype.shape, data=data)
            if isinstance(body, lark.Token):
                return parse_tensor(ttype.dtype, ttype.shape, b64=str(body)[4:-1])
            items = _value(body, depth + 1, parse_element_int)
            return parse_tensor(ttype.dtype, ttype.shape, items=items)
        except ElementError as e:                  # at the element that does not fit
            element = body.children[e.index] if body.data == "list" else body
            raise _SemanticError(str(e), _position(element)) from None
        except ValueError as e:
            raise _SemanticError(str(e), tok) from None
    raise _SemanticError(f"unexpected {kind}", tree.meta)


def _constant_file(folder: Optional[str], name: str, digest: str, ttype: TensorType) -> bytes:
    """The bytes of a ``file"NAME" sha256"HEX"`` constant: the regular file ``name`` beside
    the IR file (not a link), of the constant's size and with that SHA-256."""
    if folder is None:
        raise ValueError(f"the constant's bytes are in the file '{name}' beside the IR file; "
                         "text that is not read from a file cannot name one")
    if name in (".", ".."):
        raise ValueError(f"'{name}' is not a file name")
    if ttype.shape is None or any(d is None for d in ttype.shape):
        raise ValueError(f"a tensor constant needs a fully known shape, got {ttype}")
    try:
        size = math.prod(ttype.shape) * ttype.dtype.itemsize
    except TypeError as e:
        raise ValueError(str(e)) from None
    path = os.path.join(folder, name)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ValueError(f"cannot open the constant's file {path}: {e.strerror or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"the constant's file {path} is not a regular file")
        with open(fd, "rb", closefd=False) as f:
            data = f.read(size + 1)
    except OSError as e:
        raise ValueError(f"cannot read the constant's file {path}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) != size:
        raise ValueError(f"the constant's file {path} holds {len(data) if len(data) <= size else 'more than ' + str(size)} "
                         f"bytes; {ttype} needs {size}")
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"the constant's file {path} does not have the SHA-256 the IR names "
                         "(it was modified or replaced)")
    return data


def _shape(value, what: str):
    if value is UNKNOWN_RANK or value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a shape like [?,3] or [*], got {value!r}")
    dims = []
    for d in value:
        if d is UNKNOWN_DIM:
            dims.append(None)
        elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            dims.append(d)
        else:
            raise ValueError(f"{what} must be a shape like [?,3] or [*]; {d!r} is not a dim")
    return tuple(dims)


def _has_marker(value) -> bool:
    if isinstance(value, _Unknown):
        return True
    return isinstance(value, list) and any(_has_marker(v) for v in value)


def _attr_value(opdef: OpDef, key: str, value, kind: str):
    if kind == "shape":
        return _shape(value, f"attr {key}")
    if kind == "list(shape)":
        if not isinstance(value, list):
            raise ValueError(f"attr {key} must be a list of shapes")
        return [_shape(v, f"attr {key}") for v in value]
    if _has_marker(value):
        raise ValueError(f"attr {key} ({kind}) cannot hold ? or [*]")
    if kind == "any":
        return value
    return coerce_attr(opdef, key, value)
