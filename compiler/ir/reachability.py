"""What a step needs: the nodes that must run for some fetches and targets."""
from __future__ import annotations

from typing import Iterable, Set

from compiler.ir.graph import Node, Output


def needed_nodes(fetches: Iterable[Output], targets: Iterable[Node], fed: Set[Output]) -> Set[Node]:
    """Nodes that must run to produce ``fetches`` and run ``targets`` (fed outputs cut the walk)."""
    need: Set[Node] = set()
    stack = [f.node for f in fetches if f not in fed] + list(targets)
    while stack:
        n = stack.pop()
        if n in need:
            continue
        need.add(n)
        for i in n.inputs:
            if i not in fed:
                stack.append(i.node)
        stack.extend(n.control_inputs)
    return need
