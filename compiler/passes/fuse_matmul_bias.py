"""A bias added to a matrix product as the gemm's own start value: ``AddV2(MatMul(a, b), bias)``
(either order, or ``BiasAdd`` in NHWC) becomes ``_MatMulBiasAdd(a, b, bias)``
(``compiler/ops/matmul_accumulate.py``) when ``bias`` is a vector over the product's columns,
the product has no other use, the dtype is f32 or f64, and both nodes sit on one device (a
CPU, or a GPU: ``compiler/codegen/cuda_ops/matmul.py``).
BLAS writes its output once whether it starts from zeros or from the bias, so the add's pass
over the product (for the LSTM benchmark's [1280, 10000] logits, 51 MB read and 51 MB
written) disappears. Run by the ``fuse-matmul-bias`` pass; the fused node keeps the add's name,
source location and the control edges of both nodes.

The same pass starts a gemm from a whole matrix added to it: ``AddV2(MatMul(a, b), x)`` (either
order) with ``x`` of the product's static 2-D shape and dtype becomes ``_MatMulAccumulate(x, a,
b)``, one gemm with beta = 1 into ``x``'s buffer, on a CPU. That is an LSTM/GRU/RNN step's
``X_t W^T + H_{t-1} R^T`` (``dsl/onnx/ops_rnn.py``): the input projection's row is the start
value and the add's pass over the [batch, gates*hidden] product goes. Where ``x``'s buffer
cannot be written (a constant, a feed, a loop invariant, a value something else reads), the
compiled step writes into a copy of it (``memory_plan.in_place_copies``), which costs what the
add did. Loop accumulations were taken by ``fuse-accumulate`` before.
"""
from __future__ import annotations

from typing import Optional, Tuple

from compiler.ir.graph import Graph, Node, Output
from compiler.passes.rewrite import single_use, take_place
from compiler.passes.manager import Pass, PassContext, register_pass
from runtime.dtypes import DType

_FLOATS = (DType.f32, DType.f64)


def match_bias_add(add: Node) -> Optional[Tuple[Node, Output]]:
    """(the MatMul, the bias) when ``add`` adds a column bias to a product used only there."""
    if add.op == "BiasAdd":
        if add.attrs.get("data_format", "NHWC") != "NHWC":
            return None
        pairs = [tuple(add.inputs)]
    elif add.op == "AddV2" and len(add.inputs) == 2:
        pairs = [tuple(add.inputs), tuple(add.inputs[::-1])]
    else:
        return None
    device = (add.assigned_device or "").upper()
    if "CPU" not in device and "GPU" not in device:
        return None
    for p, bias in pairs:
        matmul = p.node
        if matmul.op != "MatMul" or p.type.dtype not in _FLOATS or single_use(p) is not add:
            continue
        shape, bshape = p.type.shape, bias.type.shape
        if shape is None or bshape is None or len(shape) != 2 or len(bshape) != 1:
            continue
        if shape[1] is None or bshape[0] != shape[1] or bias.type.dtype != p.type.dtype:
            continue
        if add.output(0).type.shape != shape or matmul.assigned_device != add.assigned_device:
            continue
        return matmul, bias
    return None


def _static_matrix(out: Output) -> bool:
    shape = out.type.shape
    return shape is not None and len(shape) == 2 and all(d is not None for d in shape)


def match_matrix_add(add: Node) -> Optional[Tuple[Node, Output]]:
    """(the MatMul, the start matrix) when ``add`` adds a matrix of the product's static shape
    to a product used only there, all on one CPU device."""
    if add.op != "AddV2" or len(add.inputs) != 2 or add.control_inputs:
        return None
    if "CPU" not in (add.assigned_device or "").upper():
        return None
    for p, x in (tuple(add.inputs), tuple(add.inputs[::-1])):
        matmul = p.node
        if matmul.op != "MatMul" or p.type.dtype not in _FLOATS or single_use(p) is not add:
            continue
        if x.type.dtype != p.type.dtype or not (_static_matrix(p) and _static_matrix(x)):
            continue
        if not x.type.shape == p.type.shape == add.output(0).type.shape:
            continue
        if len({matmul.assigned_device, add.assigned_device, x.node.assigned_device}) != 1:
            continue
        return matmul, x
    return None


def fuse_matmul_bias(graph: Graph) -> bool:
    """Rewrite every matching bias add and matrix add; whether the graph changed."""
    changed = False
    for add in list(graph):
        if add not in graph:
            continue
        found = match_bias_add(add)
        if found is None:
            started = match_matrix_add(add)
            if started is not None:
                matmul, x = started
                with graph.inserting_before(add):
                    fused = graph.add_node(
                        "_MatMulAccumulate", [x, matmul.inputs[0], matmul.inputs[1]],
                        {"transpose_a": matmul.attrs.get("transpose_a", False),
                         "transpose_b": matmul.attrs.get("transpose_b", False),
                         "T": add.output(0).type.dtype},
                        name=f"{add.name}/fused", output_types=[add.output(0).type],
                        location=add.location, device=add.device)
                take_place(graph, add, fused, (matmul,))
                changed = True
            continue
        matmul, bias = found
        with graph.inserting_before(add):
            fused = graph.add_node(
                "_MatMulBiasAdd", [matmul.inputs[0], matmul.inputs[1], bias],
                {"transpose_a": matmul.attrs.get("transpose_a", False),
                 "transpose_b": matmul.attrs.get("transpose_b", False),
                 "T": add.output(0).type.dtype},
                name=f"{add.name}/fused", output_types=[add.output(0).type],
                location=add.location, device=add.device)
        take_place(graph, add, fused, (matmul,))
        changed = True
    return changed


@register_pass("fuse-matmul-bias")
class FuseMatMulBias(Pass):
    """A column bias (or a matrix of the product's shape) added to a matrix product as the
    gemm's start value."""

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return fuse_matmul_bias(graph)
