"""Image resizing as TensorFlow's raw ops: ResizeBilinear and ResizeNearestNeighbor
(``tf.image.resize``, Keras' ``Resizing`` and ``UpSampling2D(interpolation="bilinear")``).

Both take ``images`` [batch, height, width, channels] and ``size`` (int32 [new_height,
new_width]); attrs ``align_corners`` and ``half_pixel_centers`` choose how an output pixel maps
to input coordinates, computed in float32 as TensorFlow's kernels do:

- scale = (in - 1) / (out - 1) when align_corners and out > 1, else in / out;
- bilinear: in = (o + 0.5) * scale - 0.5 with half_pixel_centers, else o * scale; the two
  neighbours floor(in) and ceil(in) clamped to the image, weight in - floor(in); the output is
  float32 whatever the input type;
- nearest: in = (o + 0.5) * scale with half_pixel_centers, else o * scale; rounded (half away
  from zero) when align_corners, else floored; clamped to the image; the output has the input's
  type.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import _reference

_FLAGS = ["align_corners: bool = false", "half_pixel_centers: bool = false"]
# TensorFlow's types; bilinear does not take half and bfloat16 images yet (not in C).
_NEAREST_ATTRS = ["T: {i8, u8, i16, u16, i32, i64, bf16, f16, f32, f64}"] + _FLAGS
_BILINEAR_ATTRS = ["T: {i8, u8, i16, u16, i32, i64, f32, f64}"] + _FLAGS


def resize_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _resize_shape(ctx):
    s, ss = ctx.input_shape(0), ctx.input_shape(1)
    if ctx.attr("align_corners") and ctx.attr("half_pixel_centers"):
        raise ctx.error("If half_pixel_centers is True, align_corners must be False.")
    if s is not None and len(s) != 4:
        raise ctx.error(f"input must be 4-dimensional, got shape {shape_str(s)}")
    if ss is not None and (len(ss) != 1 or ss[0] not in (None, 2)):
        raise ctx.error(f"shape_t must have two elements, got shape {shape_str(ss)}")
    size = ctx.input_value(1)
    hw = (None, None)
    if size is not None:
        hw = tuple(int(v) for v in np.reshape(size, -1))
        if len(hw) != 2 or min(hw) <= 0:
            raise ctx.error(f"output dimensions must be positive, got {list(hw)}")
    if s is None:
        return [(None, hw[0], hw[1], None)]
    return [(s[0], hw[0], hw[1], s[3])]


def _check(x: np.ndarray, size: np.ndarray, attrs) -> tuple:
    if x.ndim != 4:
        raise ValueError(f"input must be 4-dimensional{list(x.shape)}")
    flat = np.reshape(size, -1)
    if size.ndim != 1 or flat.size != 2:
        raise ValueError(f"shape_t must have two elements{list(size.shape)}")
    out_h, out_w = int(flat[0]), int(flat[1])
    if out_h <= 0 or out_w <= 0:
        raise ValueError("output dimensions must be positive")
    if (x.shape[1] <= 0 or x.shape[2] <= 0) and x.shape[0] * x.shape[3] > 0:
        raise ValueError("input image must be of non-zero size")
    return out_h, out_w


def _bilinear_taps(in_size: int, out_size: int, align_corners: bool, half_pixel: bool):
    """(lower index, upper index, weight of the upper) per output index, in float32."""
    scale = resize_scale(in_size, out_size, align_corners)
    o = np.arange(out_size, dtype=np.float32)
    pos = ((o + np.float32(0.5)) * scale - np.float32(0.5)) if half_pixel else o * scale
    pos = pos.astype(np.float32)
    floor = np.floor(pos)
    lower = np.maximum(floor, 0).astype(np.int64)
    upper = np.minimum(np.ceil(pos), in_size - 1).astype(np.int64)
    return lower, upper, (pos - floor).astype(np.float32)


@_reference
def _bilinear_kernel(ctx, x, size):
    out_h, out_w = _check(x, size, ctx.attrs)
    ac, hp = ctx.attrs["align_corners"], ctx.attrs["half_pixel_centers"]
    n, h, w, c = x.shape
    if x.size == 0:
        return np.zeros((n, out_h, out_w, c), np.float32)
    x = x.astype(np.float32)
    y0, y1, yl = _bilinear_taps(h, out_h, ac, hp)
    x0, x1, xl = _bilinear_taps(w, out_w, ac, hp)
    xl = xl[None, None, :, None]
    top_left, top_right = x[:, y0][:, :, x0], x[:, y0][:, :, x1]
    bottom_left, bottom_right = x[:, y1][:, :, x0], x[:, y1][:, :, x1]
    top = top_left + (top_right - top_left) * xl
    bottom = bottom_left + (bottom_right - bottom_left) * xl
    return (top + (bottom - top) * yl[None, :, None, None]).astype(np.float32)


def nearest_index(in_size: int, out_size: int, align_corners: bool, half_pixel: bool):
    scale = resize_scale(in_size, out_size, align_corners)
    o = np.arange(out_size, dtype=np.float32)
    pos = ((o + np.float32(0.5)) * scale if half_pixel else o * scale).astype(np.float32)
    # roundf: half away from zero
    idx = np.sign(pos) * np.floor(np.abs(pos) + np.float32(0.5)) if align_corners \
        else np.floor(pos)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half_pixel else idx


@_reference
def _nearest_kernel(ctx, x, size):
    out_h, out_w = _check(x, size, ctx.attrs)
    ac, hp = ctx.attrs["align_corners"], ctx.attrs["half_pixel_centers"]
    n, h, w, c = x.shape
    if x.size == 0:
        return np.zeros((n, out_h, out_w, c), x.dtype)
    ys, xs = nearest_index(h, out_h, ac, hp), nearest_index(w, out_w, ac, hp)
    return np.ascontiguousarray(x[:, ys][:, :, xs])


register_op("ResizeBilinear", inputs=["images: T", "size: i32"],
            outputs=["resized_images: f32"], attrs=_BILINEAR_ATTRS, shape=_resize_shape,
            kernel=_bilinear_kernel, group="movement",
            doc="Resizes images [batch, height, width, channels] to size [new_height, "
                "new_width] by bilinear interpolation (float32 output).")

register_op("ResizeNearestNeighbor", inputs=["images: T", "size: i32"],
            outputs=["resized_images: T"], attrs=_NEAREST_ATTRS, shape=_resize_shape,
            kernel=_nearest_kernel, group="movement", half_native=True,
            doc="Resizes images [batch, height, width, channels] to size [new_height, "
                "new_width], each output pixel the nearest input pixel.")
