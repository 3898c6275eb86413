"""Parse IR text (as printed by ``printer``) back into graphs. Round trip is exact."""
from __future__ import annotations

import functools
import json
import os
from typing import List

import lark

from compiler.errors import IRSyntaxError, OpError
from compiler.ir.attr_text import parse_tensor
from compiler.ir.graph import Graph, Output
from compiler.ir.location import SourceLocation
from compiler.ir.types import TensorType
from compiler.ops.registry import coerce_attr, get_op, has_op
from runtime.dtypes import DType

_GRAMMAR = os.path.join(os.path.dirname(__file__), "ir.lark")


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    with open(_GRAMMAR) as f:
        return lark.Lark(f.read(), parser="lalr", propagate_positions=True, maybe_placeholders=True)


class _Unknown:
    """Marker for ``?`` in a shape list."""


def _parse_type_token(text: str) -> TensorType:
    name, _, rest = text.partition("[")
    body = rest.rstrip("]").strip()
    if body == "*":
        return TensorType(DType.parse(name), None)
    dims = [None if d.strip() == "?" else int(d) for d in body.split(",") if d.strip()]
    return TensorType(DType.parse(name), tuple(dims))


class _Values(lark.Transformer):
    def int_value(self, t):
        return int(t[0])

    def float_value(self, t):
        return float(t[0])

    def neg_name_value(self, t):
        if str(t[0]) == "inf":
            return float("-inf")
        raise ValueError(f"-{t[0]} is not a value")

    def string_value(self, t):
        return json.loads(t[0])

    def name_value(self, t):
        s = str(t[0])
        if s in ("true", "false"):
            return s == "true"
        if s in ("inf", "nan"):
            return float(s)
        if s == "none":
            return None
        return DType.parse(s)

    def list(self, items):
        return [] if items == [None] else list(items)

    def unknown_rank(self, _):
        return "unknown_rank"

    def unknown_dim(self, _):
        return _Unknown

    def tensor(self, t):
        ttype = _parse_type_token(str(t[0]))
        body = t[1]
        if isinstance(body, lark.Token):
            return parse_tensor(ttype.dtype, ttype.shape, b64=str(body)[4:-1])
        return parse_tensor(ttype.dtype, ttype.shape, items=body)


def _to_shape_if_needed(value, kind):
    if kind == "shape":
        if value == "unknown_rank" or value is None:
            return None
        return tuple(None if d is _Unknown else d for d in value)
    if kind == "list(shape)":
        return [_to_shape_if_needed(v, "shape") for v in value]
    if value == "unknown_rank":
        return None
    if isinstance(value, list):
        return [None if v is _Unknown else v for v in value]
    return value


def parse_graphs(text: str, filename: str = "<ir>") -> List[Graph]:
    try:
        tree = _parser().parse(text)
    except lark.UnexpectedInput as e:
        lines = text.splitlines()
        line = getattr(e, "line", 0) or 0
        col = getattr(e, "column", 0) or 0
        src = lines[line - 1] if 0 < line <= len(lines) else None
        expected = getattr(e, "expected", None) or getattr(e, "allowed", None)
        msg = "unexpected input"
        if isinstance(e, lark.UnexpectedToken):
            msg = f"unexpected {e.token!r}"
        if expected:
            msg += "; expected one of: " + ", ".join(sorted(str(x) for x in expected)[:8])
        raise IRSyntaxError(msg, filename, line, col, src) from None
    values = _Values()
    return [_build_graph(g, values, text, filename) for g in tree.children]


def parse_graph(text: str, filename: str = "<ir>") -> Graph:
    graphs = parse_graphs(text, filename)
    if len(graphs) != 1:
        raise IRSyntaxError(f"expected exactly one graph, found {len(graphs)}", filename, 1, 1)
    return graphs[0]


def _err(msg, meta, text, filename):
    lines = text.splitlines()
    src = lines[meta.line - 1] if 0 < meta.line <= len(lines) else None
    return IRSyntaxError(msg, filename, meta.line, meta.column, src)


def _build_graph(tree, values: _Values, text: str, filename: str) -> Graph:
    g = Graph(str(tree.children[0])[1:])
    pending = []
    for node_tree in tree.children[1:]:
        ch = node_tree.children
        name_tok, op_tok = ch[0], ch[1]
        operands = [c for c in ch[2:-5] if c is not None]
        attrs_tree, types_tree, device_tok, assigned_tree, loc_tok = ch[-5:]
        name = str(name_tok)[1:]
        if ":" in name:
            raise _err(f"node name '{name}' must not have an output index", node_tree.meta, text, filename)
        op_name = str(op_tok)
        opdef = get_op(op_name) if has_op(op_name) else None
        if opdef is None:
            raise _err(f"unknown op '{op_name}'", node_tree.meta, text, filename)
        attrs = {}
        if attrs_tree is not None:
            for a in attrs_tree.children:
                if a is None:
                    continue
                key = str(a.children[0])
                raw = values.transform(a.children[1])
                adef = opdef.attrs.get(key)
                try:
                    val = _to_shape_if_needed(raw, adef.kind if adef else "any")
                    attrs[key] = coerce_attr(opdef, key, val) if adef or not key.startswith("_") else val
                except OpError as e:
                    raise _err(str(e), a.meta, text, filename) from None
        for k, a in opdef.attrs.items():
            if k not in attrs and a.has_default:
                attrs[k] = a.default
        types = []
        if types_tree is not None:
            for t in types_tree.children:
                if t is None:
                    continue
                if t.data == "resource_type":
                    types.append(TensorType(DType.resource, ()))
                else:
                    types.append(_parse_type_token(str(t.children[0])))
        loc = SourceLocation.parse(str(loc_tok)[1:]) if loc_tok is not None else None
        if name in g._by_name:
            raise _err(f"duplicate node name '%{name}'", node_tree.meta, text, filename)
        node = g.add_node(op_name, (), attrs, name=name, exact_name=True, output_types=types,
                          device=str(device_tok)[1:] if device_tok is not None else "", location=loc)
        if assigned_tree is not None:
            node.assigned_device = str(assigned_tree.children[0])
        pending.append((node, operands, node_tree.meta))
    for node, operands, meta in pending:
        data, ctrl = [], []
        for o in operands:
            ref = str(o.children[0])
            try:
                if o.data == "control_operand":
                    ctrl.append(g.node(ref[2:]))
                else:
                    data.append(g.output(ref[1:]))
            except Exception as e:
                raise _err(str(e).split(": ", 1)[-1] if "no node" in str(e) else str(e), meta, text, filename) from None
        node.set_inputs(data)
        for c in ctrl:
            node.add_control_input(c)
    g.version = 0
    return g
