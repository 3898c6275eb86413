"""The loop form of fuse-updates: a sum ``acc + MatMul(a, b)`` carried by a loop variable
becomes one gemm into the variable's buffer (``_MatMulAccumulate``,
``compiler/ops/matmul_accumulate.py``).

A ``while_loop`` gradient sums the gradient of each weight its body reads in a loop variable:
``Merge -> Switch -> Identity -> AddV2(., MatMul(a, b)) -> NextIteration -> Merge``. When the
variable's value is read by nothing but that add (and the loop's ``Exit``), the product by
nothing but the add, the add by nothing but the ``NextIteration``, shapes are static and
equal, the dtype is f32 or f64, and every node sits on one CPU device, the add and the
product become ``_MatMulAccumulate(acc, a, b)``: the gemm adds into the variable's own buffer
(the compiled loop then keeps the variable where it is, with no copy and no swap). The fused
node keeps the add's name, its source location, and the control edges of both nodes.
"""
from __future__ import annotations

from typing import Optional, Tuple

from compiler.ir.graph import Graph, Node, Output
from compiler.passes.fuse import _single_use
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
    return _single_use(x) is not None and len(ident.users) == 1


def _static(out: Output) -> bool:
    shape = out.type.shape
    return shape is not None and all(d is not None for d in shape)


def match_accumulation(add: Node) -> Optional[Tuple[Output, Node]]:
    """(the accumulator's value, the MatMul) when ``add`` is a fusable loop accumulation."""
    if add.op != "AddV2" or len(add.inputs) != 2 or add.control_inputs:
        return None
    if "CPU" not in (add.assigned_device or "").upper():
        return None
    users = list(add.users)
    if len(users) != 1 or users[0].op != "NextIteration" or _single_use(add.output(0)) is None:
        return None
    nxt = users[0]
    for x, p in (add.inputs, add.inputs[::-1]):
        matmul = p.node
        if matmul.op != "MatMul" or p.type.dtype not in _FLOATS or _single_use(p) is not add:
            continue
        if not (_static(x) and _static(p) and x.type.shape == p.type.shape == add.output(0).type.shape):
            continue
        if not _loop_variable_read(x, nxt):
            continue
        devices = {n.assigned_device for n in (add, matmul, x.node, x.node.inputs[0].node)}
        if len(devices) != 1:
            continue
        return x, matmul
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
        x, matmul = found
        with graph.inserting_before(add):
            fused = graph.add_node(
                "_MatMulAccumulate", [x, matmul.inputs[0], matmul.inputs[1]],
                {"transpose_a": matmul.attrs.get("transpose_a", False),
                 "transpose_b": matmul.attrs.get("transpose_b", False), "T": x.type.dtype},
                name=f"{add.name}/fused", output_types=[add.output(0).type],
                location=add.location, device=add.device)
        fused.assigned_device = add.assigned_device
        for c in matmul.control_inputs:
            if c not in fused.control_inputs:
                fused.add_control_input(c)
        graph.replace_all_uses_with(add.output(0), fused.output(0))
        name = add.name
        for node in (add, matmul):
            node.set_inputs([])
            node.set_control_inputs([])
            graph.erase_node(node)
        graph.rename(fused, name)
        changed = True
    return changed
