"""Image sampling and geometry: GridSample (flowc's ``_GridSample``), AffineGrid, Col2Im and
MaxUnpool.

- AffineGrid is ``theta @ [x, y(, z), 1]`` over a base grid of normalized pixel positions that
  the import computes from the (compile-time) size: one BatchMatMulV2 in float64, as the
  reference computes it, cast back to theta's type.
- Col2Im (N-D) sums each column entry into the image pixel its block and kernel offset land
  on: one ``UnsortedSegmentSum`` whose segment ids (computed at import from the static
  sizes) are the pixels, -1 (dropped) for positions in the padding.
- MaxUnpool writes X at its indices (flat over [N, C, spatial], in the unpooled shape
  kernel, strides and pads give) of zeros with ``TensorScatterUpdate`` (an index out of range
  is its error), padded at the end of each spatial dim to ``output_shape`` when given.
"""
from __future__ import annotations

import itertools

import numpy as np

import dsl as fl
from dsl.onnx.values import (binary, index_const, index_scalar, rank_of, shape_i64,
                             static_shape)
from dsl.ops import apply_op

_MODE_NAMES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
               "nearest": "nearest"}


def lower_grid_sample(ctx):
    x, grid = ctx.input(0), ctx.input(1)
    mode = ctx.attr("mode", "bilinear" if ctx.opset < 20 else "linear")
    if mode not in _MODE_NAMES:
        raise ctx.error(f"unknown mode '{mode}'")
    if ctx.opset < 20 and rank_of(x, ctx) != 4:
        raise ctx.error("GridSample before opset 20 takes 4-D inputs only")
    if not x.dtype.is_floating or not grid.dtype.is_floating:
        raise ctx.error(f"flowc samples float inputs at float grids (got {x.dtype} at "
                        f"{grid.dtype})")
    return apply_op("_GridSample", [x, grid],
                    {"mode": _MODE_NAMES[mode],
                     "padding_mode": ctx.attr("padding_mode", "zeros"),
                     "align_corners": bool(ctx.attr("align_corners", 0))})


def _positions(n: int, align: bool) -> np.ndarray:
    """The normalized coordinates of n pixels along one dim."""
    if align:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.full(n, -1.0)
    return (2.0 * np.arange(n) + 1.0) / n - 1.0


def base_grid(spatial, align: bool) -> np.ndarray:
    """[prod(spatial), r + 1]: per pixel (row-major), its coordinates innermost dim first
    (x, y[, z]) and a 1."""
    axes = np.meshgrid(*[_positions(n, align) for n in spatial], indexing="ij")
    cols = [a.reshape(-1) for a in reversed(axes)]
    return np.stack(cols + [np.ones(int(np.prod(spatial, dtype=np.int64)))], axis=1)


def lower_affine_grid(ctx):
    theta = ctx.input(0)
    size = [int(v) for v in ctx.const(1, "size").reshape(-1)]
    if len(size) not in (4, 5):
        raise ctx.error(f"size must be [N, C, H, W] or [N, C, D, H, W], got {size}")
    spatial, r = size[2:], len(size) - 2
    shape = static_shape(theta)
    if shape is not None and (len(shape) != 3 or shape[1:] not in ([r, r + 1], [None, None])):
        raise ctx.error(f"theta must be [N, {r}, {r + 1}] for a size of {len(size)} dims, got "
                        f"{shape}")
    base = fl.constant(base_grid(spatial, bool(ctx.attr("align_corners", 0))).T.copy())
    grid = apply_op("BatchMatMulV2", [fl.cast(theta, fl.float64), base])   # [N, r, pixels]
    grid = apply_op("Transpose", [grid, index_const([0, 2, 1])])
    grid = apply_op("Reshape", [grid, index_const([size[0], *spatial, r])])
    return fl.cast(grid, theta.dtype)


def _ints(ctx, name, n, default):
    value = ctx.attr(name, None)
    return [default] * n if not value else [int(v) for v in value]


def col2im_segments(image, block, dilations, pads, strides) -> np.ndarray:
    """[K * L] image pixel (row-major) of each (kernel offset, block) pair, -1 in the pads."""
    n = len(image)
    blocks = [(image[d] + pads[d] + pads[n + d] - (dilations[d] * (block[d] - 1) + 1))
              // strides[d] + 1 for d in range(n)]
    if any(b <= 0 for b in blocks):
        raise ValueError(f"no block of {list(block)} fits an image of {list(image)} with these "
                         "pads, strides and dilations")
    ids = []
    for k in itertools.product(*[range(b) for b in block]):
        for o in itertools.product(*[range(b) for b in blocks]):
            pos = [o[d] * strides[d] - pads[d] + k[d] * dilations[d] for d in range(n)]
            inside = all(0 <= p < image[d] for d, p in enumerate(pos))
            ids.append(int(np.ravel_multi_index(pos, image)) if inside else -1)
    return np.asarray(ids, np.int64), int(np.prod(blocks))


def lower_col2im(ctx):
    x = ctx.input(0)
    image = [int(v) for v in ctx.const(1, "image_shape").reshape(-1)]
    block = [int(v) for v in ctx.const(2, "block_shape").reshape(-1)]
    n = len(image)
    if len(block) != n or n == 0:
        raise ctx.error(f"image_shape {image} and block_shape {block} must have one size per "
                        "spatial dim")
    dilations, strides = _ints(ctx, "dilations", n, 1), _ints(ctx, "strides", n, 1)
    pads = _ints(ctx, "pads", 2 * n, 0)
    ids, blocks = col2im_segments(image, block, dilations, pads, strides)
    kernel = int(np.prod(block))
    shape = static_shape(x)
    if rank_of(x, ctx) != 3:
        raise ctx.error("input must be [N, C * prod(block_shape), L]")
    if shape[1] is not None and shape[1] % kernel:
        raise ctx.error(f"input dim 1 ({shape[1]}) is not a multiple of prod(block_shape) "
                        f"({kernel})")
    if shape[2] is not None and shape[2] != blocks:
        raise ctx.error(f"input dim 2 is {shape[2]}, but {blocks} blocks fit the image")
    dims = shape_i64(x)
    batch = apply_op("GatherV2", [dims, index_const([0]), index_scalar(0)])
    channels = binary("FloorDiv", apply_op("GatherV2", [dims, index_const([1]), index_scalar(0)]),
                      index_scalar(kernel))
    cols = apply_op("Reshape", [x, apply_op("ConcatV2", [[batch, channels,
                                                          index_const([kernel * blocks])],
                                                         index_scalar(0)])])
    cols = apply_op("Transpose", [cols, index_const([2, 0, 1])])      # [K * L, N, C]
    pixels = int(np.prod(image))
    summed = apply_op("UnsortedSegmentSum", [cols, fl.constant(ids, dtype=fl.int64),
                                             fl.constant(np.int64(pixels), dtype=fl.int64)])
    summed = apply_op("Transpose", [summed, index_const([1, 2, 0])])  # [N, C, pixels]
    return apply_op("Reshape", [summed, apply_op("ConcatV2", [[batch, channels,
                                                               index_const(image)],
                                                              index_scalar(0)])])


def lower_max_unpool(ctx):
    x, indices = ctx.input(0), ctx.input(1)
    rank = rank_of(x, ctx)
    n = rank - 2
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    if len(kernel) != n or n < 1:
        raise ctx.error(f"kernel_shape {kernel} must have one size per spatial dim of a rank "
                        f"{rank} input")
    strides, pads = _ints(ctx, "strides", n, 1), _ints(ctx, "pads", 2 * n, 0)
    spatial = static_shape(x)[2:]
    if None in spatial:
        raise ctx.error("needs the input's spatial dims known")
    unpooled = [(spatial[d] - 1) * strides[d] - (pads[d] + pads[n + d]) + kernel[d]
                for d in range(n)]
    dims = shape_i64(x)
    lead = apply_op("GatherV2", [dims, index_const([0, 1]), index_scalar(0)])
    total = binary("Mul", apply_op("Prod", [lead, index_scalar(0)]),
                   index_scalar(int(np.prod(unpooled))))
    zeros = apply_op("Fill", [apply_op("Reshape", [total, index_const([1])]),
                              fl.constant(np.zeros([], x.dtype.np), dtype=x.dtype)])
    flat_idx = apply_op("Reshape", [fl.cast(indices, fl.int64), index_const([-1, 1])])
    flat_x = apply_op("Reshape", [x, index_const([-1])])
    y = apply_op("TensorScatterUpdate", [zeros, flat_idx, flat_x])
    y = apply_op("Reshape", [y, apply_op("ConcatV2", [[lead, index_const(unpooled)],
                                                      index_scalar(0)])])
    out = ctx.optional_const(2, "output_shape")
    if out is None:
        return y
    target = [int(v) for v in out.reshape(-1)][-n:]
    if any(t < u for t, u in zip(target, unpooled)):
        raise ctx.error(f"output_shape {out.reshape(-1).tolist()} is smaller than the unpooled "
                        f"shape {unpooled}")
    paddings = [[0, 0], [0, 0]] + [[0, t - u] for t, u in zip(target, unpooled)]
    return apply_op("Pad", [y, fl.constant(np.asarray(paddings, np.int64), dtype=fl.int64)])


LOWERINGS = {
    "Col2Im": [(18, None, lower_col2im)],
    "MaxUnpool": [(9, None, lower_max_unpool)],
    "AffineGrid": [(20, None, lower_affine_grid)],
    "GridSample": [(16, None, lower_grid_sample)],
}
