"""A graph in Graphviz ``dot`` form, for ``flowc ir --format dot``, and rendering it with ``dot``.

Nodes show name, op and output types; nodes with a device sit in one cluster per device (the
assigned device when placement set one, else the requested one); control edges are dashed;
``_Send``/``_Recv`` nodes are drawn as coloured arrows, and a pair with the same
``tensor_name`` is joined by a bold dotted edge.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Dict, List

from compiler.ir.graph import Graph, Node
from runtime.errors import FlowcError

RENDER_FORMATS = ("svg", "png", "pdf")
_COMM_STYLE = {"_Send": 'shape=cds, style=filled, fillcolor="#ffd8a8"',
               "_Recv": 'shape=cds, style=filled, fillcolor="#b2f2bb"'}


class RenderError(FlowcError):
    """The DOT text cannot be rendered (no Graphviz ``dot`` program, or it failed)."""


def _quote(text: str) -> str:
    return json.dumps(text)


def node_device(node: Node) -> str:
    """The device a node is drawn under: assigned if placed, else requested ('' for none)."""
    return node.assigned_device or node.device or ""


def _node_line(node: Node) -> str:
    types = ", ".join(str(t) for t in node.output_types)
    label = f"{node.name}\n{node.op}" + (f"\n{types}" if types else "")
    style = _COMM_STYLE.get(node.op, "")
    return f"{_quote(node.name)} [label={_quote(label)}{', ' + style if style else ''}];"


def graph_to_dot(graph: Graph) -> str:
    """The graph as DOT text: device clusters, data edges solid, control edges dashed."""
    lines = [f"digraph {_quote(graph.name)} {{", "  node [shape=box, fontname=monospace];"]
    by_device: Dict[str, List[Node]] = {}
    for n in graph:
        by_device.setdefault(node_device(n), []).append(n)
    lines += ["  " + _node_line(n) for n in by_device.pop("", [])]
    for i, (device, nodes) in enumerate(by_device.items()):
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_quote(device)}; style=rounded; color=\"#1c7ed6\";")
        lines += ["    " + _node_line(n) for n in nodes]
        lines.append("  }")
    for n in graph:
        for inp in n.inputs:
            attr = f" [label=\"{inp.index}\"]" if inp.node.num_outputs > 1 else ""
            lines.append(f"  {_quote(inp.node.name)} -> {_quote(n.name)}{attr};")
        for c in n.control_inputs:
            lines.append(f"  {_quote(c.name)} -> {_quote(n.name)} [style=dashed];")
    sends = {n.attrs.get("tensor_name"): n for n in graph if n.op == "_Send"}
    for n in graph:
        send = sends.get(n.attrs.get("tensor_name")) if n.op == "_Recv" else None
        if send is not None:
            lines.append(f"  {_quote(send.name)} -> {_quote(n.name)} "
                         "[style=\"dotted,bold\", color=\"#e8590c\", constraint=false];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_format(path: str) -> str:
    """The Graphviz output format a file name asks for ('' for DOT text)."""
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    return ext if ext in RENDER_FORMATS else ""


def render_dot(dot_text: str, path: str) -> None:
    """Write ``dot_text`` rendered by Graphviz's ``dot`` to ``path`` (.svg, .png or .pdf)."""
    fmt = render_format(path)
    if not fmt:
        raise RenderError(f"{path}: cannot render to this file type; use one of "
                          f"{', '.join('.' + f for f in RENDER_FORMATS)} (or .dot for the text)")
    program = shutil.which("dot")
    if program is None:
        raise RenderError(f"{path}: rendering needs Graphviz's 'dot' program, which is not "
                          "on PATH; install Graphviz (e.g. apt-get install graphviz) or write "
                          "the DOT text with -o FILE.dot")
    proc = subprocess.run([program, f"-T{fmt}", "-o", path], input=dot_text.encode(),
                          capture_output=True, check=False)
    if proc.returncode != 0:
        detail = proc.stderr.decode(errors="replace").strip() or f"exit status {proc.returncode}"
        raise RenderError(f"{path}: Graphviz 'dot' failed: {detail}")
