"""fuse-updates: a dense gradient-descent step on a weight matrix as one gemm into the variable.

``AssignSubVariableOp(var, Mul(MatMul(a, b), scale))`` (``Mul(scale, MatMul(...))`` too, and
``AssignSubVariableOp(var, MatMul(a, b))`` with scale 1) becomes
``_MatMulAssignSub(var, a, b, scale)`` (``compiler/ops/matmul_update.py``) when the product and
the scaled product are used by nothing else, ``scale`` is a scalar, the dtype is f32 or f64, and
all of it was placed on one device (a CPU's or a GPU's: both have its kernel). This is what
``GradientDescentOptimizer`` makes for the weights of a dense layer: the weight gradient ``MatMul(x, dy, transpose_a=true)`` times the
learning rate. The fused node keeps the update's name, source location and every control edge
of the nodes it replaces.

The sparse step is fused the same way: ``ResourceScatterSub(var, indices, Mul(values, scale))``
(what the optimizer makes for an ``IndexedSlices`` gradient, an embedding's) becomes
``_ResourceScatterSubScaled(var, indices, values, scale)`` (``compiler/ops/sparse_update.py``)
under the same conditions (on a CPU or a GPU), so the scaled gradient rows are never written
out.

The fusions that run after it are passes of their own: ``fuse-accumulate`` (a loop variable's
``acc + MatMul(a, b)`` as one gemm with ``beta = 1``, ``compiler/passes/fuse_accumulate.py``),
``fuse-conv`` (a convolution's bias and ReLU, a ReLU's mask on a max pooling gradient,
``compiler/passes/fuse_conv.py``) and ``fuse-matmul-bias`` (a column bias, or a matrix of the
product's shape, as the gemm's start value, ``compiler/passes/fuse_matmul_bias.py``).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import TensorType
from compiler.passes.manager import Pass, PassContext, register_pass
from compiler.passes.rewrite import single_use, take_place
from runtime.dtypes import DType

_FLOATS = (DType.f32, DType.f64)


def _match(update: Node) -> Optional[Tuple[Node, Optional[Node], Optional[Output]]]:
    """(MatMul, Mul or None, scale or None) when ``update`` is a fusable dense step."""
    if update.op != "AssignSubVariableOp" or len(update.inputs) != 2:
        return None
    value = update.inputs[1]
    mul, scale, product = None, None, value
    if value.node.op == "Mul":
        mul = value.node
        if single_use(value) is not update:
            return None
        x, y = mul.inputs
        product, scale = (x, y) if x.node.op == "MatMul" else (y, x)
        if scale.type.shape != ():
            return None
    matmul = product.node
    if matmul.op != "MatMul" or product.type.dtype not in _FLOATS:
        return None
    if single_use(product) is not (mul or update):
        return None
    devices = {n.assigned_device for n in (update, mul, matmul) if n is not None}
    if len(devices) != 1:
        return None
    return matmul, mul, scale


def _match_sparse(update: Node) -> Optional[Tuple[Node, Output, Output]]:
    """(Mul, values, scale) when ``update`` is a fusable sparse step."""
    if update.op != "ResourceScatterSub" or len(update.inputs) != 3:
        return None
    scaled = update.inputs[2]
    mul = scaled.node
    if mul.op != "Mul" or scaled.type.dtype not in _FLOATS or single_use(scaled) is not update:
        return None
    x, y = mul.inputs
    values, scale = (x, y) if y.type.shape == () else (y, x)
    if scale.type.shape != () or values.type.shape != scaled.type.shape:
        return None
    if mul.assigned_device != update.assigned_device:
        return None
    return mul, values, scale


@register_pass("fuse-updates")
class FuseUpdates(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        changed = False
        for update in list(graph):
            if update not in graph:
                continue
            found = _match(update)
            if found is not None:
                self._fuse(graph, update, *found)
                changed = True
                continue
            sparse = _match_sparse(update)
            if sparse is not None:
                self._fuse_sparse(graph, update, *sparse)
                changed = True
        return changed

    @staticmethod
    def _fuse_sparse(graph: Graph, update: Node, mul: Node, values: Output,
                     scale: Output) -> None:
        with graph.inserting_before(update):
            fused = graph.add_node(
                "_ResourceScatterSubScaled", [update.inputs[0], update.inputs[1], values, scale],
                {"dtype": update.attrs["dtype"], "Tindices": update.attrs["Tindices"]},
                name=f"{update.name}/fused", output_types=[], location=update.location,
                device=update.device)
        take_place(graph, update, fused, (mul,))

    @staticmethod
    def _fuse(graph: Graph, update: Node, matmul: Node, mul: Optional[Node],
              scale: Optional[Output]) -> None:
        dtype = matmul.output_types[0].dtype
        with graph.inserting_before(update):
            if scale is None:
                one = graph.add_node("Const", [], {"dtype": dtype,
                                                   "value": np.ones((), dtype.np)},
                                     name=f"{update.name}/one",
                                     output_types=[TensorType(dtype, ())], location=update.location,
                                     device=update.device)
                one.assigned_device = update.assigned_device
                scale = one.output(0)
            fused = graph.add_node(
                "_MatMulAssignSub", [update.inputs[0], matmul.inputs[0], matmul.inputs[1], scale],
                {"transpose_a": matmul.attrs.get("transpose_a", False),
                 "transpose_b": matmul.attrs.get("transpose_b", False), "T": dtype},
                name=f"{update.name}/fused", output_types=[], location=update.location,
                device=update.device)
        take_place(graph, update, fused, (mul, matmul))
