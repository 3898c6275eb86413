"""``LRN`` and ``LRNGrad``: TensorFlow's local response normalization over the last dim of a
4-D input (the depth of NHWC), with TensorFlow's inputs, attrs and defaults
(``tensorflow/core/ops/nn_ops.cc``):

- ``sqr_sum[a, b, c, d] = sum(input[a, b, c, d - depth_radius : d + depth_radius + 1] ** 2)``
  (the window cut at the ends of the depth), and
  ``output = input / (bias + alpha * sqr_sum) ** beta``;
- ``LRNGrad(input_grads, input_image, output_image)`` is its gradient with respect to
  ``input``, as TensorFlow's CPU kernel computes it: for each depth ``i`` and each ``j`` of
  its window, ``output[j] += input_grads[i] * ((i == j) * norm_i ** -beta - 2 * alpha * beta
  * input_image[j] * output_image[i] / norm_i)`` with ``norm_i = bias + alpha * sqr_sum_i``.

TensorFlow's ``T`` is half, bfloat16 or float; flowc also takes double (the gradient checks
run in it). The sums accumulate in the input's type (f16/bf16 compute in f32). The C lowering is
``compiler/codegen/c_ops/lrn.py``; the gradient function ``dsl/grad/lrn_grad.py``.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import merge_shapes, shape_str

ATTRS = ["depth_radius: int = 5", "bias: float = 1.0", "alpha: float = 1.0",
         "beta: float = 0.5", "T: {float}"]


def _check_rank4(ctx, i: int, name: str):
    s = ctx.input_shape(i)
    if s is not None and len(s) != 4:
        raise ctx.error(f"{name} must be 4-dimensional, got shape {shape_str(s)}")
    return s


def _check_radius(ctx) -> None:
    if ctx.attr("depth_radius") < 0:
        raise ctx.error(f"depth_radius must be >= 0, got {ctx.attr('depth_radius')}")


def _lrn_shape(ctx) -> list:
    _check_radius(ctx)
    return [_check_rank4(ctx, 0, "input")]


def _lrn_grad_shape(ctx) -> list:
    _check_radius(ctx)
    shapes = [_check_rank4(ctx, i, n) for i, n in
              enumerate(("input_grads", "input_image", "output_image"))]
    out = shapes[0]
    for s in shapes[1:]:
        try:
            out = merge_shapes(out, s)
        except ValueError:
            raise ctx.error("input_grads, input_image and output_image must have the same "
                            f"shape, got {', '.join(shape_str(x) for x in shapes)}") from None
    return [out]


def _sqr_sum(x: np.ndarray, radius: int) -> np.ndarray:
    """The sum of squares over each depth's window (cut at the ends)."""
    sq = x * x
    depth = x.shape[-1]
    out = np.zeros_like(x)
    for d in range(depth):
        lo, hi = max(0, d - radius), min(depth, d + radius + 1)
        out[..., d] = np.sum(sq[..., lo:hi], axis=-1)
    return out


def _scalars(ctx, dtype):
    a = ctx.attrs
    return (int(a["depth_radius"]), dtype.type(a["bias"]), dtype.type(a["alpha"]),
            dtype.type(a["beta"]))


def _check_ref_input(ctx, x: np.ndarray, name: str) -> None:
    if x.ndim != 4:
        raise ExecutionError(f"{name} must be 4-dimensional, got shape {list(x.shape)}",
                             ctx.node)


def _lrn_ref(ctx, x):
    _check_ref_input(ctx, x, "input")
    radius, bias, alpha, beta = _scalars(ctx, x.dtype)
    norm = bias + alpha * _sqr_sum(x, radius)
    return (x * np.power(norm, -beta)).astype(x.dtype)


def _lrn_grad_ref(ctx, grads, image, output):
    for x, n in ((grads, "input_grads"), (image, "input_image"), (output, "output_image")):
        _check_ref_input(ctx, x, n)
    if not grads.shape == image.shape == output.shape:
        raise ExecutionError("input_grads, input_image and output_image must have the same "
                             f"shape, got {list(grads.shape)}, {list(image.shape)}, "
                             f"{list(output.shape)}", ctx.node)
    radius, bias, alpha, beta = _scalars(ctx, grads.dtype)
    norm = bias + alpha * _sqr_sum(image, radius)
    depth = grads.shape[-1]
    out = np.zeros_like(grads)
    two = grads.dtype.type(2)
    for i in range(depth):
        lo, hi = max(0, i - radius), min(depth, i + radius + 1)
        n_i = norm[..., i:i + 1]
        dy = -two * alpha * beta * image[..., lo:hi] * output[..., i:i + 1] / n_i
        dy[..., i - lo] += np.power(n_i[..., 0], -beta)
        out[..., lo:hi] += dy * grads[..., i:i + 1]
    return out


register_op("LRN", inputs=["input: T"], outputs=["output: T"], attrs=ATTRS,
            shape=_lrn_shape, kernel=_lrn_ref, group="other",
            doc="Local response normalization over the last dim of a 4-D input: input / "
                "(bias + alpha * sum of squares over depth +- depth_radius) ** beta.")

register_op("LRNGrad", inputs=["input_grads: T", "input_image: T", "output_image: T"],
            outputs=["output: T"], attrs=ATTRS,
            shape=_lrn_grad_shape, kernel=_lrn_grad_ref, group="other",
            doc="The gradient of LRN with respect to its input.")
