"""Grouping and ordering ops: ``fl.group``, ``fl.no_op``, ``fl.tuple`` (TensorFlow 1.x)."""
from __future__ import annotations

from typing import List, Optional

from dsl.context import control_dependencies
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, as_node

__all__ = ["group", "no_op", "tuple"]


def no_op(name: Optional[str] = None) -> Operation:
    return apply_op("NoOp", [], {}, name=name or "NoOp")


def group(*inputs, name: Optional[str] = None) -> Operation:
    """An op that runs after all of ``inputs`` (operations or tensors) have run."""
    flat = []
    for x in inputs:
        if isinstance(x, (list, type(()))):
            flat.extend(x)
        elif x is not None:
            flat.append(x)
    nodes = []
    for x in flat:
        n = as_node(x._as_graph_tensor() if hasattr(x, "_as_graph_tensor") else x)
        if n not in nodes:
            nodes.append(n)
    with control_dependencies([Operation(n) for n in nodes]):
        return no_op(name=name or "group_deps")


def tuple(tensors, name: Optional[str] = None, control_inputs=None) -> List[Tensor]:  # noqa: A001
    """The same tensors, each available only once all of them (and ``control_inputs``) are."""
    from dsl.array_ops import identity
    gate = group(*[t for t in tensors if t is not None], *(control_inputs or []),
                 name=(name or "tuple") + "_control")
    out = []
    with control_dependencies([gate]):
        for t in tensors:
            out.append(None if t is None else identity(t))
    return out
