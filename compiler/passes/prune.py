"""prune: keep only the nodes the step's fetches (``_Retval``) and targets (``_Sink``) need.

A graph with neither (plain IR given to ``flowc opt``) is left as it is: there is nothing to
prune against. ``erase_if_unused`` is the local form other passes use after a rewrite.
"""
from __future__ import annotations

from typing import Iterable

from compiler.ir.reachability import needed_nodes
from compiler.ir.graph import Graph, Node
from compiler.ir.op_registry import get_op, has_op
from compiler.passes.manager import Pass, PassContext, register_pass

ROOT_OPS = ("_Retval", "_Sink")

# Nodes a rewrite never erases even when nothing uses them: feeds, fetches and targets.
KEEP_OPS = ("Placeholder", "PlaceholderWithDefault", "_Retval", "_Sink")


def is_removable(node: Node) -> bool:
    """Whether erasing ``node`` when unused cannot change what a step does."""
    if node.op in KEEP_OPS or not has_op(node.op):
        return False
    op = get_op(node.op)
    return not (op.stateful or op.is_control_flow or op.is_communication)


def erase_if_unused(graph: Graph, nodes: Iterable[Node]) -> int:
    """Erase each of ``nodes`` that has no users and is removable, then its inputs likewise.

    Passes call this on the nodes their rewrite may have left without users. Returns how many
    nodes were erased.
    """
    stack = list(nodes)
    erased = 0
    while stack:
        node = stack.pop()
        if node not in graph or node.users or not is_removable(node):
            continue
        producers = [i.node for i in node.inputs] + list(node.control_inputs)
        graph.erase_node(node)
        erased += 1
        stack.extend(producers)
    return erased


@register_pass("prune")
class Prune(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        roots = [n for n in graph if n.op in ROOT_OPS]
        if not roots:
            return False
        keep = needed_nodes((), roots, set())
        dead = [n for n in graph if n not in keep]
        # Cut every edge of the dead nodes first: loops (NextIteration back edges) have users
        # that come earlier in the order, so erasing one node at a time could not start.
        for node in dead:
            node.set_inputs([])
            node.set_control_inputs([])
        for node in dead:
            graph.erase_node(node)
        return bool(dead)
