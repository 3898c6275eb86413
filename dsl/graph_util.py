"""``fl.graph_util`` (``tf.graph_util``, TensorFlow 1.x): freezing a trained graph.

``convert_variables_to_constants(sess, graph, output_node_names)`` keeps what the named nodes
need and turns every variable there into a constant of the value it has in ``sess`` (a handle
becomes a ``Const`` of the variable's name, its reads ``Identity`` nodes of it; see
``compiler/freeze.py``). ``graph`` is a flowc graph (you get a new ``fl.Graph`` back, to run
in a ``Session`` or export) or a TensorFlow ``GraphDef`` (you get a ``GraphDef`` back, as
from TensorFlow).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from compiler.freeze import extract_subgraph as _extract, freeze_variables, variable_key
from compiler.ir.graph import Graph as _IRGraph
from compiler.ir.graph import Node, Output
from dsl.context import Graph, control_dependencies
from dsl.ops import apply_op
from dsl.tensor import Tensor

__all__ = ["convert_variables_to_constants", "extract_sub_graph"]


def _as_ir(graph_or_graph_def):
    """(the flowc graph, whether it came as a GraphDef)."""
    if isinstance(graph_or_graph_def, _IRGraph):
        return graph_or_graph_def, False
    if type(graph_or_graph_def).__name__ == "GraphDef":
        from compiler.interop.graphdef import graphdef_to_graph
        return graphdef_to_graph(graph_or_graph_def, "<graph_def>", name="frozen"), True
    raise TypeError(f"expected a flowc Graph or a TensorFlow GraphDef, got "
                    f"{type(graph_or_graph_def).__name__}")


def _nodes(graph: _IRGraph, names: Iterable[str]) -> List[Node]:
    if isinstance(names, str):
        raise TypeError("output node names must be a list of node names, not a string")
    out = []
    for name in names:
        node = graph.get(name.split(":")[0].lstrip("^"))
        if node is None:
            raise ValueError(f"'{name}' is not in the graph @{graph.name}")
        out.append(node)
    return out


def _to_dsl_graph(ir: _IRGraph) -> Graph:
    """A builder graph with ``ir``'s nodes (names, attrs, types, devices, locations)."""
    g = Graph(ir.name)
    mapping: Dict[Node, Node] = {}
    late = []
    for n in ir:
        inputs = [Output(mapping[i.node], i.index) if i.node in mapping else None
                  for i in n.inputs]
        stand_in = next((i for i in inputs if i is not None), None)
        late.extend((n, k) for k, i in enumerate(inputs) if i is None)
        m = g.add_node(n.op, [stand_in if i is None else i for i in inputs], dict(n.attrs),
                       name=n.name, exact_name=True, output_types=n.output_types,
                       device=n.device, location=n.location,
                       control_inputs=[mapping[c] for c in n.control_inputs])
        m.assigned_device = n.assigned_device
        mapping[n] = m
    for n, k in late:                           # back edges (NextIteration)
        src = n.inputs[k]
        mapping[n].set_input(k, Output(mapping[src.node], src.index))
    return g


def extract_sub_graph(graph_def, dest_nodes: Sequence[str]):
    """What ``dest_nodes`` (node names) need of ``graph_def`` (a flowc graph or a GraphDef),
    as the same kind (``tf.graph_util.extract_sub_graph``)."""
    graph, proto = _as_ir(graph_def)
    nodes = _nodes(graph, dest_nodes)
    sub = _extract(graph, [], nodes)
    if proto:
        from compiler.interop.graphdef import graph_to_graphdef
        return graph_to_graphdef(sub)
    return _to_dsl_graph(sub)


def _session_values(sess, handles: Sequence[Node]) -> Dict[str, np.ndarray]:
    """The value each variable has in ``sess``, by key: a read of the variable of the same
    name in the session's graph (made when the graph has none)."""
    g = sess.graph
    fetches = []
    for h in handles:
        node = g.get(h.name)
        if node is None or node.op != "VarHandleOp":
            raise ValueError(f"variable '{h.name}' is not in the session's graph")
        read = next((u for u in node.users if u.op == "ReadVariableOp"
                     and u.inputs[0].node is node and not u.control_inputs), None)
        if read is None:
            with g.as_default(), control_dependencies(None):
                fetches.append(apply_op("ReadVariableOp", [Tensor(node.output(0))],
                                        {"dtype": node.attrs["dtype"]},
                                        name=f"{node.name}/Read/ReadVariableOp"))
        else:
            fetches.append(Tensor(read.output(0)))
    values = sess.run(fetches) if fetches else []
    return {variable_key(h): np.asarray(v) for h, v in zip(handles, values)}


def convert_variables_to_constants(sess, input_graph_def, output_node_names: Sequence[str],
                                   variable_names_whitelist: Optional[Iterable[str]] = None,
                                   variable_names_blacklist: Optional[Iterable[str]] = None):
    """``input_graph_def`` (a flowc graph, or a GraphDef) cut to what ``output_node_names``
    need, with each variable there a constant of its value in ``sess`` (only those named in
    ``variable_names_whitelist`` when given; none named in ``variable_names_blacklist``).
    Returns a new ``fl.Graph`` (or a GraphDef for a GraphDef); the input is unchanged."""
    graph, proto = _as_ir(input_graph_def)
    sub = _extract(graph, [], _nodes(graph, output_node_names))
    allow = None if variable_names_whitelist is None else set(variable_names_whitelist)
    deny = set(variable_names_blacklist or ())
    handles = [n for n in sub if n.op == "VarHandleOp" and n.name not in deny
               and (allow is None or n.name in allow)]
    freeze_variables(sub, _session_values(sess, handles), handles)
    if proto:
        from compiler.interop.graphdef import graph_to_graphdef
        return graph_to_graphdef(sub)
    return _to_dsl_graph(sub)
