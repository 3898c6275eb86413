"""Gradients of the segment reductions (``compiler/ops/segment.py``), as TensorFlow's
``math_grad.py`` builds them: a row takes its segment's gradient (Sum), divided by the
segment's row count (Mean) or sqrt of it (SqrtN); Max and Min share it among the rows equal to
the result; Prod is the product of the segment's other rows. Rows with negative ids (unsorted)
get zero. The ids and counts get none."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.grad._util import need_rank, shape_of
from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor
from runtime.dtypes import DType

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs):
    return apply_op(name, list(inputs), attrs)


def _rows_shaped(op: Operation, t: Tensor, ids: Tensor, rank: int) -> Tensor:
    """``t`` (shaped like ``ids``) reshaped to broadcast against rank-``rank`` rows."""
    if rank == need_rank(op, ids):
        return t
    ones = np.ones(rank - need_rank(op, ids), np.int32)
    return _op("Reshape", t, _op("ConcatV2", [shape_of(ids), ones], 0))


def _gather_drop_negatives(op: Operation, params: Tensor, ids: Tensor, rank: int):
    """Rows of ``params`` at ``ids``, zero where an id is negative (TF's
    ``_GatherDropNegatives``); also returns the row mask shaped to broadcast."""
    clipped = _op("Maximum", ids, _op("ZerosLike", ids))
    gathered = _op("GatherV2", params, clipped, 0)
    positive = _rows_shaped(op, _op("GreaterEqual", ids, _op("ZerosLike", ids)), ids, rank)
    return _op("SelectV2", positive, gathered, _op("ZerosLike", gathered)), positive, clipped


# --- sorted -------------------------------------------------------------------------------
@RegisterGradient("SegmentSum")
def _segment_sum_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("GatherV2", g, op.inputs[1], 0), None]


@RegisterGradient("SegmentMean")
def _segment_mean_grad(op: Operation, g: Tensor) -> Grads:
    data, ids = op.inputs[0], op.inputs[1]
    rank = need_rank(op, data)
    ones = _op("Fill", shape_of(ids), np.array(1, g.dtype.np))
    counts = _op("Maximum", _op("SegmentSum", ones, ids), np.array(1, g.dtype.np))
    counts = _op("Reshape", counts, np.array([-1] + [1] * (rank - 1), np.int32))
    return [_op("GatherV2", _op("RealDiv", g, counts), ids, 0), None]


def _share(g: Tensor, count: Tensor) -> Tensor:
    """Each segment's gradient divided among its ``count`` selected rows."""
    return _op("RealDiv", g, _op("Maximum", count, np.array(1, g.dtype.np)))


def _min_or_max_grad(op: Operation, g: Tensor) -> Grads:
    """The gradient goes to the rows equal to their segment's result, shared equally."""
    data, ids = op.inputs[0], op.inputs[1]
    rank = need_rank(op, data)
    unsorted = op.type.startswith("Unsorted")
    if unsorted:
        out_rows, positive, clipped = _gather_drop_negatives(op, op.outputs[0], ids, rank)
        selected = _op("LogicalAnd", _op("Equal", data, out_rows), positive)
        count = _op("UnsortedSegmentSum", _op("Cast", selected, DstT=g.dtype), ids, op.inputs[2])
        shared = _op("GatherV2", _share(g, count), clipped, 0)
    else:
        selected = _op("Equal", data, _op("GatherV2", op.outputs[0], ids, 0))
        count = _op("SegmentSum", _op("Cast", selected, DstT=g.dtype), ids)
        shared = _op("GatherV2", _share(g, count), ids, 0)
    return [_op("SelectV2", selected, shared, _op("ZerosLike", shared))] + \
        [None] * (len(op.inputs) - 1)


for _name in ("SegmentMax", "SegmentMin", "UnsortedSegmentMax", "UnsortedSegmentMin"):
    RegisterGradient(_name)(_min_or_max_grad)


def _prod_grad(op: Operation, g: Tensor) -> Grads:
    """Each row's gradient is the product of its segment's other rows: the segment's product
    divided by the row where the row is not zero; where it is, the product of the segment's
    nonzero rows (zero when the segment has another zero), as TF's ``_UnsortedSegmentProdGrad``."""
    data, ids = op.inputs[0], op.inputs[1]
    rank = need_rank(op, data)
    unsorted = op.type.startswith("Unsorted")
    extra = list(op.inputs[2:])

    def seg(kind: str, x: Tensor) -> Tensor:
        return _op(("UnsortedSegment" if unsorted else "Segment") + kind, x, ids, *extra)

    is_zero = _op("Equal", data, _op("ZerosLike", data))
    zeros = seg("Sum", _op("Cast", is_zero, DstT=g.dtype))
    g = _op("SelectV2", _op("Greater", zeros, np.array(1, g.dtype.np)), _op("ZerosLike", g), g)
    nonzero_prod = seg("Prod", _op("SelectV2", is_zero, _op("OnesLike", data), data))
    if unsorted:
        g_rows, _, clipped = _gather_drop_negatives(op, g, ids, rank)
    else:
        clipped = ids
        g_rows = _op("GatherV2", g, ids, 0)
    prod_rows = _op("GatherV2", op.outputs[0], clipped, 0)
    nonzero_rows = _op("GatherV2", nonzero_prod, clipped, 0)
    safe = _op("SelectV2", is_zero, _op("OnesLike", data), data)
    partial = _op("SelectV2", is_zero, nonzero_rows, _op("RealDiv", prod_rows, safe))
    return [_op("Mul", g_rows, partial)] + [None] * (len(op.inputs) - 1)


for _name in ("SegmentProd", "UnsortedSegmentProd"):
    RegisterGradient(_name)(_prod_grad)


# --- sparse -------------------------------------------------------------------------------
def _sparse_grad(op: Operation, g: Tensor) -> Grads:
    """Entry i's segment gradient (scaled for Mean/SqrtN) added into row indices[i]: TF's
    SparseSegment{Sum,Mean,SqrtN}Grad op."""
    data, indices, ids = op.inputs[0], op.inputs[1], op.inputs[2]
    kind = next(k for k in ("Sum", "Mean", "SqrtN") if op.type.startswith("SparseSegment" + k))
    dim0 = _op("Reshape", _op("Slice", _op("Shape", data, out_type=DType.i32),
                              np.array([0], np.int32), np.array([1], np.int32)),
               np.array([], np.int32))
    return [_op(f"SparseSegment{kind}Grad", g, indices, ids, dim0)] + \
        [None] * (len(op.inputs) - 1)


for _name in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN",
              "SparseSegmentSumWithNumSegments", "SparseSegmentMeanWithNumSegments",
              "SparseSegmentSqrtNWithNumSegments"):
    RegisterGradient(_name)(_sparse_grad)
