"""fuse-accumulate, the loop form of fuse-updates: a sum ``acc + MatMul(a, b)`` carried by a loop variable
becomes one gemm into the variable's buffer (``_MatMulAccumulate``,
``compiler/ops/matmul_accumulate.py``), and ``acc + UnsortedSegmentSum(data, ids, n)`` adds
the rows into it (``_SegmentSumAccumulate``, ``compiler/ops/segment_sum_accumulate.py``).

A ``while_loop`` gradient sums the gradient of each weight its body reads in a loop variable:
``Merge -> Switch -> Identity -> AddV2(., MatMul(a, b)) -> NextIteration -> Merge`` (and the
gradient of a ``gather`` of a loop invariant, ``AddV2(., UnsortedSegmentSum(g, [t], n))``).
When the variable's value is read by nothing but that add (and the loop's ``Exit``), the
product (or segment sum) by nothing but the add, the add by nothing but the ``NextIteration``, shapes are static and
equal, the dtype is f32 or f64, and every node sits on one CPU device, the add and the
product become ``_MatMulAccumulate(acc, a, b)`` (the segment sum
``_SegmentSumAccumulate(acc, data, ids)``): the kernel adds into the variable's own buffer
(the compiled loop then keeps the variable where it is, with no copy and no swap). The fused
node keeps the add's name, its source location, and the control edges of both nodes.
"""
from __future__ import annotations

from typing import Optional, Tuple

from compiler.ir.construct import constant_value
from compiler.ir.graph import Graph, Node, Output
from compiler.passes.rewrite import single_use, take_place
from compiler.passes.manager import Pass, PassContext, register_pass
from runtime.dtypes import DType

_FLOATS = (DType.f32, DType.f64)


def _loop_variable_read(x: Output, nxt: Node) -> bool:
    """Whether ``x`` is a loop variable's value in the body (Identity of the true side of its
    loop Switch) that nothing but its one user reads, and whose next value is ``nxt``."""
    ident = x.node
    if ident.op != "Identity" or len(ident.inputs) != 1:
        return False
    sw_out = ident.inputs[0]
    sw = sw_out.node
    if sw.op != "Switch" or sw_out.index != 1 or sw.inputs[1].node.op != "LoopCond":
        return False
    merge = sw.inputs[0].node
    if merge.op != "Merge" or sw.inputs[0].index != 0 or merge.output_users(1):
        return False
    if nxt.output(0) not in merge.inputs:
        return False
    if merge.output_users(0) != [sw] or sw.output_users(1) != [ident]:
        return False
    if any(u.op != "Exit" for u in sw.output_users(0)):
        return False
    return single_use(x) is not None and len(ident.users) == 1


def _static(out: Output) -> bool:
    shape = out.type.shape
    return shape is not None and all(d is not None for d in shape)


def _fusable_term(p: Output, acc: Output) -> bool:
    """Whether ``p`` is a MatMul, or an UnsortedSegmentSum whose segments are ``acc``'s rows."""
    node = p.node
    if node.op == "MatMul":
        return True
    if node.op != "UnsortedSegmentSum" or not all(_static(i) for i in node.inputs[:2]):
        return False
    num = constant_value(node.inputs[2])
    return num is not None and int(num) == acc.type.shape[0]


def match_accumulation(add: Node) -> Optional[Tuple[Output, Node]]:
    """(the accumulator's value, the MatMul or UnsortedSegmentSum) when ``add`` is a fusable
    loop accumulation."""
    if add.op != "AddV2" or len(add.inputs) != 2 or add.control_inputs:
        return None
    if "CPU" not in (add.assigned_device or "").upper():
        return None
    users = list(add.users)
    if len(users) != 1 or users[0].op != "NextIteration" or single_use(add.output(0)) is None:
        return None
    nxt = users[0]
    for x, p in (add.inputs, add.inputs[::-1]):
        term = p.node
        if p.type.dtype not in _FLOATS or single_use(p) is not add:
            continue
        if not (_static(x) and _static(p) and x.type.shape == p.type.shape == add.output(0).type.shape):
            continue
        if not _loop_variable_read(x, nxt) or not _fusable_term(p, x):
            continue
        devices = {n.assigned_device for n in (add, term, x.node, x.node.inputs[0].node)}
        if len(devices) != 1:
            continue
        return x, term
    return None


def fuse_loop_accumulations(graph: Graph) -> bool:
    """Rewrite every matching accumulation; whether the graph changed."""
    changed = False
    for add in list(graph):
        if add not in graph:
            continue
        found = match_accumulation(add)
        if found is None:
            continue
        x, term = found
        if term.op == "MatMul":
            op, inputs = "_MatMulAccumulate", [x, term.inputs[0], term.inputs[1]]
            attrs = {"transpose_a": term.attrs.get("transpose_a", False),
                     "transpose_b": term.attrs.get("transpose_b", False), "T": x.type.dtype}
        else:
            op, inputs = "_SegmentSumAccumulate", [x, term.inputs[0], term.inputs[1]]
            attrs = {"T": x.type.dtype, "Tindices": term.inputs[1].type.dtype}
        with graph.inserting_before(add):
            fused = graph.add_node(op, inputs, attrs, name=f"{add.name}/fused",
                                   output_types=[add.output(0).type],
                                   location=add.location, device=add.device)
        take_place(graph, add, fused, (term,))
        changed = True
    return changed


@register_pass("fuse-accumulate")
class FuseAccumulate(Pass):
    """A loop variable's ``acc + MatMul(a, b)`` as one gemm into the accumulator."""

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return fuse_loop_accumulations(graph)
