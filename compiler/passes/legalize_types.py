"""legalize-types: f16/bf16 values are stored as such, and computed in f32.

C has no bf16 arithmetic and flowc's kernels none for f16, so every node that has f16/bf16
inputs, outputs or type attrs and whose op is not ``half_native`` (an op whose kernels move,
hold or convert half values as they are: Cast, Identity, Reshape, ConcatV2, Gather, control
flow, variables, queues; ``compiler/ir/op_registry.py``) is rewritten to compute in f32, as
onnxruntime and XLA do on CPUs:

- each half input is widened to f32 (exactly): a ``Cast`` next to the node, or a new f32
  ``Const`` for a constant input (one per value and device);
- the node's half type attrs become f32, and so do its half outputs;
- each formerly half output is rounded back to its dtype by a ``Cast`` (to nearest even, NaN
  kept) that takes its place for every user, fetches included.

So ``MatMul`` of f16 operands multiplies and accumulates in f32 and rounds once, and a chain of
f16 ops rounds after each op, as the f16 graph says. The reference interpreter computes such
nodes the same way (``compiler/ir/construct.py``'s ``run_reference``), so compiled code and
interpreter agree. An op that keeps state in its type attr's dtype is half_native (a legalized
one would disagree with its state): variables' reads and assignments, queues and the gradient
accumulators are; variables' in-place arithmetic updates take no half type. Runs after
``place`` (the casts go on their node's device) and before the fusions, which see the f32 ops.
A half value several nodes on one device compute with is widened once.
"""
from __future__ import annotations

from typing import Dict, Tuple

from compiler.ir.graph import Graph, Node, Output
from compiler.ir.op_registry import computes_half_in_f32, f32_type_attrs, get_op
from compiler.ir.types import TensorType
from compiler.passes.manager import Pass, PassContext, register_pass
from runtime.dtypes import DType, half_to_f32


def _widened(graph: Graph, node: Node, out: Output,
             cache: Dict[Tuple[Output, str], Output]) -> Output:
    """``out`` (f16/bf16) as f32 on ``node``'s device: a Const for a constant, else a Cast."""
    key = (out, node.assigned_device)
    if key in cache:
        return cache[key]
    src = out.node
    t = out.type
    with graph.inserting_before(node):
        if src.op == "Const":
            value = half_to_f32(src.attrs["value"], t.dtype)
            f32 = graph.add_node("Const", [], {"value": value, "dtype": DType.f32},
                                 name=f"{src.name}/f32",
                                 output_types=[TensorType(DType.f32, t.shape)],
                                 device=node.device, location=src.location)
        else:
            f32 = graph.add_node("Cast", [out], {"SrcT": t.dtype, "DstT": DType.f32,
                                                 "Truncate": False},
                                 name=f"{src.name}/f32" + (f"_{out.index}" if out.index else ""),
                                 output_types=[TensorType(DType.f32, t.shape)],
                                 device=node.device, location=node.location)
    f32.assigned_device = node.assigned_device
    cache[key] = f32.output(0)
    return cache[key]


def legalize_node(graph: Graph, node: Node, cache: Dict[Tuple[Output, str], Output]) -> None:
    """Rewrite ``node`` to compute in f32 between casts (see the module doc)."""
    op = get_op(node.op, node)
    for i, x in enumerate(node.inputs):
        if x.type.dtype.is_half:
            node.set_input(i, _widened(graph, node, x, cache))
    node.attrs = f32_type_attrs(op, node.attrs)
    half_outputs = [(k, t.dtype) for k, t in enumerate(node.output_types) if t.dtype.is_half]
    node.output_types = [TensorType(DType.f32, t.shape) if t.dtype.is_half else t
                         for t in node.output_types]
    for k, dtype in reversed(half_outputs):
        out = node.output(k)
        suffix = f"_{k}" if k else ""
        with graph.inserting_after(node):
            back = graph.add_node("Cast", [out], {"SrcT": DType.f32, "DstT": dtype,
                                                  "Truncate": False},
                                  name=f"{node.name}/{dtype.ir_name}{suffix}",
                                  output_types=[TensorType(dtype, out.type.shape)],
                                  device=node.device, location=node.location)
        back.assigned_device = node.assigned_device
        graph.replace_all_uses_with(out, back.output(0))
    graph.version += 1


def legalize_types(graph: Graph) -> bool:
    """Make every node that computes on f16/bf16 compute in f32; whether anything changed."""
    todo = [n for n in graph if computes_half_in_f32(n)]
    cache: Dict[Tuple[Output, str], Output] = {}
    for node in todo:
        legalize_node(graph, node, cache)
    for out in {out for out, _ in cache}:          # half constants all widened: gone
        if out.node.op == "Const" and not out.node.users and out.node in graph:
            graph.erase_node(out.node)
    return bool(todo)


@register_pass("legalize-types")
class LegalizeTypes(Pass):
    """f16/bf16 computed in f32 between casts, wherever a kernel has no half type."""

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return legalize_types(graph)
