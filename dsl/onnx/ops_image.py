"""Image sampling and geometry: GridSample (flowc's ``_GridSample``) and AffineGrid.

AffineGrid is ``theta @ [x, y(, z), 1]`` over a base grid of normalized pixel positions that
the import computes from the (compile-time) size: one BatchMatMulV2 in float64, as the
reference computes it, cast back to theta's type.
"""
from __future__ import annotations

import numpy as np

import dsl as fl
from dsl.onnx.values import index_const, rank_of, static_shape
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


LOWERINGS = {
    "AffineGrid": [(20, None, lower_affine_grid)],
    "GridSample": [(16, None, lower_grid_sample)],
}
