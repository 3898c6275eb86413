"""prune: keep only the nodes the step's fetches (``_Retval``) and targets (``_Sink``) need.

A graph with neither (plain IR given to ``flowc opt``) is left as it is: there is nothing to
prune against.
"""
from __future__ import annotations

from compiler.interpreter import needed_nodes
from compiler.ir.graph import Graph
from compiler.passes.manager import Pass, PassContext, register_pass

ROOT_OPS = ("_Retval", "_Sink")


@register_pass("prune")
class Prune(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        roots = [n for n in graph if n.op in ROOT_OPS]
        if not roots:
            return False
        keep = needed_nodes((), roots, set())
        changed = False
        for node in reversed(graph.nodes):
            if node not in keep:
                for user in list(node.users):
                    user.remove_control_input(node)
                graph.erase_node(node)
                changed = True
        return changed
