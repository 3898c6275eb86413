"""What the fusing rewrites share: ``single_use`` (a match may absorb a producer only when its
one user is the node being fused) and ``take_place`` (the step every rewrite ends with: the
fused node takes the place of the nodes it replaces)."""
from __future__ import annotations

from typing import Iterable, Optional

from compiler.ir.graph import Graph, Node, Output


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


def single_use(out: Output) -> Optional[Node]:
    """The one node that reads ``out`` once, as data (None if there are more or fewer)."""
    users = [u for u in out.node.users if any(i == out for i in u.inputs)]
    if len(users) != 1 or any(c is out.node for c in users[0].control_inputs):
        return None
    user = users[0]
    if sum(1 for i in user.inputs if i == out) != 1:
        return None
    if any(out.node in u.control_inputs for u in out.node.users):
        return None
    return user
