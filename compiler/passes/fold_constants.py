"""fold-constants: evaluate constant subgraphs at compile time with the reference kernels.

A node folds when it is stateless, has a reference kernel, and its inputs are all ``Const``
(chains fold in one sweep, since nodes are visited in order), or when ``constant_value``
knows its value without its inputs' values (``Shape``/``Size``/``Rank`` of a static shape).
The result becomes a ``Const`` with the folded node's name, location and device. A ``Select``
or ``SelectV2`` whose condition is a constant, all true or all false, becomes the branch it
picks (TensorFlow's constant folding does the same), and in a step graph the ops only the other
branch needed leave the step, random ops included: an unfed ``training`` switch
(``PlaceholderWithDefault(false)``) takes dropout out of an inference step. Results with
more elements than ``--fold-max-elements`` stay unfolded, and so do nodes whose kernel fails
or reports a floating-point problem (an integer division by zero is a run-time error, not a
constant).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.ir.construct import constant_value, make_node, run_reference
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import TensorType
from compiler.ir.op_registry import get_op, has_op
from compiler.passes.infer_shapes import InferShapes
from compiler.passes.manager import Pass, PassContext, register_pass
from compiler.passes.prune import Prune, erase_if_unused
from compiler.passes.simplify import Replace, apply_rewrite
from runtime.dtypes import DType

# Ops never folded even though they may look foldable: sources and markers.
NEVER_FOLD = ("Const", "Placeholder", "PlaceholderWithDefault", "_Retval", "_Sink", "NoOp")


def _foldable_op(node: Node) -> bool:
    if node.op in NEVER_FOLD or not has_op(node.op) or not node.output_types:
        return False
    op = get_op(node.op)
    if op.stateful or op.is_control_flow or op.is_communication or op.extra.get("never_fold"):
        return False
    types = list(node.output_types) + [i.type for i in node.inputs]
    return all(t.dtype is not DType.resource for t in types)


def _evaluate(node: Node, limit: int) -> Optional[List[np.ndarray]]:
    """The node's output values, or None when they cannot (or should not) be computed now."""
    sizes = [t.num_elements for t in node.output_types]
    if any(n is not None and n > limit for n in sizes):
        return None                 # too large: do not even compute it
    try:
        with np.errstate(all="raise"):
            if len(node.output_types) == 1:
                known = constant_value(node.output(0))
                if known is not None:
                    return [np.asarray(known)]
            if not all(i.node.op == "Const" for i in node.inputs) or get_op(node.op).kernel is None:
                return None
            return run_reference(node, [i.node.attrs["value"] for i in node.inputs])
    except Exception:      # an op that fails on these values fails at run time, not here
        return None


def _fits(node: Node, values: List[np.ndarray], limit: int) -> bool:
    if len(values) != len(node.output_types):
        return False
    for value, t in zip(values, node.output_types):
        if not isinstance(value, np.ndarray) or value.size > limit or value.dtype != t.dtype.np:
            return False
        if t.shape is not None and (len(t.shape) != value.ndim or
                                    any(d is not None and d != v for d, v in zip(t.shape, value.shape))):
            return False
    return True


def _replace_with_consts(graph: Graph, node: Node, values: List[np.ndarray]) -> None:
    """Put a Const per output before ``node``, move every use to them, and erase ``node``."""
    consts: List[Node] = []
    control = list(node.control_inputs)
    for inp in node.inputs:                       # a folded Const input's own control inputs
        if inp.node.op == "Const":
            control.extend(n for n in inp.node.control_inputs if n not in control)
    with graph.inserting_before(node):
        for i, value in enumerate(values):
            if i > 0 and not node.output_users(i):
                continue
            dtype = node.output_types[i].dtype
            c = make_node(graph, "Const", [], {"value": np.array(value, copy=True), "dtype": dtype},
                          name=f"{node.name}_{i}" if i else node.name, control_inputs=control,
                          device=node.device, location=node.location,
                          output_types=[TensorType(dtype, value.shape)])
            c.assigned_device = node.assigned_device
            graph.replace_all_uses_with(Output(node, i), c.output(0))
            consts.append(c)
    for user in list(node.users):                 # control uses now wait for the constant
        user.remove_control_input(node)
        user.add_control_input(consts[0])
    producers = [inp.node for inp in node.inputs] + list(node.control_inputs)
    name = node.name
    graph.erase_node(node)
    graph.rename(consts[0], name)
    erase_if_unused(graph, producers)


SELECT_OPS = ("Select", "SelectV2")


def constant_choice(node: Node) -> Optional[Output]:
    """The branch a ``Select``/``SelectV2`` with a constant condition that is all true or all
    false returns, when it is the output exactly (same dtype and shape: no broadcast)."""
    if node.op not in SELECT_OPS or node.control_inputs or len(node.inputs) != 3:
        return None
    cond = node.inputs[0].node
    if cond.op != "Const":
        return None
    value = np.asarray(cond.attrs["value"])
    if value.size == 0:
        return None
    chosen = node.inputs[1] if value.all() else node.inputs[2] if not value.any() else None
    if chosen is None or chosen.type != node.output_types[0]:
        return None
    return chosen


@register_pass("fold-constants")
class FoldConstants(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        limit = ctx.options.fold_max_elements
        changed = False
        chose = False
        for node in graph:
            if node not in graph:
                continue
            chosen = constant_choice(node)
            if chosen is not None:
                apply_rewrite(graph, node, Replace(chosen))
                changed = chose = True
                continue
            if not _foldable_op(node):
                continue
            values = _evaluate(node, limit)
            if values is None or not _fits(node, values, limit):
                continue
            _replace_with_consts(graph, node, values)
            changed = True
        if chose:           # the branch not taken: its stateful ops too (in a step graph)
            Prune().run(graph, ctx)
        if changed:         # a folded shape operand (Reshape's, Fill's) makes its users static
            InferShapes().run(graph, ctx)
        return changed
