"""One step every fusing rewrite ends with: the fused node takes the place of the nodes it
replaces."""
from __future__ import annotations

from typing import Iterable, Optional

from compiler.ir.graph import Graph, Node


def take_place(graph: Graph, old: Node, fused: Node, absorbed: Iterable[Optional[Node]]) -> None:
    """``fused`` takes ``old``'s place: its assigned device, every data and control use of it,
    and its name. The control inputs of ``old`` and of the ``absorbed`` nodes (the producers
    folded into ``fused``, users before what they use; None entries skipped) move to ``fused``,
    then all of them are erased."""
    replaced = [old] + [n for n in absorbed if n is not None]
    fused.assigned_device = old.assigned_device
    for node in replaced:
        for c in list(node.control_inputs):
            if c is not fused and c not in fused.control_inputs:
                fused.add_control_input(c)
    old.replace_all_uses_with(fused)
    name = old.name
    for node in replaced:
        graph.erase_node(node)
    graph.rename(fused, name)
