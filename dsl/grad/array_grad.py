"""Gradients of shape and movement ops (Reshape ... GatherV2); shape-valued ops have none."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.ir.construct import run_reference
from compiler.ir.op_registry import has_op
from dsl.grad._util import need_rank, need_value, reshape_like, shape_of
from dsl.gradients import (GradientShapeError, MissingGradientError, NotDifferentiable,
                           RegisterGradient, fill_zeros)
from dsl.indexed_slices import IndexedSlices
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs):
    return apply_op(name, list(inputs), attrs)


def _const(value: np.ndarray) -> Tensor:
    from dsl.ops import constant
    return constant(value)


def _reshape_grad(op: Operation, g: Tensor) -> Grads:
    """The gradient takes the input's shape back; the shape input gets none."""
    return [reshape_like(g, op.inputs[0])] + [None] * (len(op.inputs) - 1)


for _name in ("Reshape", "ExpandDims", "Squeeze"):
    RegisterGradient(_name)(_reshape_grad)


@RegisterGradient("Transpose")
def _transpose_grad(op: Operation, g: Tensor) -> Grads:
    perm = np.reshape(need_value(op, 1, "perm"), -1)
    return [_op("Transpose", g, np.argsort(perm).astype(np.int32)), None]


@RegisterGradient("ReverseV2")
def _reverse_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("ReverseV2", g, op.inputs[1]), None]


def _axis(op: Operation, i: int, rank: int) -> int:
    """Constant axis input ``i`` of ``op``, made non-negative."""
    return int(need_value(op, i, "axis")) % rank


@RegisterGradient("ConcatV2")
def _concat_grad(op: Operation, g: Tensor) -> Grads:
    values = op.inputs[:-1]
    axis = _axis(op, len(values), need_rank(op, values[0]))
    dims = [None if static_shape(v) is None else static_shape(v)[axis] for v in values]
    if all(d is not None for d in dims):
        sizes = _const(np.array(dims, dtype=np.int32))
    else:
        sizes = _op("ConcatV2", [_op("Slice", shape_of(v), [axis], [1]) for v in values], 0)
    parts = _op("SplitV", g, sizes, np.int32(axis), num_split=len(values))
    return list(parts) + [None]


@RegisterGradient("Split")
def _split_grad(op: Operation, *grads: Tensor) -> Grads:
    return [None, _op("ConcatV2", fill_zeros(op, grads), op.inputs[0])]


@RegisterGradient("SplitV")
def _splitv_grad(op: Operation, *grads: Tensor) -> Grads:
    return [_op("ConcatV2", fill_zeros(op, grads), op.inputs[2]), None, None]


@RegisterGradient("Pack")
def _pack_grad(op: Operation, g: Tensor) -> Grads:
    n = len(op.inputs)
    parts = _op("Unpack", g, num=n, axis=op.get_attr("axis"))
    return list(parts)


@RegisterGradient("Unpack")
def _unpack_grad(op: Operation, *grads: Tensor) -> Grads:
    return [_op("Pack", fill_zeros(op, grads), axis=op.get_attr("axis"))]


@RegisterGradient("Slice")
def _slice_grad(op: Operation, g: Tensor) -> Grads:
    x, begin = op.inputs[0], op.inputs[1]
    index = begin.dtype
    after = _op("Sub", _op("Sub", shape_of(x, index), begin), shape_of(op.outputs[0], index))
    paddings = _op("Pack", [begin, after], axis=1)
    return [_op("Pad", g, paddings), None, None]


@RegisterGradient("StridedSlice")
def _strided_slice_grad(op: Operation, g: Tensor) -> Grads:
    """Static input shape: any slice; unknown dims: unit strides without ellipsis/new axes."""
    x = op.inputs[0]
    spec = [need_value(op, i, what) for i, what in ((1, "begin"), (2, "end"), (3, "strides"))]
    if static_shape(x) is not None and all(d is not None for d in static_shape(x)):
        return [_gather_back(op, g, spec), None, None, None]
    if (static_shape(x) is None or op.get_attr("ellipsis_mask") or op.get_attr("new_axis_mask")
            or np.any(spec[2] != 1)):
        raise GradientShapeError(
            f"the gradient of StridedSlice '{op.name}' needs the shape of {x.name} to be static "
            f"(got {x.output.type}) unless all strides are 1 with no ellipsis or new axis")
    return [_pad_back(op, g, spec[0]), None, None, None]


def _gather_back(op: Operation, g: Tensor, spec: List[np.ndarray]) -> Tensor:
    """Each input element takes its output element's gradient, or zero (static shapes)."""
    x = op.inputs[0]
    n = int(np.prod(static_shape(x), dtype=np.int64))
    ids = np.arange(n, dtype=np.int64).reshape(static_shape(x))
    picked = np.reshape(run_reference(op.node, [ids] + spec)[0], -1).astype(np.int64)
    if not picked.size:
        return _op("ZerosLike", x)
    source = np.full(n, picked.size, dtype=np.int64)
    source[picked] = np.arange(picked.size)
    flat = _op("ConcatV2", [_op("Reshape", g, [-1]), _const(np.zeros(1, g.dtype.np))], 0)
    taken = _op("GatherV2", flat, _const(source.astype(np.int32)), 0)
    return _op("Reshape", taken, np.array(static_shape(x), dtype=np.int32))


def _pad_back(op: Operation, g: Tensor, begin: np.ndarray) -> Tensor:
    """A unit-stride slice: pad the gradient back around the box (dynamic shapes)."""
    x = op.inputs[0]
    rank = len(static_shape(x))
    begin_mask, shrink = op.get_attr("begin_mask"), op.get_attr("shrink_axis_mask")
    start = np.zeros(rank, dtype=np.int32)
    from_end = np.zeros(rank, dtype=np.int32)        # 1 where start counts from the dim's end
    for k, b in enumerate(np.reshape(begin, -1)[:rank]):
        b = 0 if begin_mask >> k & 1 else int(b)
        dim = static_shape(x)[k]
        if b < 0 and dim is None:
            from_end[k] = 1
        elif b < 0:
            b += dim
        start[k] = b if dim is None else min(max(b, 0), dim)
    for k in range(rank):
        if shrink >> k & 1:
            g = _op("ExpandDims", g, np.int32(k))
    x_shape = shape_of(x)
    before = _op("AddV2", _const(start), _op("Mul", x_shape, _const(from_end)))
    after = _op("Sub", _op("Sub", x_shape, before), shape_of(g))
    return _op("Pad", g, _op("Pack", [before, after], axis=1))


@RegisterGradient("Tile")
def _tile_grad(op: Operation, g: Tensor) -> Grads:
    x, multiples = op.inputs
    rank = need_rank(op, x)
    pairs = _op("Pack", [multiples, shape_of(x, multiples.dtype)], axis=1)
    split = _op("Reshape", g, _op("Reshape", pairs, np.array([-1], dtype=multiples.dtype.np)))
    summed = _op("Sum", split, np.arange(0, 2 * rank, 2, dtype=np.int32)) if rank else split
    return [reshape_like(summed, x), None]


@RegisterGradient("Pad")
def _pad_grad(op: Operation, g: Tensor) -> Grads:
    x, paddings = op.inputs
    index = paddings.dtype
    before = _op("Reshape", _op("Slice", paddings, np.array([0, 0], index.np),
                                np.array([-1, 1], index.np)), np.array([-1], index.np))
    return [_op("Slice", g, before, shape_of(x, index)), None]


def _is_static(t: Tensor) -> bool:
    return static_shape(t) is not None and all(d is not None for d in static_shape(t))


@RegisterGradient("GatherV2")
def _gather_grad(op: Operation, g: Tensor) -> Grads:
    """Sparse gradient: IndexedSlices of g's slices at the rows of params they came from
    (densified, with UnsortedSegmentSum, only where a dense gradient is needed)."""
    params, indices = op.inputs[0], op.inputs[1]
    if not has_op("UnsortedSegmentSum"):
        raise MissingGradientError(
            f"the gradient of GatherV2 '{op.name}' needs the UnsortedSegmentSum op, which is not "
            "registered (sparse (indices, values) gradients are a later step)")
    if int(need_value(op, 2, "axis")) != 0 or op.get_attr("batch_dims") != 0:
        raise GradientShapeError(f"the gradient of GatherV2 '{op.name}' supports only axis=0 "
                                 "and batch_dims=0")
    return [gather_rows_grad(params, indices, g), None, None]


def gather_rows_grad(params: Tensor, indices: Tensor, g: Tensor) -> IndexedSlices:
    """The gradient of a gather of rows ``indices`` of ``params`` (axis 0): g's slices at the
    rows they came from."""
    p_shape = shape_of(params, indices.dtype)
    flat_ids = _op("Reshape", indices, np.array([-1], indices.dtype.np))
    if _is_static(params) and _is_static(indices):
        # static shapes stay static (in a loop's gradient, its buffers then have static sizes)
        rows = [int(np.prod(static_shape(indices), dtype=np.int64))] + list(static_shape(params)[1:])
        values = _op("Reshape", g, np.array(rows, indices.dtype.np))
        return IndexedSlices(values, flat_ids, p_shape)
    inner = _op("Slice", p_shape, np.array([1], indices.dtype.np), np.array([-1], indices.dtype.np))
    count = _op("Reshape", _op("Size", indices, out_type=indices.dtype),
                np.array([1], indices.dtype.np))
    values = _op("Reshape", g, _op("ConcatV2", [count, inner], 0))
    return IndexedSlices(values, flat_ids, p_shape)


@RegisterGradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op: Operation, g: Tensor) -> Grads:
    """Each data row takes its segment's gradient; rows with ids out of range get zero."""
    ids, num = op.inputs[1], op.inputs[2]
    rank_g = need_rank(op, g)
    num = _op("Cast", num, DstT=ids.dtype) if num.dtype != ids.dtype else num
    valid = _op("LogicalAnd", _op("GreaterEqual", ids, 0), _op("Less", ids, num))
    safe = _op("SelectV2", valid, ids, _op("ZerosLike", ids))
    taken = _op("GatherV2", g, safe, 0)
    ones = np.ones(rank_g - 1, dtype=np.int32)
    mask_shape = _op("ConcatV2", [shape_of(ids), _const(ones)], 0) if rank_g > 1 else shape_of(ids)
    mask = _op("Reshape", valid, mask_shape) if rank_g > 1 else valid
    return [_op("SelectV2", mask, taken, _op("ZerosLike", taken)), None, None]


@RegisterGradient("Fill")
def _fill_grad(op: Operation, g: Tensor) -> Grads:
    from dsl.reduction_ops import reduce_sum
    return [None, reduce_sum(g)]


for _name in ("Shape", "Size", "Rank", "OneHot", "Range"):
    NotDifferentiable(_name)
