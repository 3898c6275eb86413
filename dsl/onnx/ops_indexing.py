"""Indexing and selection ops: TopK, GatherND, GatherElements, ScatterND, ScatterElements (and
the older Scatter), TensorScatter, Compress, NonZero, Unique, ReverseSequence, CenterCropPad,
Einsum.

They lower to TensorFlow's ops: TopKV2, GatherNd, TensorScatterUpdate/Add/Max/Min (and
flowc's _TensorScatterMul for ``reduction="mul"``), Where, UniqueWithCountsV2,
ReverseSequence, Einsum. ONNX's negative indices (counting from the end of a dim) are made
non-negative first; an index still out of range is the flowc kernel's run-time error.
"""
from __future__ import annotations

from typing import List

import numpy as np

import dsl as fl
from dsl.onnx.ops_attention import dim_of, dim_tensor
from dsl.onnx.values import (binary, full_shape, index_const, index_scalar, normalize_axis,
                             rank_of, scalar, shape_i64, static_shape)
from dsl.ops import apply_op
from dsl.tensor import Tensor


def _transpose(x: Tensor, perm: List[int]) -> Tensor:
    return apply_op("Transpose", [x, index_const(perm)])


def _to_last(x: Tensor, axis: int, rank: int):
    """``x`` with ``axis`` moved last, and the permutation that moves it back (None: none)."""
    if axis == rank - 1:
        return x, None
    perm = [k for k in range(rank) if k != axis] + [axis]
    return _transpose(x, perm), [perm.index(k) for k in range(rank)]


def _back(x: Tensor, perm) -> Tensor:
    return x if perm is None else _transpose(x, perm)


def _order_reversing(x: Tensor) -> Tensor:
    """A map that reverses the order of ``x``'s values exactly: -x for floats, -1 - x for
    signed integers (no overflow), max - x for unsigned ones."""
    if x.dtype.is_floating:
        return apply_op("Neg", [x])
    if x.dtype == fl.uint8:
        return binary("Sub", scalar(255, x), x)
    if x.dtype == fl.bool_:
        return binary("Sub", scalar(1, fl.cast(x, fl.int32)), fl.cast(x, fl.int32))
    return binary("Sub", scalar(-1, x), x)


def ascending_order(x: Tensor) -> Tensor:
    """Per last-axis row, the indices that sort it ascending (equal values in index order)."""
    n = dim_of(x, -1)
    _, order = apply_op("TopKV2", [_order_reversing(x), dim_tensor(n)], {"index_type": fl.int64})
    return order


# --- TopK --------------------------------------------------------------------------------------
def lower_top_k(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    axis = normalize_axis(ctx.attr("axis", -1), rank, ctx)
    if ctx.opset < 10:
        k = index_scalar(int(ctx.attr("k")))
    else:
        k = apply_op("Reshape", [fl.cast(ctx.input(1), fl.int64), index_const([])])
    largest = ctx.attr("largest", 1) if ctx.opset >= 11 else 1
    moved, back = _to_last(x, axis, rank)
    keyed = moved if largest else _order_reversing(moved)
    values, indices = apply_op("TopKV2", [keyed, k], {"index_type": fl.int64})
    if not largest:          # the map is its own inverse
        values = _order_reversing(values)
    return [_back(values, back), _back(indices, back)]


# --- GatherND / ScatterND ----------------------------------------------------------------------
def _non_negative_rows(ctx, data: Tensor, indices: Tensor, first: int = 0) -> Tensor:
    """int64 index rows into dims ``first..`` of ``data`` with negative entries counted from
    the end of their dim."""
    idx = fl.cast(indices, fl.int64)
    q = static_shape(indices)[-1]
    if q is None:
        raise ctx.error("the last dim of indices (the index depth) must be known")
    dims = static_shape(data)[first:first + q]
    if None in dims:
        dims = apply_op("Slice", [shape_i64(data), index_const([first]), index_const([q])])
    else:
        dims = index_const(dims)
    return fl.where_v2(binary("Less", idx, scalar(0, idx)), binary("AddV2", idx, dims), idx)


def lower_gather_nd(ctx):
    data, indices = ctx.input(0), ctx.input(1)
    batch_dims = ctx.attr("batch_dims", 0) if ctx.opset >= 12 else 0
    rows = _non_negative_rows(ctx, data, indices, batch_dims)
    if batch_dims:
        return fl.gather_nd(data, rows, batch_dims=batch_dims)
    return apply_op("GatherNd", [data, rows])


_SCATTER_OPS = {"none": "TensorScatterUpdate", "add": "TensorScatterAdd",
                "mul": "_TensorScatterMul", "max": "TensorScatterMax", "min": "TensorScatterMin"}


def _scatter_op(ctx) -> str:
    reduction = ctx.attr("reduction", "none")
    if reduction not in _SCATTER_OPS:
        raise ctx.error(f"unknown reduction '{reduction}'")
    return _SCATTER_OPS[reduction]


def lower_scatter_nd(ctx):
    data, indices, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    rows = _non_negative_rows(ctx, data, indices)
    return apply_op(_scatter_op(ctx), [data, rows, updates])


def _element_rows(ctx, data: Tensor, indices: Tensor) -> Tensor:
    """GatherElements / ScatterElements: every element of ``indices`` names one element of
    ``data``, at its own coordinates with the one along ``axis`` replaced by its value (made
    non-negative); those coordinates, as rows, index a GatherNd or a TensorScatter, which
    check every coordinate against its own dim."""
    rank = rank_of(data, ctx)
    axis = normalize_axis(ctx.attr("axis", 0), rank, ctx)
    if rank_of(indices, ctx) != rank:
        raise ctx.error(f"indices have rank {rank_of(indices, ctx)}, data rank {rank}")
    idx = fl.cast(indices, fl.int64)
    size = dim_tensor(dim_of(data, axis))
    idx = fl.where_v2(binary("Less", idx, scalar(0, idx)), binary("AddV2", idx, size), idx)
    ishape = full_shape(indices)
    if ishape is not None:
        grid = np.indices(ishape, dtype=np.int64)                           # [rank, *ishape]
        coords = [fl.constant(grid[k][..., None], dtype=fl.int64) for k in range(rank)]
    else:
        coords = _coordinates_at_run_time(indices, rank)
    parts = [coords[k] if k != axis else apply_op("ExpandDims", [idx, index_scalar(-1)])
             for k in range(rank)]
    return apply_op("ConcatV2", [parts, index_scalar(-1)]) if rank > 1 else parts[0]


def _coordinates_at_run_time(x: Tensor, rank: int) -> List[Tensor]:
    """Per dim k of ``x`` (its shape known only at run time, as RoBERTa's position ids on a
    dynamic sequence), each element's coordinate along k, shaped ``x.shape + [1]``: a Range
    over dim k, broadcast over the other dims."""
    shape = shape_i64(x)
    zeros = apply_op("Fill", [apply_op("ConcatV2", [[shape, index_const([1])], index_scalar(0)]),
                              fl.constant(np.int64(0))])
    coords = []
    for k in range(rank):
        dim = apply_op("GatherV2", [shape, index_scalar(k), index_scalar(0)])
        along = apply_op("Range", [fl.constant(np.int64(0)), dim, fl.constant(np.int64(1))])
        lay = [1] * (rank + 1)
        lay[k] = -1
        coords.append(binary("AddV2", apply_op("Reshape", [along, index_const(lay)]), zeros))
    return coords


def lower_gather_elements(ctx):
    data, indices = ctx.input(0), ctx.input(1)
    return apply_op("GatherNd", [data, _element_rows(ctx, data, indices)])


def lower_scatter_elements(ctx):
    data, indices, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    op = "TensorScatterUpdate" if ctx.op_type == "Scatter" else _scatter_op(ctx)
    return apply_op(op, [data, _element_rows(ctx, data, indices), updates])


def lower_tensor_scatter(ctx):
    """The KV-cache write of opset 24: ``update`` (the cache's shape but for ``axis``) lands
    at ``write_indices[batch] + position`` along ``axis`` (modulo its size when circular)."""
    cache, update = ctx.input(0), ctx.input(1)
    rank = rank_of(cache, ctx)
    axis = normalize_axis(ctx.attr("axis", -2), rank, ctx)
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.error(f"unknown mode '{mode}'")
    if axis == 0:
        raise ctx.error("axis must not be the batch dim")
    lead = static_shape(update)[:axis + 1]
    if None in lead:
        raise ctx.error(f"needs the dims of update up to axis {axis} known")
    grid = np.indices(lead, dtype=np.int64)                       # [axis + 1, *lead]
    writes = ctx.optional_input(2)
    position = fl.constant(grid[axis], dtype=fl.int64)
    if writes is not None:
        start = apply_op("Reshape", [fl.cast(writes, fl.int64), index_const([-1] + [1] * axis)])
        position = binary("AddV2", position, start)
    if mode == "circular":
        position = binary("FloorMod", position, dim_tensor(dim_of(cache, axis)))
    parts = [fl.constant(grid[k][..., None], dtype=fl.int64) for k in range(axis)]
    parts.append(apply_op("ExpandDims", [position, index_scalar(-1)]))
    rows = apply_op("ConcatV2", [parts, index_scalar(-1)])
    return apply_op("TensorScatterUpdate", [cache, rows, update])


# --- Compress / NonZero ------------------------------------------------------------------------
def lower_compress(ctx):
    x, condition = ctx.input(0), ctx.input(1)
    axis = ctx.attr("axis", None)
    if axis is None:
        x, axis = apply_op("Reshape", [x, index_const([-1])]), 0
    else:
        axis = normalize_axis(axis, rank_of(x, ctx), ctx)
    cond = apply_op("Reshape", [fl.cast(condition, fl.bool_), index_const([-1])])
    picked = apply_op("Reshape", [fl.where_v2(cond), index_const([-1])])
    return apply_op("GatherV2", [x, picked, index_scalar(axis)])


def lower_non_zero(ctx):
    x = ctx.input(0)
    if rank_of(x, ctx) == 0:
        x = apply_op("Reshape", [x, index_const([1])])
    return _transpose(fl.where_v2(x), [1, 0])


# --- Unique ------------------------------------------------------------------------------------
def lower_unique(ctx):
    """TensorFlow's UniqueWithCountsV2 gives the distinct values in the order they first occur;
    ONNX's first-occurrence indices are a TensorScatterMin of the positions, and ``sorted``
    (the default) orders the distinct values (slices: lexicographically, by stable sorts on
    each column from the last) and renumbers the inverse indices."""
    x = ctx.input(0)
    axis = ctx.attr("axis", None)
    if axis is None:
        x, axis = apply_op("Reshape", [x, index_const([-1])]), 0
        y, inverse, counts = apply_op("UniqueWithCounts", [x], {"out_idx": fl.int64})
    else:
        axis = normalize_axis(axis, rank_of(x, ctx), ctx)
        y, inverse, counts = apply_op("UniqueWithCountsV2", [x, index_const([axis])],
                                      {"out_idx": fl.int64})
    n = dim_of(x, axis)
    uniq = dim_of(y, axis)
    positions = apply_op("Range", [index_scalar(0), dim_tensor(n), index_scalar(1)])
    firsts = apply_op("TensorScatterMin", [
        apply_op("Fill", [apply_op("Reshape", [dim_tensor(uniq), index_const([1])]),
                          dim_tensor(n)]),
        apply_op("ExpandDims", [inverse, index_scalar(-1)]), positions])
    if ctx.attr("sorted", 1):
        order = _sorted_order(ctx, y, axis)
        y = apply_op("GatherV2", [y, order, index_scalar(axis)])
        firsts = apply_op("GatherV2", [firsts, order, index_scalar(0)])
        counts = apply_op("GatherV2", [counts, order, index_scalar(0)])
        renumber = apply_op("ScatterNd", [apply_op("ExpandDims", [order, index_scalar(-1)]),
                                          apply_op("Range", [index_scalar(0), dim_tensor(uniq),
                                                             index_scalar(1)]),
                                          apply_op("Reshape", [dim_tensor(uniq),
                                                               index_const([1])])])
        inverse = apply_op("GatherV2", [renumber, inverse, index_scalar(0)])
    return [y, firsts, inverse, counts]


def _sorted_order(ctx, y: Tensor, axis: int) -> Tensor:
    """The permutation that sorts the slices of ``y`` along ``axis`` ascending."""
    rank = rank_of(y, ctx)
    if rank == 1:
        return ascending_order(y)
    rows, _ = _to_last(y, axis, rank)                  # [..., uniq] -> rows as columns
    inner = [d for k, d in enumerate(static_shape(y)) if k != axis]
    if None in inner:
        raise ctx.error("a sorted Unique along an axis needs the other dims known")
    columns = apply_op("Reshape", [rows, index_const([int(np.prod(inner, dtype=np.int64)), -1])])
    count = int(np.prod(inner, dtype=np.int64))
    order = None
    for j in reversed(range(count)):                   # least significant column first
        key = apply_op("GatherV2", [columns, index_scalar(j), index_scalar(0)])
        if order is not None:
            key = apply_op("GatherV2", [key, order, index_scalar(0)])
        step = ascending_order(key)
        order = step if order is None else apply_op("GatherV2", [order, step, index_scalar(0)])
    if order is None:
        order = apply_op("Range", [index_scalar(0), dim_tensor(dim_of(y, axis)), index_scalar(1)])
    return order


# --- ReverseSequence / CenterCropPad / Einsum --------------------------------------------------
def lower_reverse_sequence(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    return apply_op("ReverseSequence", [x, fl.cast(ctx.input(1), fl.int64)],
                    {"seq_dim": normalize_axis(ctx.attr("time_axis", 0), rank, ctx),
                     "batch_dim": normalize_axis(ctx.attr("batch_axis", 1), rank, ctx)})


def lower_center_crop_pad(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    shape = static_shape(x)
    target = [int(v) for v in ctx.const(1, "shape").reshape(-1)]
    axes = ctx.attr("axes", None)
    axes = list(range(rank)) if axes is None else [normalize_axis(a, rank, ctx) for a in axes]
    if len(axes) != len(target):
        raise ctx.error(f"shape has {len(target)} values for {len(axes)} axes")
    begin, size = [0] * rank, [-1] * rank
    pads = np.zeros([rank, 2], np.int64)
    for axis, want in zip(axes, target):
        dim = shape[axis]
        if dim is None:
            raise ctx.error(f"needs dim {axis} known")
        if want < dim:
            begin[axis], size[axis] = (dim - want) // 2, want
        elif want > dim:
            pads[axis] = [(want - dim) // 2, want - dim - (want - dim) // 2]
    y = x
    if any(b or s != -1 for b, s in zip(begin, size)):
        y = apply_op("Slice", [y, index_const(begin), index_const(size)])
    if pads.any():
        y = apply_op("Pad", [y, fl.constant(pads, dtype=fl.int64)])
    return y if y is not x else apply_op("Identity", [x])


def lower_einsum(ctx):
    inputs = [ctx.input(i) for i in range(len(ctx.inputs)) if ctx.has_input(i)]
    return fl.einsum(ctx.attr("equation"), *inputs)


LOWERINGS = {
    "TopK": [(1, None, lower_top_k)],
    "GatherND": [(11, None, lower_gather_nd)],
    "ScatterND": [(11, None, lower_scatter_nd)],
    "GatherElements": [(11, None, lower_gather_elements)],
    "ScatterElements": [(11, None, lower_scatter_elements)],
    "Scatter": [(9, 10, lower_scatter_elements)],
    "TensorScatter": [(24, None, lower_tensor_scatter)],
    "Compress": [(9, None, lower_compress)],
    "NonZero": [(9, None, lower_non_zero)],
    "Unique": [(11, None, lower_unique)],
    "ReverseSequence": [(10, None, lower_reverse_sequence)],
    "CenterCropPad": [(18, None, lower_center_crop_pad)],
    "Einsum": [(12, None, lower_einsum)],
}
