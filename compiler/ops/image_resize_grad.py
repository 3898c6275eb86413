"""The gradients of image resizing as TensorFlow's raw ops (``tensorflow/core/ops/image_ops.cc``):
ResizeBilinearGrad and ResizeNearestNeighborGrad, the adjoints of ResizeBilinear and
ResizeNearestNeighbor (``compiler/ops/image_resize.py``) with the same coordinate rules.

- ``ResizeBilinearGrad(grads: f32 [batch, resized_h, resized_w, channels], original_image: T)``
  is ``original_image``'s shape and type T (float types): each resized pixel's gradient is
  added to its four source pixels with the weights the forward op gave them ((1 - ly)(1 - lx),
  (1 - ly) lx, ly (1 - lx), ly lx; clamped neighbours add into the same pixel), the products in
  float32 and the sums in T, as TensorFlow's CPU kernel does; only the original's height and
  width are read (its batch and depth must be the grads');
- ``ResizeNearestNeighborGrad(grads: T, size: i32 [orig_h, orig_w])`` is [batch, orig_h,
  orig_w, channels] of T: each resized pixel's gradient is added to the one pixel the forward
  op copied it from (integer types wrap, as the sums of TensorFlow's kernel do).

The C lowering is ``compiler/codegen/c_ops/image_resize_grad.py``; the gradient functions are
``dsl/grad/image_resize_grad.py``.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import _partial_vector, _reference
from compiler.ops.image_resize import _FLAGS, _bilinear_taps, nearest_index


def _rank4(ctx, i: int, what: str):
    s = ctx.input_shape(i)
    if s is not None and len(s) != 4:
        raise ctx.error(f"{what} must be 4-dimensional, got shape {shape_str(s)}")
    return s if s is not None else (None,) * 4


def _check_flags(ctx) -> None:
    if ctx.attr("align_corners") and ctx.attr("half_pixel_centers"):
        raise ctx.error("If half_pixel_centers is True, align_corners must be False.")


def _same(ctx, what: str, a, b):
    """The dim both shapes give (``a`` or ``b`` where one is unknown); an error if they differ."""
    if a is not None and b is not None and a != b:
        raise ctx.error(f"{what} differs between grads ({a}) and original_image ({b})")
    return a if a is not None else b


def _bilinear_grad_shape(ctx):
    _check_flags(ctx)
    g, x = _rank4(ctx, 0, "input_grad"), _rank4(ctx, 1, "original_image")
    for k, what in ((1, "resized height"), (2, "resized width")):
        if g[k] == 0:
            raise ctx.error(f"resized dimensions must be positive, got {what} 0")
    for k in (1, 2):
        if x[k] == 0:
            raise ctx.error("original dimensions must be positive, got shape "
                            f"{shape_str(tuple(x))}")
    return [(_same(ctx, "batch", g[0], x[0]), x[1], x[2], _same(ctx, "depth", g[3], x[3]))]


def _nearest_grad_shape(ctx):
    _check_flags(ctx)
    g = _rank4(ctx, 0, "input")
    ss = ctx.input_shape(1)
    if ss is not None and (len(ss) != 1 or ss[0] not in (None, 2)):
        raise ctx.error(f"shape_t must have two elements, got shape {shape_str(ss)}")
    hw = _partial_vector(ctx, 1) if ctx.node is not None else None
    if hw is None or len(hw) != 2:
        hw = [None, None]
    if any(v is not None and v <= 0 for v in hw):
        raise ctx.error(f"shape_t's elements must be positive, got {hw}")
    return [(g[0], hw[0], hw[1], g[3])]


def _check_grads(g: np.ndarray, what: str = "input_grad") -> None:
    if g.ndim != 4:
        raise ValueError(f"{what} must be 4-dimensional{list(g.shape)}")


@_reference
def _bilinear_grad_kernel(ctx, grads, original):
    _check_grads(grads)
    if original.ndim != 4:
        raise ValueError(f"original_image must be 4-dimensional{list(original.shape)}")
    n, rh, rw, c = grads.shape
    if rh <= 0 or rw <= 0:
        raise ValueError("resized dimensions must be positive")
    oh, ow = original.shape[1:3]
    if oh <= 0 or ow <= 0:
        raise ValueError("original dimensions must be positive")
    if (n, c) != (original.shape[0], original.shape[3]):
        raise ValueError(f"grads {list(grads.shape)} and original_image "
                         f"{list(original.shape)} differ in batch or depth")
    ac, hp = ctx.attrs["align_corners"], ctx.attrs["half_pixel_centers"]
    out = np.zeros((n, oh, ow, c), original.dtype)
    if out.size == 0:
        return out
    y0, y1, ly = _bilinear_taps(oh, rh, ac, hp)
    x0, x1, lx = _bilinear_taps(ow, rw, ac, hp)
    one = np.float32(1)
    g = grads.astype(np.float32)
    for ys, wy in ((y0, one - ly), (y1, ly)):
        for xs, wx in ((x0, one - lx), (x1, lx)):
            # (grad * y weight) * x weight in float32, then added in T
            part = (g * wy[None, :, None, None]) * wx[None, None, :, None]
            np.add.at(out, (slice(None), ys[:, None], xs[None, :]), part.astype(out.dtype))
    return out


@_reference
def _nearest_grad_kernel(ctx, grads, size):
    _check_grads(grads, "input")
    flat = np.reshape(size, -1)
    if size.ndim != 1:
        raise ValueError(f"shape_t must be 1-dimensional{list(size.shape)}")
    if flat.size != 2:
        raise ValueError(f"shape_t must have two elements{list(size.shape)}")
    oh, ow = int(flat[0]), int(flat[1])
    if oh <= 0 or ow <= 0:
        raise ValueError("shape_t's elements must be positive")
    n, rh, rw, c = grads.shape
    out = np.zeros((n, oh, ow, c), grads.dtype)
    if out.size == 0 or grads.size == 0:
        return out
    ac, hp = ctx.attrs["align_corners"], ctx.attrs["half_pixel_centers"]
    ys, xs = nearest_index(oh, rh, ac, hp), nearest_index(ow, rw, ac, hp)
    with np.errstate(over="ignore"):
        np.add.at(out, (slice(None), ys[:, None], xs[None, :]), grads)
    return out


register_op("ResizeBilinearGrad", inputs=["grads: f32", "original_image: T"],
            outputs=["output: T"], attrs=["T: {f32, bf16, f16, f64}"] + _FLAGS,
            shape=_bilinear_grad_shape, kernel=_bilinear_grad_kernel, group="movement",
            doc="The gradient of ResizeBilinear with respect to its images: grads [batch, "
                "resized_h, resized_w, channels] added back onto original_image's pixels.")

register_op("ResizeNearestNeighborGrad", inputs=["grads: T", "size: i32"],
            outputs=["output: T"], attrs=["T: {u8, i8, i32, f16, f32, f64, bf16}"] + _FLAGS,
            shape=_nearest_grad_shape, kernel=_nearest_grad_kernel, group="movement",
            doc="The gradient of ResizeNearestNeighbor with respect to its images: grads "
                "[batch, resized_h, resized_w, channels] summed into [batch, size[0], size[1], "
                "channels].")
