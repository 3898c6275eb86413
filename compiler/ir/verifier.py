"""Structural checks of a graph: run before the pipeline and after every pass that changed it."""
from __future__ import annotations

from compiler.errors import GraphError
from compiler.ir.graph import Graph
from compiler.ops.registry import get_op

# Ops whose inputs may come from later nodes (loop back-edges).
BACK_EDGE_OPS = {"NextIteration"}


def verify(graph: Graph, check_types: bool = True) -> None:
    """Raise GraphError naming the first node that breaks an invariant."""
    position = {}
    for i, node in enumerate(graph._nodes):
        if node.graph is not graph:
            raise GraphError("node is listed in a graph it does not belong to", node)
        if graph._by_name.get(node.name) is not node:
            raise GraphError("node name is not unique or not indexed", node)
        position[node] = i
    for node in graph._nodes:
        op = get_op(node.op, node)
        for k, inp in enumerate(node.inputs):
            src = inp.node
            if src not in position:
                raise GraphError(f"input {k} refers to %{src.name}, which is not in the graph", node)
            if not 0 <= inp.index < src.num_outputs:
                raise GraphError(f"input {k} refers to output {inp.index} of %{src.name}, "
                                 f"which has {src.num_outputs} outputs", node)
            if position[src] >= position[node] and src.op not in BACK_EDGE_OPS:
                raise GraphError(f"input %{src.name} comes after its user (graph is not in "
                                 f"topological order)", node)
            if src.users.get(node, 0) <= 0:
                raise GraphError(f"%{src.name} does not list it as a user", node)
        for c in node.control_inputs:
            if c not in position:
                raise GraphError(f"control input %{c.name} is not in the graph", node)
            if position[c] >= position[node] and c.op not in BACK_EDGE_OPS:
                raise GraphError(f"control input %{c.name} comes after its user", node)
        for user, count in node.users.items():
            edges = sum(1 for i in user.inputs if i.node is node) + (node in user.control_inputs)
            if edges != count:
                raise GraphError(f"user list is stale for %{user.name}", node)
        for name, a in op.attrs.items():
            if name not in node.attrs:
                raise GraphError(f"missing attr '{name}'", node)
        if check_types:
            _check_signature(node, op)


def _check_signature(node, op) -> None:
    expected = 0
    k = 0
    for arg in op.inputs:
        n = 1
        if arg.number_attr:
            n = node.attrs[arg.number_attr]
        elif arg.type_list_attr:
            n = len(node.attrs[arg.type_list_attr])
        for j in range(n):
            if k >= len(node.inputs):
                break
            inp = node.inputs[k]
            want = arg.dtype
            if arg.type_attr:
                want = node.attrs.get(arg.type_attr)
            elif arg.type_list_attr:
                want = node.attrs[arg.type_list_attr][j]
            if want is not None and inp.dtype != want:
                raise GraphError(f"input '{arg.name}' is {inp.dtype} (from %{inp.node.name}) "
                                 f"but the signature wants {want}", node)
            k += 1
        expected += n
    if expected != len(node.inputs):
        raise GraphError(f"has {len(node.inputs)} data inputs but {op.name} takes {expected}", node)
