"""Normalization and pooling ops composed from flowc ops: GroupNormalization,
MeanVarianceNormalization, LRN (local response normalization across channels), LpPool, and
the deprecated Upsample (nearest or linear, ``asymmetric`` coordinates)."""
from __future__ import annotations

import math
from typing import List

import numpy as np

import dsl as fl
from dsl.onnx import pool_windows
from dsl.onnx.dtypes import flowc_dtype
from dsl.onnx.ops_attention import dim_of, reshape
from dsl.onnx.ops_nn import (_TO_NCHW, _by_window_offsets, _from_2d, _pad_nhwc, _pool_setup,
                             _transpose, _windows)
from dsl.onnx.values import (binary, index_const, index_scalar, normalize_axis, rank_of, scalar,
                             shape_i64, static_shape, unary)
from dsl.ops import apply_op
from dsl.tensor import Tensor


def _channel(p: Tensor, rank: int) -> Tensor:
    """A per-channel [C] tensor as [C, 1, ...] (broadcasts over NC... data)."""
    return apply_op("Reshape", [p, index_const([-1] + [1] * (rank - 2))])


def lower_group_norm(ctx):
    """Mean and variance per instance and group of channels (in ``stash_type`` precision),
    then a per-channel scale and bias (per-group before opset 21)."""
    x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
    rank = rank_of(x, ctx)
    groups = int(ctx.attr("num_groups"))
    channels = static_shape(x)[1]
    work = x
    if ctx.opset >= 21:
        stash = flowc_dtype(ctx.attr("stash_type", 1))
        if stash is not None and stash != x.dtype:
            work = fl.cast(x, stash)
    grouped = reshape(work, [dim_of(work, 0), groups, -1])
    mean = apply_op("Mean", [grouped, index_const([2])], {"keep_dims": True})
    centered = binary("Sub", grouped, mean)
    var = apply_op("Mean", [binary("Mul", centered, centered), index_const([2])],
                   {"keep_dims": True})
    inv = unary("Rsqrt", binary("AddV2", var, scalar(ctx.attr("epsilon", 1e-5), var)))
    y = apply_op("Reshape", [binary("Mul", centered, inv), shape_i64(x)])
    if y.dtype != x.dtype:
        y = fl.cast(y, x.dtype)
    if ctx.opset < 21:                  # scale and bias per group: spread over its channels
        if channels is None:
            raise ctx.error("per-group scale and bias need the channel count known")
        per_group = np.arange(channels) // (channels // groups)
        scale = apply_op("GatherV2", [scale, index_const(per_group), index_scalar(0)])
        bias = apply_op("GatherV2", [bias, index_const(per_group), index_scalar(0)])
    return binary("AddV2", binary("Mul", y, _channel(scale, rank)), _channel(bias, rank))


def lower_mean_variance_norm(ctx):
    """(x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over ``axes`` (ONNX's function body)."""
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    axes = [normalize_axis(a, rank, ctx) for a in ctx.attr("axes", [0, 2, 3])]
    mean = apply_op("Mean", [x, index_const(axes)], {"keep_dims": True})
    mean_square = apply_op("Mean", [binary("Mul", x, x), index_const(axes)], {"keep_dims": True})
    std = unary("Sqrt", binary("Sub", mean_square, binary("Mul", mean, mean)))
    return binary("RealDiv", binary("Sub", x, mean), binary("AddV2", std, scalar(1e-9, x)))


def lower_lrn(ctx):
    """x / (bias + alpha / size * sum of x^2 over the channels c - (size-1)//2 ..
    c + ceil((size-1)/2)) ** beta."""
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    channels = static_shape(x)[1]
    if channels is None:
        raise ctx.error("needs the channel count known")
    size = int(ctx.attr("size"))
    before, after = (size - 1) // 2, math.ceil((size - 1) / 2)
    pads = np.zeros([rank, 2], np.int64)
    pads[1] = [before, after]
    padded = apply_op("Pad", [binary("Mul", x, x), fl.constant(pads, dtype=fl.int64)])
    windows: List[Tensor] = []
    for k in range(size):
        begin = [0] * rank
        extent = [-1] * rank
        begin[1], extent[1] = k, channels
        windows.append(apply_op("Slice", [padded, index_const(begin), index_const(extent)]))
    total = windows[0] if size == 1 else apply_op("AddN", [windows])
    alpha, beta, bias = ctx.attr("alpha", 1e-4), ctx.attr("beta", 0.75), ctx.attr("bias", 1.0)
    base = binary("AddV2", binary("Mul", total, scalar(alpha / size, x)), scalar(bias, x))
    return binary("RealDiv", x, binary("Pow", base, scalar(beta, x)))


def lower_lp_pool(ctx):
    """(sum over each window of |x|^p) ** (1/p): the mean of |x|^p over the zero-padded
    window (every position counted) times the window's size."""
    x = ctx.input(0)
    p = ctx.attr("p", 2)
    powered = binary("Mul", x, x) if p == 2 else unary("Abs", x) if p == 1 else \
        binary("Pow", unary("Abs", x), scalar(p, x))
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    count = scalar(float(np.prod(kernel)), x)
    if _by_window_offsets(ctx):
        win, _ = _windows(ctx)
        mean = pool_windows.average_pool(powered, win, win.pads)
        total = binary("Mul", mean, count)
    else:
        xh, attrs, pads, _, spatial = _pool_setup(ctx)
        xh = _transpose(_as_2d_like(ctx, powered, spatial), [0, 2, 3, 1])
        if any(q != (0, 0) for q in pads):
            xh = _pad_nhwc(xh, pads)
        total = _from_2d(_transpose(binary("Mul", apply_op("AvgPool", [xh], attrs), count),
                                    _TO_NCHW), spatial)
    if p == 1:
        return total
    if p == 2:
        return unary("Sqrt", total)
    return binary("Pow", total, scalar(1.0 / p, x))


def _as_2d_like(ctx, x: Tensor, spatial: int) -> Tensor:
    return apply_op("ExpandDims", [x, index_scalar(2)]) if spatial == 1 else x


def lower_upsample(ctx):
    """Each axis with a scale s gets floor(n * s) entries; output j reads input j / s
    (nearest: its floor; linear: the two neighbours, weighted)."""
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    scales = ctx.attr("scales") if ctx.opset < 9 else ctx.const(1, "scales")
    scales = [float(s) for s in np.asarray(scales).reshape(-1)]
    if len(scales) != rank:
        raise ctx.error(f"needs {rank} scales, got {len(scales)}")
    mode = ctx.attr("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise ctx.error(f"unknown mode '{mode}'")
    shape = static_shape(x)
    y = x
    for axis, s in enumerate(scales):
        if s == 1.0:
            continue
        n = shape[axis]
        if n is None:
            raise ctx.error(f"needs dim {axis} known")
        m = int(math.floor(n * s))
        source = np.arange(m) / s
        if mode == "nearest":
            idx = np.minimum(np.floor(source).astype(np.int64), n - 1)
            y = apply_op("GatherV2", [y, index_const(idx), index_scalar(axis)])
            continue
        if not x.dtype.is_floating:
            raise ctx.error("linear upsampling needs a floating-point input")
        lo = np.minimum(np.floor(source).astype(np.int64), n - 1)
        hi = np.minimum(lo + 1, n - 1)
        weight = np.clip(source - lo, 0, 1)
        matrix = np.zeros([n, m])
        np.add.at(matrix, (lo, np.arange(m)), 1 - weight)
        np.add.at(matrix, (hi, np.arange(m)), weight)
        perm = [k for k in range(rank) if k != axis] + [axis]
        back = [perm.index(k) for k in range(rank)]
        moved = _transpose(y, perm)
        rows = apply_op("Reshape", [moved, index_const([-1, n])])
        mapped = apply_op("MatMul", [rows, fl.constant(matrix.astype(x.dtype.np), dtype=x.dtype)])
        out_moved = apply_op("ConcatV2", [[apply_op("Slice", [shape_i64(moved), index_const([0]),
                                                              index_const([rank - 1])]),
                                           index_const([m])], index_scalar(0)])
        y = _transpose(apply_op("Reshape", [mapped, out_moved]), back)
    return y if y is not x else apply_op("Identity", [x])


LOWERINGS = {
    "GroupNormalization": [(18, None, lower_group_norm)],
    "MeanVarianceNormalization": [(9, None, lower_mean_variance_norm)],
    "LRN": [(1, None, lower_lrn)],
    "LpPool": [(1, None, lower_lp_pool)],
    "Upsample": [(7, 9, lower_upsample)],
}
