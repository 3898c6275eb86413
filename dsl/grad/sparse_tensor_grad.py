"""Gradients of the sparse tensor ops (``compiler/ops/sparse_tensor.py``), as TensorFlow's
``sparse_grad.py`` and ``array_grad.py`` define them: with respect to the values and the dense
operands, never the indices or shapes."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.ops.sparse_tensor import reduced_axes
from dsl.grad._util import need_value, reduce_sum, shape_of
from dsl.gradients import GradientShapeError, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape
from runtime.dtypes import DType

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs) -> Tensor:
    return apply_op(name, list(inputs), attrs)


def _column(indices: Tensor, k: int) -> Tensor:
    """``indices[:, k]``."""
    return _op("StridedSlice", indices, np.array([0, k], np.int64), np.array([0, k + 1], np.int64),
               np.array([1, 1], np.int64), begin_mask=1, end_mask=1, shrink_axis_mask=2)


@RegisterGradient("SparseToDense")
def _sparse_to_dense_grad(op: Operation, g: Tensor) -> Grads:
    indices, _, values, _ = op.inputs
    ind = static_shape(indices)
    rank = static_shape(op.outputs[0])
    if ind is None or rank is None:
        raise GradientShapeError(f"the gradient of SparseToDense '{op.name}' needs the ranks of "
                                 "its sparse_indices and output known")
    if len(ind) == 0 or (len(ind) == 1 and len(rank) == 1):
        rows = _op("Reshape", indices, np.array([-1, 1], np.int32))
    elif len(ind) == 1:
        rows = _op("Reshape", indices, np.array([1, -1], np.int32))
    else:
        rows = indices
    picked = _op("GatherNd", g, rows)
    if len(static_shape(values) or ()) == 0:
        values_grad = reduce_sum(picked, [0])
    else:
        values_grad = picked
    default_grad = _op("Sub", reduce_sum(g, list(range(len(rank)))), reduce_sum(picked, [0]))
    return [None, None, values_grad, default_grad]


@RegisterGradient("SparseTensorDenseMatMul")
def _sparse_dense_matmul_grad(op: Operation, g: Tensor) -> Grads:
    indices, values, shape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    b_grad = _op("SparseTensorDenseMatMul", indices, values, shape, g,
                 adjoint_a=not adj_a, adjoint_b=False)
    if adj_b:
        b_grad = _op("Transpose", b_grad, np.array([1, 0], np.int32))
    rows, cols = _column(indices, 0), _column(indices, 1)
    parts_a = _op("GatherV2", g, cols if adj_a else rows, np.int32(0))
    dense_b = _op("Transpose", b, np.array([1, 0], np.int32)) if adj_b else b
    parts_b = _op("GatherV2", dense_b, rows if adj_a else cols, np.int32(0))
    values_grad = _op("Sum", _op("Mul", parts_a, parts_b), np.array([1], np.int32),
                      keep_dims=False)
    return [None, values_grad, None, b_grad]


@RegisterGradient("SparseReduceSum")
def _sparse_reduce_sum_grad(op: Operation, g: Tensor) -> Grads:
    indices, _, shape, _ = op.inputs
    ind = static_shape(indices)
    if ind is None or ind[1] is None:
        raise GradientShapeError(f"the gradient of SparseReduceSum '{op.name}' needs the rank "
                                 "of its input (the last dim of input_indices) known")
    rank = ind[1]
    red = reduced_axes(op.node, need_value(op, 3, "reduction_axes"), rank, GradientShapeError)
    keep = np.array([0 if k in red else 1 for k in range(rank)], np.int64)
    kept_shape = _op("AddV2", _op("Mul", shape, keep), 1 - keep)
    grad = _op("Reshape", g, kept_shape)
    at = _op("Mul", indices, keep)              # indices // scale: 0 on the reduced axes
    return [None, _op("GatherNd", grad, at), None, None]


@RegisterGradient("SparseReorder")
def _sparse_reorder_grad(op: Operation, unused_indices_grad: Tensor, g: Tensor) -> Grads:
    indices, _, shape = op.inputs
    n = _op("StridedSlice", shape_of(indices, DType.i64), np.array([0], np.int32),
            np.array([1], np.int32), np.array([1], np.int32), shrink_axis_mask=1)
    entries = _op("Range", np.int64(0), n, np.int64(1))
    _, perm = apply_op("SparseReorder", [indices, entries, shape])
    # output entry i came from input entry perm[i]
    return [None, _op("UnsortedSegmentSum", g, perm, n), None]


@RegisterGradient("SparseAdd")
def _sparse_add_grad(op: Operation, *grads: Tensor) -> Grads:
    a_indices, b_indices, sum_indices = op.inputs[0], op.inputs[3], op.outputs[0]
    a_grad, b_grad = apply_op("SparseAddGrad", [grads[1], a_indices, b_indices, sum_indices])
    return [None, a_grad, None, None, b_grad, None, None]


@RegisterGradient("SparseTensorDenseAdd")
def _sparse_dense_add_grad(op: Operation, g: Tensor) -> Grads:
    return [None, _op("GatherNd", g, op.inputs[0]), None, g]
