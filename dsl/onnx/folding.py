"""Values known at import time: a tensor computed only from constants (an ONNX exporter's
``Shape -> Gather -> Concat`` chain feeding a Reshape) is evaluated with the reference kernels,
so lowerings that need a compile-time value (shapes, axes, pads) get it."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from compiler.errors import CompileError
from compiler.ir.construct import constant_value, run_reference
from compiler.ir.graph import Node, Output
from compiler.ir.op_registry import get_op
from runtime.errors import FlowcError

_NOT_FOLDABLE = {"Placeholder", "PlaceholderWithDefault"}
MAX_FOLDED_NODES = 10_000


def static_value(out: Output) -> Optional[np.ndarray]:
    """The value of ``out`` when it depends on constants only, else None."""
    value = constant_value(out)
    if value is not None:
        return value
    needed = _constant_ancestors(out.node)
    if needed is None:
        return None
    values: Dict[Node, List[np.ndarray]] = {}
    for node in out.node.graph:
        if node not in needed:
            continue
        direct = constant_value(node.output(0)) if node.num_outputs == 1 else None
        if direct is not None:
            values[node] = [direct]
            continue
        try:
            values[node] = run_reference(node, [values[i.node][i.index] for i in node.inputs])
        except (FlowcError, CompileError, ValueError, TypeError, IndexError, ArithmeticError):
            return None                  # the kernel refuses: leave the error to run time
    return values[out.node][out.index]


def _constant_ancestors(node: Node):
    """Every node ``node`` depends on, or None when one is fed, stateful or too many."""
    seen = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if n is not node and n.num_outputs == 1 and constant_value(n.output(0)) is not None:
            seen.add(n)                  # known without its inputs (Shape of a static shape)
            continue
        if n.op in _NOT_FOLDABLE or n.control_inputs or get_op(n.op).stateful \
                or get_op(n.op).is_control_flow:
            return None                  # (a loop variable is not its initial value)
        seen.add(n)
        if len(seen) > MAX_FOLDED_NODES:
            return None
        stack.extend(i.node for i in n.inputs)
    return seen


# Ops whose value depends on their input's shape only, never on its values.
_SHAPE_ONLY = {"Shape", "ShapeN", "Size", "Rank"}


def fed_ancestors(out: Output, through_shapes: bool = True) -> List[Node]:
    """The placeholders ``out``'s value depends on (through nodes not known at compile time),
    in graph order: the graph inputs to bind so that the value becomes static. Control flow
    stops the walk: a value of a loop's iteration stays a run-time value whatever is bound.
    ``through_shapes=False``: only the placeholders whose values (not just their shapes, as
    ``Shape(input_ids)`` on a dynamic sequence axis) it depends on."""
    found, seen, stack = set(), set(), [out.node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.num_outputs == 1 and constant_value(n.output(0)) is not None:
            continue
        if n.op in _NOT_FOLDABLE:
            found.add(n)
            continue
        if get_op(n.op).is_control_flow or (not through_shapes and n.op in _SHAPE_ONLY):
            continue
        stack.extend(i.node for i in n.inputs)
    return [n for n in out.node.graph if n in found]
