"""A bias added to a matrix product as the gemm's own start value: ``AddV2(MatMul(a, b), bias)``
(either order, or ``BiasAdd`` in NHWC) becomes ``_MatMulBiasAdd(a, b, bias)``
(``compiler/ops/matmul_accumulate.py``) when ``bias`` is a vector over the product's columns,
the product has no other use, the dtype is f32 or f64, and both nodes sit on one device (a
CPU, or a GPU: ``compiler/codegen/cuda_ops/matmul.py``).
BLAS writes its output once whether it starts from zeros or from the bias, so the add's pass
over the product (for the LSTM benchmark's [1280, 10000] logits, 51 MB read and 51 MB
written) disappears. Run by the ``fuse-matmul-bias`` pass; the fused node keeps the add's name,
source location and the control edges of both nodes.
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


def fuse_matmul_bias(graph: Graph) -> bool:
    """Rewrite every matching bias add; whether the graph changed."""
    changed = False
    for add in list(graph):
        found = match_bias_add(add) if add in graph else None
        if found is None:
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
    """A column bias added to a matrix product as the gemm's start value."""

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return fuse_matmul_bias(graph)
