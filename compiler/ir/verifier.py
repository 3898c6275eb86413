"""Structural checks of a graph: run before the pipeline and after every pass that changed it.

``verify`` checks ownership (every node and every edge end is in the graph), unique names,
topological order (back-edges only from ``NextIteration``), that user lists match the edges,
attrs against the op definition, and, with ``check_types``, input and output dtypes and arity
against the op's signature.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from compiler.errors import GraphError
from compiler.ir.graph import BACK_EDGE_OPS, Graph, Node
from compiler.ir.op_registry import OpDef, get_op
from runtime.dtypes import DType

__all__ = ["verify", "verify_node", "BACK_EDGE_OPS"]


def verify(graph: Graph, check_types: bool = True) -> None:
    """Raise GraphError naming the first node that breaks an invariant."""
    position: Dict[Node, int] = {}
    for i, node in enumerate(graph._nodes):
        if node.graph is not graph:
            raise GraphError("node is listed in a graph it does not belong to", node)
        if graph._by_name.get(node.name) is not node:
            raise GraphError("node name is not unique or not indexed", node)
        if node in position:
            raise GraphError("node is listed twice", node)
        position[node] = i
    if len(graph._by_name) != len(position):
        stray = sorted(set(graph._by_name) - {n.name for n in position})
        raise GraphError(f"name index lists nodes that are not in the graph: {', '.join(stray)}")
    for node in graph._nodes:
        _check_edges(node, position)
        verify_node(node, check_types)


def verify_node(node: Node, check_types: bool = True) -> None:
    """The checks of one node against its op: attrs, that each input names an output its
    source has, and input/output dtypes and arity."""
    op = get_op(node.op, node)
    _check_attrs(node, op)
    _check_input_outputs(node)
    if check_types:
        _check_signature(node, op)


def _check_input_outputs(node: Node) -> None:
    """Every input is an output its source has (a ``_Retval`` has none: it ends the step)."""
    for k, inp in enumerate(node.inputs):
        src = inp.node
        if not 0 <= inp.index < src.num_outputs:
            hint = "; a _Retval has no outputs (it returns its input from the step)" \
                if src.op == "_Retval" else ""
            raise GraphError(f"input {k} refers to output {inp.index} of %{src.name}, "
                             f"which has {src.num_outputs} outputs{hint}", node)


def _check_edges(node: Node, position: Dict[Node, int]) -> None:
    for k, inp in enumerate(node.inputs):
        src = inp.node
        if src not in position:
            raise GraphError(f"input {k} refers to %{src.name}, which is not in the graph", node)
        if not 0 <= inp.index < src.num_outputs:
            _check_input_outputs(node)            # the error, worded once
        if position[src] >= position[node] and src.op not in BACK_EDGE_OPS:
            raise GraphError(f"input %{src.name} comes after its user (graph is not in "
                             f"topological order)", node)
        if src.users.get(node, 0) <= 0:
            raise GraphError(f"%{src.name} does not list it as a user (stale user list)", node)
    for c in node.control_inputs:
        if c not in position:
            raise GraphError(f"control input %{c.name} is not in the graph", node)
        if position[c] >= position[node] and c.op not in BACK_EDGE_OPS:
            raise GraphError(f"control input %{c.name} comes after its user (graph is not in "
                             f"topological order)", node)
        if c.users.get(node, 0) <= 0:
            raise GraphError(f"control input %{c.name} does not list it as a user "
                             f"(stale user list)", node)
    for user, count in node.users.items():
        if user not in position:
            raise GraphError(f"user list names %{user.name}, which is not in the graph "
                             f"(stale user list)", node)
        edges = sum(1 for i in user.inputs if i.node is node) + (node in user.control_inputs)
        if edges != count:
            raise GraphError(f"user list is stale for %{user.name}: it records {count} edge(s), "
                             f"the graph has {edges}", node)


def _check_attrs(node: Node, op: OpDef) -> None:
    for name, a in op.attrs.items():
        if name not in node.attrs:
            raise GraphError(f"missing attr '{name}' ({a.kind})", node)
        value = node.attrs[name]
        if a.kind == "type":
            if not isinstance(value, DType):
                raise GraphError(f"attr '{name}' must be a dtype, got {value!r}", node)
            if a.allowed is not None and value not in a.allowed:
                raise GraphError(f"attr {name}={value} is not allowed for {op.name}; allowed: "
                                 f"{', '.join(map(str, a.allowed))}", node)
    for name in node.attrs:
        if name not in op.attrs and not name.startswith("_"):
            raise GraphError(f"{op.name} has no attr '{name}'", node)


def _arg_count(node: Node, arg) -> Optional[int]:
    if arg.number_attr:
        n = node.attrs.get(arg.number_attr)
        return n if isinstance(n, int) else None
    if arg.type_list_attr:
        types = node.attrs.get(arg.type_list_attr)
        return len(types) if isinstance(types, list) else None
    return 1


def _arg_dtypes(node: Node, arg, n: int, have: int) -> List[Optional[DType]]:
    """The dtypes of the ``n`` tensors of ``arg``, at most the ``have`` the node has there (an
    attr ``N`` of 2**63-1 in hostile IR must not make a list of that length)."""
    n = max(0, min(n, have))
    if arg.dtype is not None:
        return [arg.dtype] * n
    if arg.type_attr:
        return [node.attrs.get(arg.type_attr)] * n
    if arg.type_list_attr:
        return list(node.attrs[arg.type_list_attr])[:n]
    return [None] * n


def _check_signature(node: Node, op: OpDef) -> None:
    k = 0
    expected = 0
    for arg in op.inputs:
        n = _arg_count(node, arg)
        if n is None:
            raise GraphError(f"cannot tell how many tensors input '{arg.name}' takes", node)
        for j, want in enumerate(_arg_dtypes(node, arg, n, len(node.inputs) - k)):
            if k + j < len(node.inputs):
                inp = node.inputs[k + j]
                if want is not None and inp.dtype != want:
                    raise GraphError(f"input '{arg.name}' is {inp.dtype} (from %{inp.node.name}) "
                                     f"but the signature wants {want}", node)
        k += n
        expected += n
    if expected != len(node.inputs):
        raise GraphError(f"has {len(node.inputs)} data inputs but {op.name} takes {expected}", node)
    if op.shape_fn is None and not op.outputs:
        return                                # ops that declare their outputs per node
    k = 0
    for arg in op.outputs:
        n = _arg_count(node, arg)
        if n is None:
            return
        for j, want in enumerate(_arg_dtypes(node, arg, n, len(node.output_types) - k)):
            if k + j < len(node.output_types):
                have = node.output_types[k + j].dtype
                if want is not None and have != want:
                    raise GraphError(f"output {k + j} ('{arg.name}') is {have} but the signature "
                                     f"says {want}", node)
        k += n
    if k != len(node.output_types):
        raise GraphError(f"has {len(node.output_types)} outputs but {op.name} produces {k}", node)
