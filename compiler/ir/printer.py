"""Deterministic, human-readable text for graphs; ``parser.parse_graph`` reads it back."""
from __future__ import annotations

import json
from typing import Collection, Iterable

from compiler.ir.attr_text import attrs_equal, format_attr, format_device
from compiler.ir.graph import Graph, Node
from compiler.ir.op_registry import has_op, get_op


def _attr_items(node: Node, elide: bool = False, hide: Collection[str] = ()):
    op = get_op(node.op) if has_op(node.op) else None
    for k in sorted(node.attrs):
        if k in hide:
            continue
        v = node.attrs[k]
        a = op.attrs.get(k) if op else None
        if a is not None and a.has_default and attrs_equal(a.default, v):
            continue
        yield k, format_attr(v, a.kind if a else "any", elide)


def node_text(node: Node, elide_constants: bool = False, hide_attrs: Collection[str] = ()) -> tuple:
    """(lhs, rhs, trailer) pieces of a node's line (large constants summarized if asked, the
    attrs named in ``hide_attrs`` left out)."""
    operands = [i.ref for i in node.inputs] + [f"^%{c.name}" for c in node.control_inputs]
    rhs = f"{node.op}({', '.join(operands)})"
    attrs = list(_attr_items(node, elide_constants, hide_attrs))
    if attrs:
        rhs += " {" + ", ".join(f"{k}={v}" for k, v in attrs) + "}"
    types = [str(t) for t in node.output_types]
    if len(types) == 1:
        rhs += " : " + types[0]
    elif types:
        rhs += " : (" + ", ".join(types) + ")"
    trailer = ""
    if node.device:
        trailer += f" @{format_device(node.device)}"
    if node.assigned_device:
        dev = node.assigned_device
        bare = dev.startswith("/") and format_device(dev) == dev
        trailer += " on " + (dev if bare else json.dumps(dev))
    if node.location is not None:
        trailer += f"  # {node.location.to_text()}"
    return f"%{node.name}", rhs, trailer


def print_graph(graph: Graph, elide_constants: bool = False) -> str:
    """The graph as IR text. With ``elide_constants`` large constants are summarized: easier
    to read, but the text no longer parses back."""
    lines = [node_text(n, elide_constants) for n in graph]
    width = max((len(lhs) for lhs, _, _ in lines), default=0)
    body = [f"  {lhs.ljust(width)} = {rhs}{trailer}" for lhs, rhs, trailer in lines]
    return f"graph @{graph.name} {{\n" + "".join(b + "\n" for b in body) + "}\n"


def print_graphs(graphs: Iterable[Graph]) -> str:
    return "\n".join(print_graph(g) for g in graphs)
