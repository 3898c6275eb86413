"""``_RoiAlign``: flowc's own op for ONNX's RoiAlign (Mask R-CNN's pooling of regions of
interest; TensorFlow's nearest op, CropAndResize, samples differently).

- ``input`` [N, C, H, W]; ``rois`` [R, 4] boxes ``(x1, y1, x2, y2)`` in input pixels times
  ``spatial_scale``; ``batch_indices`` [R] name each box's image (an index outside [0, N) is
  an error, found before anything is written). The output is
  ``[R, C, output_height, output_width]``.
- Each output bin averages (``mode="avg"``) or takes the maximum of (``"max"``) a grid of
  ``sampling_ratio`` x ``sampling_ratio`` bilinear samples (``sampling_ratio = 0``: ceil(bin
  size) samples per dim). With ``half_pixel`` the box is shifted by -0.5 pixel; without it
  boxes are at least 1 pixel wide and high. Samples more than a pixel outside the image
  read 0; ``max`` takes the largest of the four weighted corner values of each sample, as
  ONNX's reference (and onnxruntime) do.
- Coordinates and weights are computed in double precision, as the reference does.

``_RoiAlignGrad`` is its gradient with respect to the input (``dsl/grad/roi_align_grad.py``;
the boxes get none, as in torchvision): each bin's gradient goes to the corners of its samples
by their weights (over the sample count for ``avg``; for ``max`` to the one weighted corner
that was the maximum, the first in sample and corner order).

The C lowering is ``compiler/codegen/c_ops/roi_align.py``.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op

MAX_SAMPLES = 1 << 20       # per bin and dim: a box needing more is an error, not a stall


def _roi_align_shape(ctx) -> list:
    x, rois, idx = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
    if ctx.attrs["mode"] not in ("avg", "max"):
        raise ctx.error(f"mode must be 'avg' or 'max', got '{ctx.attrs['mode']}'")
    if x is not None and len(x) != 4:
        raise ctx.error(f"input must be [N, C, H, W], got rank {len(x)}")
    if rois is not None and (len(rois) != 2 or rois[1] not in (None, 4)):
        raise ctx.error(f"rois must be [num_rois, 4], got {list(rois)}")
    if idx is not None and len(idx) != 1:
        raise ctx.error(f"batch_indices must be [num_rois], got {list(idx)}")
    r = rois[0] if rois is not None else None
    if idx is not None and idx[0] is not None:
        if r is not None and r != idx[0]:
            raise ctx.error(f"{idx[0]} batch indices for {r} rois")
        r = idx[0]
    c = x[1] if x is not None else None
    return [(r, c, ctx.attrs["output_height"], ctx.attrs["output_width"])]


def bin_grid(ctx, roi: np.ndarray, pooled_h: int, pooled_w: int):
    """(start_h, start_w, bin_h, bin_w, grid_h, grid_w) of one box."""
    scale, half = float(ctx.attrs["spatial_scale"]), bool(ctx.attrs["half_pixel"])
    offset = 0.5 if half else 0.0
    start_w, start_h = roi[0] * scale - offset, roi[1] * scale - offset
    width, height = roi[2] * scale - offset - start_w, roi[3] * scale - offset - start_h
    if not half:
        width, height = max(width, 1.0), max(height, 1.0)
    bin_h, bin_w = height / pooled_h, width / pooled_w
    ratio = int(ctx.attrs["sampling_ratio"])
    grids = []
    for size in (bin_h, bin_w):
        g = float(ratio) if ratio > 0 else math.ceil(size) if math.isfinite(size) else math.nan
        if not 0 <= g <= MAX_SAMPLES:
            raise ExecutionError(f"a box [{', '.join(str(float(v)) for v in roi)}] needs "
                                 f"{g} samples per bin", ctx.node)
        grids.append(int(g))
    return start_h, start_w, bin_h, bin_w, grids[0], grids[1]


def _axis_samples(start, bin_size, grid, pooled, size):
    """Per (bin, sample) along one axis: low index, high index, high weight, valid."""
    k = np.arange(pooled)[:, None]
    i = np.arange(grid)[None, :]
    pos = start + k * bin_size + (i + 0.5) * bin_size / grid
    valid = (pos >= -1.0) & (pos <= size) & (size > 0)
    pos = np.maximum(pos, 0.0)
    low = np.trunc(pos).astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    pos = np.where(at_edge, low, pos)
    frac = pos - low
    return (np.where(valid, low, 0), np.where(valid, high, 0), np.where(valid, frac, 0.0),
            valid)


def _check_boxes(ctx, n, rois, batch_indices) -> None:
    if rois.ndim != 2 or rois.shape[1] != 4 or batch_indices.shape != (rois.shape[0],):
        raise ExecutionError(f"rois {list(rois.shape)} and batch_indices "
                             f"{list(batch_indices.shape)} do not match", ctx.node)
    bad = np.nonzero((batch_indices < 0) | (batch_indices >= n))[0]
    if bad.size:
        raise ExecutionError(f"batch_indices[{bad[0]}] = {batch_indices[bad[0]]} is not in "
                             f"[0, {n})", ctx.node)


def box_corners(ctx, roi, height: int, width: int):
    """The four weighted corners of every sample of one box: [(rows, cols, weights)], each
    [ph, gh, pw, gw] (weight 0 for samples outside the image), and the sample count."""
    ph, pw = ctx.attrs["output_height"], ctx.attrs["output_width"]
    sh, sw, bh, bw, gh, gw = bin_grid(ctx, roi.astype(np.float64), ph, pw)
    yl, yh, ly, vy = _axis_samples(sh, bh, gh, ph, height)
    xl, xh, lx, vx = _axis_samples(sw, bw, gw, pw, width)
    ok = (vy[:, :, None, None] & vx[None, None, :, :])
    hy, hx = 1.0 - ly, 1.0 - lx
    corners = []
    for yi, xi, wy, wx in ((yl, xl, hy, hx), (yl, xh, hy, lx), (yh, xl, ly, hx),
                           (yh, xh, ly, lx)):
        w = np.where(ok, wy[:, :, None, None] * wx[None, None, :, :], 0.0)
        rows = np.broadcast_to(yi[:, :, None, None], w.shape)
        cols = np.broadcast_to(xi[None, None, :, :], w.shape)
        corners.append((rows, cols, w))
    return corners, gh * gw


def _roi_align_ref(ctx, x, rois, batch_indices):
    n, ch, height, width = x.shape
    ph, pw = ctx.attrs["output_height"], ctx.attrs["output_width"]
    _check_boxes(ctx, n, rois, batch_indices)
    out = np.zeros((rois.shape[0], ch, ph, pw), np.float64)
    for r in range(rois.shape[0]):
        corners, samples = box_corners(ctx, rois[r], height, width)
        img = x[int(batch_indices[r])].astype(np.float64)           # [C, H, W]
        parts = [w * img[:, rows, cols] for rows, cols, w in corners]  # [C, ph, gh, pw, gw]
        if ctx.attrs["mode"] == "avg":
            total = ((parts[0] + parts[1]) + parts[2]) + parts[3]
            out[r] = total.sum(axis=(2, 4)) / max(samples, 1)
        elif samples:
            out[r] = np.maximum.reduce(parts).max(axis=(2, 4))
    return out.astype(x.dtype)


def _roi_align_grad_ref(ctx, dy, x, rois, batch_indices):
    n, ch, height, width = x.shape
    ph, pw = ctx.attrs["output_height"], ctx.attrs["output_width"]
    _check_boxes(ctx, n, rois, batch_indices)
    if dy.shape != (rois.shape[0], ch, ph, pw):
        raise ExecutionError(f"the gradient has shape {list(dy.shape)}, not "
                             f"{[rois.shape[0], ch, ph, pw]}", ctx.node)
    dx = np.zeros((n, ch, height, width), np.float64)
    for r in range(rois.shape[0]):
        corners, samples = box_corners(ctx, rois[r], height, width)
        b = int(batch_indices[r])
        g = dy[r].astype(np.float64)                                  # [C, ph, pw]
        if ctx.attrs["mode"] == "avg":
            for rows, cols, w in corners:
                share = g[:, :, None, :, None] * w / max(samples, 1)     # [C, ph, gh, pw, gw]
                np.add.at(dx[b], (slice(None), rows, cols), share)
            continue
        if not samples:
            continue
        img = x[b].astype(np.float64)
        # candidates in the kernel's order: sample (row-major over gh, gw), then corner
        values = np.stack([w * img[:, rows, cols] for rows, cols, w in corners], -1)
        values = np.moveaxis(values, 3, 2).reshape(ch, ph, pw, -1)   # [C, ph, pw, S * 4]
        best = np.argmax(values, axis=-1)                             # the first maximum
        sample, corner = np.divmod(best, 4)
        gw = corners[0][2].shape[3]
        iy, ix = np.divmod(sample, gw)
        for q, (rows, cols, w) in enumerate(corners):
            pick = corner == q                                        # [C, ph, pw]
            c_idx, i_idx, j_idx = np.nonzero(pick)
            yy = rows[i_idx, iy[pick], j_idx, ix[pick]]
            xx = cols[i_idx, iy[pick], j_idx, ix[pick]]
            ww = w[i_idx, iy[pick], j_idx, ix[pick]]
            np.add.at(dx[b], (c_idx, yy, xx), g[c_idx, i_idx, j_idx] * ww)
    return dx.astype(x.dtype)


register_op("_RoiAlignGrad", inputs=["grad: T", "input: T", "rois: T", "batch_indices: Tidx"],
            outputs=["output: T"],
            attrs=["T: {float}", "Tidx: {i32, i64} = i64", 'mode: string = "avg"',
                   "output_height: int = 1", "output_width: int = 1", "sampling_ratio: int = 0",
                   "spatial_scale: float = 1.0", "half_pixel: bool = true"],
            shape=lambda ctx: [ctx.input_shape(1)], kernel=_roi_align_grad_ref, group="other",
            doc="The gradient of _RoiAlign with respect to its input.")


register_op("_RoiAlign", inputs=["input: T", "rois: T", "batch_indices: Tidx"],
            outputs=["output: T"],
            attrs=["T: {float}", "Tidx: {i32, i64} = i64", 'mode: string = "avg"',
                   "output_height: int = 1", "output_width: int = 1", "sampling_ratio: int = 0",
                   "spatial_scale: float = 1.0", "half_pixel: bool = true"],
            shape=_roi_align_shape, kernel=_roi_align_ref, group="other",
            doc="Pools boxes rois [R, 4] (x1, y1, x2, y2) of images input [N, C, H, W] to "
                "[R, C, output_height, output_width] bins of bilinear samples (ONNX's RoiAlign).")
