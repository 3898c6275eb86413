"""fuse: merge chains of elementwise ops on one device into single ``Fused`` nodes.

A node is fusable when its op is elementwise, floating-point, without attrs other than ``T``
and the scalar ones its op declares fusable (``fused_attrs``: LeakyRelu's alpha, carried in
the expression), with a scalar C expression and no data error to report (integer division
by zero and the like stay separate kernels). ``BiasAdd`` over the last dim is fused as the broadcasting add
it is (``bias_add + relu``, the most common pair in a network, is one kernel). A fusable node whose only use is one input of a fusable
consumer on the same device is folded into that consumer; the chain becomes one ``Fused``
node whose inputs are the chain's external operands (each read once per output element,
broadcast to the output's shape) and whose ``fused_from`` lists the nodes it replaced.
Fetched, stateful, control-flow and communication nodes are never fused; nodes with control
inputs or control users keep their own kernels.

A Fused node holds at most ``MAX_FUSED_OPS`` ops, and its expression (a tree: a value the
chain reads twice, like ``x`` in ``square(x) - abs(x)``, is inlined at each use) evaluates at
most ``MAX_FUSED_OPS`` ops per element; longer chains become several kernels. Without the
second bound, a chain of such steps doubles its expression at each step.
``--disable-passes=fuse`` compiles the unfused program, for comparison.
"""
from __future__ import annotations

from typing import Dict, List

from compiler.ir.graph import Graph, Node, Output
from compiler.ops.fused import Expr, format_expr, op_text
from compiler.ir.op_registry import get_op, has_op
from compiler.passes.manager import Pass, PassContext, register_pass
from compiler.passes.rewrite import single_use, take_place
from runtime.dtypes import DType

_FLOATS = (DType.f32, DType.f64)

# Ops in one Fused node at most: a longer chain becomes several kernels (its expression would
# nest too deep for the compiler, and a loop body that long gains nothing more).
MAX_FUSED_OPS = 64


def _is_bias_add(node: Node) -> bool:
    """A BiasAdd over the last dim (NHWC, or any rank-2 input): a broadcasting add."""
    if node.op != "BiasAdd" or set(node.attrs) - {"T", "data_format"}:
        return False
    value = node.inputs[0].shape if node.inputs else None
    return node.attrs.get("data_format", "NHWC") == "NHWC" or (value is not None
                                                              and len(value) == 2)


def fusable(node: Node) -> bool:
    if node.op == "Fused":
        return True
    if not has_op(node.op) or node.num_outputs != 1:
        return False
    if _is_bias_add(node):
        t = node.output_types[0]
        return (t.dtype in _FLOATS and not node.control_inputs
                and all(i.dtype is t.dtype for i in node.inputs))
    op = get_op(node.op)
    if op.group != "elementwise" or op.stateful or op.extra.get("c_expr") is None:
        return False
    if op.extra.get("data_error") is not None:
        return False
    if set(node.attrs) - {"T", *op.extra.get("fused_attrs", ())} or node.control_inputs:
        return False
    t = node.output_types[0]
    if t.dtype not in _FLOATS or any(i.dtype is not t.dtype for i in node.inputs):
        return False
    return True


def _op_count(node: Node) -> int:
    return len(node.attrs["fused_from"]) if node.op == "Fused" else 1


def _expr_size(expr: Expr) -> int:
    """Ops evaluated per output element (a sub-expression used twice counts twice)."""
    if isinstance(expr, int):
        return 0
    return 1 + sum(_expr_size(a) for a in expr[1])


def _uses(expr: Expr, operand: int) -> int:
    if isinstance(expr, int):
        return int(expr == operand)
    return sum(_uses(a, operand) for a in expr[1])


def _merged_size(producer: Node, consumer: Node) -> int:
    """Size of the consumer's expression with the producer inlined at each of its uses (an
    expression is a tree: a value read twice is computed twice)."""
    p_expr, _, _ = _expr_of(producer)
    c_expr, c_operands, _ = _expr_of(consumer)
    produced = producer.output(0)
    uses = sum(_uses(c_expr, k) for k, o in enumerate(c_operands) if o == produced)
    return _expr_size(c_expr) + uses * _expr_size(p_expr)


def _expr_of(node: Node):
    """(expression, operands) of a fusable node: its own op over its inputs, or its Fused expr."""
    from compiler.ops.fused import parse_expr
    if node.op == "Fused":
        return parse_expr(node.attrs["expr"]), list(node.inputs), list(node.attrs["fused_from"])
    if _is_bias_add(node):
        op = "AddV2"                                     # bias [C] broadcasts over [..., C]
    else:
        fused_attrs = get_op(node.op).extra.get("fused_attrs", ())
        op = op_text(node.op, {a: node.attrs[a] for a in fused_attrs if a in node.attrs})
    return (op, list(range(len(node.inputs)))), list(node.inputs), [node.name]


def _substitute(expr: Expr, mapping: Dict[int, Expr]) -> Expr:
    if isinstance(expr, int):
        return mapping[expr]
    op, args = expr
    return (op, [_substitute(a, mapping) for a in args])


@register_pass("fuse")
class Fuse(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        changed = False
        progress = True
        while progress:
            progress = False
            for node in list(graph):
                if node not in graph or not fusable(node):
                    continue
                user = single_use(node.output(0))
                if user is None or not fusable(user) or user.op == "_Retval":
                    continue
                if user.assigned_device != node.assigned_device:
                    continue
                if _op_count(node) + _op_count(user) > MAX_FUSED_OPS:
                    continue
                if _merged_size(node, user) > MAX_FUSED_OPS:
                    continue              # inlining a value read twice doubles its work
                self._merge(graph, node, user)
                changed = progress = True
        return changed

    @staticmethod
    def _merge(graph: Graph, producer: Node, consumer: Node) -> None:
        """Replace ``consumer`` by a Fused node computing it with ``producer`` inlined."""
        p_expr, p_operands, p_from = _expr_of(producer)
        c_expr, c_operands, c_from = _expr_of(consumer)
        operands: List[Output] = []
        index: Dict[Output, int] = {}

        def operand(out: Output) -> int:
            if out not in index:
                index[out] = len(operands)
                operands.append(out)
            return index[out]

        produced = producer.output(0)
        p_map = {k: operand(o) for k, o in enumerate(p_operands)}
        inlined = _substitute(p_expr, p_map)
        c_map = {}
        for k, o in enumerate(c_operands):
            c_map[k] = inlined if o == produced else operand(o)
        expr = _substitute(c_expr, c_map)
        t = consumer.output_types[0]
        with graph.inserting_before(consumer):
            fused = graph.add_node(
                "Fused", operands,
                {"expr": format_expr(expr), "fused_from": p_from + c_from, "N": len(operands),
                 "T": t.dtype},
                name=f"{consumer.name}/fused", output_types=[t], location=consumer.location,
                device=consumer.device)
        take_place(graph, consumer, fused, (producer,))   # the chain keeps its last node's name
