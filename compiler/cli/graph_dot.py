"""A graph in Graphviz ``dot`` form, for ``flowc ir --format dot``."""
from __future__ import annotations

import json

from compiler.ir.graph import Graph


def _quote(text: str) -> str:
    return json.dumps(text)


def graph_to_dot(graph: Graph) -> str:
    """Nodes labelled name, op and output types; data edges solid, control edges dashed."""
    lines = [f"digraph {_quote(graph.name)} {{", "  node [shape=box, fontname=monospace];"]
    for n in graph:
        types = ", ".join(str(t) for t in n.output_types)
        label = f"{n.name}\n{n.op}" + (f"\n{types}" if types else "")
        lines.append(f"  {_quote(n.name)} [label={_quote(label)}];")
    for n in graph:
        for i, inp in enumerate(n.inputs):
            attr = f" [label=\"{inp.index}\"]" if inp.node.num_outputs > 1 else ""
            lines.append(f"  {_quote(inp.node.name)} -> {_quote(n.name)}{attr};")
        for c in n.control_inputs:
            lines.append(f"  {_quote(c.name)} -> {_quote(n.name)} [style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"
