"""cse: merge identical stateless nodes (common subexpression elimination).

Two nodes are identical when they have the same op, attrs (arrays compared by dtype, shape and
bytes), data inputs (as a multiset for commutative ops), control inputs, requested and
assigned device, and output types. Nodes are visited in order, so once the inputs of two
nodes have merged the nodes themselves merge too: chains collapse in one sweep. The earliest
node of a group is kept, with its name and location.

Never merged: stateful ops, control-flow and communication ops, feeds (``Placeholder``,
``PlaceholderWithDefault``) and the step markers ``_Retval``/``_Sink``.
"""
from __future__ import annotations

import struct
from typing import Any, Dict, Hashable

import numpy as np

from compiler.ir.graph import Graph, Node
from compiler.ir.op_registry import get_op, has_op
from compiler.passes.manager import Pass, PassContext, register_pass
from runtime.dtypes import DType

NEVER_MERGE = ("Placeholder", "PlaceholderWithDefault", "_Retval", "_Sink")


def attr_key(value: Any) -> Hashable:
    """A hashable form of an attr value that is equal exactly when the values are identical."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, np.ascontiguousarray(value).tobytes())
    if isinstance(value, (bool, np.bool_)):
        return ("bool", bool(value))
    if isinstance(value, (int, np.integer)):
        return ("int", int(value))
    if isinstance(value, (float, np.floating)):
        return ("float", struct.pack("<d", float(value)))     # tells -0.0 from 0.0, NaN equals NaN
    if isinstance(value, (list, tuple)):
        return ("list", tuple(attr_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, attr_key(v)) for k, v in value.items())))
    if value is None or isinstance(value, (str, DType)):
        return (type(value).__name__, value)
    try:
        hash(value)
        return (type(value).__name__, value)
    except TypeError:
        return (type(value).__name__, repr(value))


def _mergeable(node: Node) -> bool:
    if node.op in NEVER_MERGE or not has_op(node.op):
        return False
    op = get_op(node.op)
    if op.stateful or op.is_control_flow or op.is_communication:
        return False
    return all(t.dtype is not DType.resource for t in node.output_types)


def node_key(node: Node) -> Hashable:
    """What must be equal for two nodes to be merged."""
    inputs = [(id(i.node), i.index) for i in node.inputs]
    if get_op(node.op).commutative:
        inputs.sort()
    return (node.op,
            tuple(sorted((k, attr_key(v)) for k, v in node.attrs.items())),
            tuple(inputs),
            frozenset(id(c) for c in node.control_inputs),
            node.device, node.assigned_device,
            tuple(node.output_types))


@register_pass("cse")
class CommonSubexpressionElimination(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        seen: Dict[Hashable, Node] = {}
        changed = False
        for node in graph:
            if not _mergeable(node):
                continue
            key = node_key(node)
            kept = seen.get(key)
            if kept is None:
                seen[key] = node
                continue
            node.replace_all_uses_with(kept)
            graph.erase_node(node)          # its inputs are also the kept node's: still used
            changed = True
        return changed
