"""Deterministic, human-readable text for graphs; ``parser.parse_graph`` reads it back."""
from __future__ import annotations

import json
from typing import Collection, Iterable, Mapping, Optional, Tuple

from compiler.ir.attr_text import (attrs_equal, format_attr, format_device, format_elided_tensor,
                                   format_file_tensor)
from compiler.ir.graph import Graph, Node
from compiler.ir.op_registry import has_op, get_op


def _attr_items(node: Node, elide: bool = False, hide: Collection[str] = (),
                value_file: Optional[Tuple[str, str]] = None):
    op = get_op(node.op) if has_op(node.op) else None
    for k in sorted(node.attrs):
        if k in hide:
            continue
        v = node.attrs[k]
        if value_file is not None and k == "value":
            yield k, (format_elided_tensor(v, value_file[1]) if elide
                      else format_file_tensor(v, *value_file))
            continue
        a = op.attrs.get(k) if op else None
        if a is not None and a.has_default and attrs_equal(a.default, v):
            continue
        yield k, format_attr(v, a.kind if a else "any", elide)


def node_text(node: Node, elide_constants: bool = False, hide_attrs: Collection[str] = (),
              value_file: Optional[Tuple[str, str]] = None) -> tuple:
    """(lhs, rhs, trailer) pieces of a node's line (large constants summarized if asked, the
    attrs named in ``hide_attrs`` left out; ``value_file``: (file, SHA-256) of the file beside
    the IR that holds its ``value`` attr's bytes)."""
    operands = [i.ref for i in node.inputs] + [f"^%{c.name}" for c in node.control_inputs]
    rhs = f"{node.op}({', '.join(operands)})"
    attrs = list(_attr_items(node, elide_constants, hide_attrs, value_file))
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


def print_graph(graph: Graph, elide_constants: bool = False,
                constant_files: Optional[Mapping[str, Tuple[str, str]]] = None) -> str:
    """The graph as IR text. With ``elide_constants`` large constants are summarized: easier
    to read, but the text no longer parses back. ``constant_files``: node name -> (file,
    SHA-256) of the file beside the text that holds the node's ``value`` (an artifact's
    ``.bin`` blobs): named, not printed, and read back from there by the parser."""
    files = constant_files or {}
    lines = [node_text(n, elide_constants, value_file=files.get(n.name)) for n in graph]
    width = max((len(lhs) for lhs, _, _ in lines), default=0)
    body = [f"  {lhs.ljust(width)} = {rhs}{trailer}" for lhs, rhs, trailer in lines]
    return f"graph @{graph.name} {{\n" + "".join(b + "\n" for b in body) + "}\n"


def print_graphs(graphs: Iterable[Graph]) -> str:
    return "\n".join(print_graph(g) for g in graphs)
