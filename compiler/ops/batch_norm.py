"""Fused batch normalization, as TensorFlow defines it: ``FusedBatchNorm``, ``FusedBatchNormV2``,
``FusedBatchNormV3`` and their gradients ``FusedBatchNormGrad``, ``...GradV2``, ``...GradV3``.

The channel axis is the last one for ``NHWC``/``NDHWC`` and axis 1 for ``NCHW``/``NCDHW``;
``x`` is 4-D (5-D for the 3-D formats, which only the V3 ops take) and every statistic is per
channel, over all other dims.
With ``n`` elements per channel:

- ``is_training``: ``mean = sum(x) / n``, ``var = sum((x - mean)^2) / n`` (biased), and
  ``y = (x - mean) * rsqrt(var + epsilon) * scale + offset``. ``batch_mean`` is ``mean`` and
  ``batch_variance`` the unbiased ``var * n / (n - 1)`` (``var`` when ``n == 1``); with
  ``exponential_avg_factor`` f != 1 they are ``(1 - f) * input + f * batch value`` (the moving
  averages, from the ``mean``/``variance`` inputs). ``reserve_space_1``/``_2`` are ``mean`` and
  the biased ``var``: what the gradient needs. ``mean``/``variance`` may be empty when f == 1.
- inference: ``y`` normalizes with the ``mean``/``variance`` inputs, which the next four
  outputs repeat.

``reserve_space_3`` (V3) is a scalar 0, as TensorFlow's CPU kernel makes it. An empty ``x`` in
training gives NaN statistics (0 / 0), as TensorFlow's does. Sums and the normalization are
computed in double. The gradient (``is_training`` as the forward op's):

- training: with ``xhat = (x - mean) * rsqrt(var + epsilon)`` (``mean``, ``var`` from the
  reserve spaces), ``offset_backprop = sum(dy)``, ``scale_backprop = sum(dy * xhat)`` and
  ``x_backprop = scale * rsqrt(var + epsilon) * (dy - offset_backprop / n - xhat *
  scale_backprop / n)``;
- inference: the same sums, and ``x_backprop = dy * scale * rsqrt(var + epsilon)``.

Its last two outputs are empty placeholders (``[0]``), as on TensorFlow's CPU. The C lowering
is ``compiler/codegen/c_ops/batch_norm.py``.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str

FORMATS = {"NHWC": (4, -1), "NCHW": (4, 1), "NDHWC": (5, -1), "NCDHW": (5, 1)}


def channel_axis(data_format: str) -> int:
    """The channel axis of ``data_format`` as a non-negative index."""
    rank, axis = FORMATS[data_format]
    return axis % rank


FORMATS_4D = ("NHWC", "NCHW")       # FusedBatchNorm, V2 and their gradients


def _format(ctx, formats) -> Tuple[int, int]:
    fmt = ctx.attr("data_format")
    if fmt not in formats:
        raise ctx.error(f"data_format must be one of {', '.join(formats)}, got {fmt!r}")
    rank, axis = FORMATS[fmt]
    return rank, axis % rank


def _channels(ctx, x_index: int, formats) -> Optional[int]:
    rank, axis = _format(ctx, formats)
    x = ctx.input_shape(x_index)
    if x is None:
        return None
    if len(x) != rank:
        raise ctx.error(f"input must be {rank}-dimensional for data_format "
                        f"{ctx.attr('data_format')}, got shape {shape_str(x)}")
    return x[axis]


def _check_vector(ctx, i: int, name: str, channels: Optional[int], may_be_empty: bool) -> None:
    s = ctx.input_shape(i)
    if s is None:
        return
    if len(s) != 1:
        raise ctx.error(f"{name} must be 1-dimensional, got shape {shape_str(s)}")
    if channels is None or s[0] is None or s[0] == channels or (may_be_empty and s[0] == 0):
        return
    raise ctx.error(f"{name} must have the same number of elements as the channels of x, got "
                    f"{s[0]} and {channels}")


def _stats_may_be_empty(attrs) -> bool:
    """Whether ``mean``/``variance`` may be empty: training that does not average them."""
    return bool(attrs["is_training"]) and float(attrs.get("exponential_avg_factor", 1.0)) == 1.0


def _forward_shape(ctx, reserve_3: bool, formats) -> list:
    c = _channels(ctx, 0, formats)
    _check_vector(ctx, 1, "scale", c, False)
    _check_vector(ctx, 2, "offset", c, False)
    for i, name in ((3, "mean"), (4, "variance")):
        _check_vector(ctx, i, name, c, _stats_may_be_empty(ctx.attrs))
    if c is None:
        c = next((s[0] for s in (ctx.input_shape(1), ctx.input_shape(2))
                  if s is not None and len(s) == 1), None)
    x = ctx.input_shape(0)
    return [x] + [(c,)] * 4 + ([()] if reserve_3 else [])


def _grad_shape(ctx, formats) -> list:
    c = _channels(ctx, 1, formats)
    dy, x = ctx.input_shape(0), ctx.input_shape(1)
    if dy is not None and x is not None and (len(dy) != len(x) or any(
            a is not None and b is not None and a != b for a, b in zip(dy, x))):
        raise ctx.error(f"x and y_backprop must have the same shape, got {shape_str(x)} and "
                        f"{shape_str(dy)}")
    for i, name in ((2, "scale"), (3, "reserve_space_1"), (4, "reserve_space_2")):
        _check_vector(ctx, i, name, c, False)
    if c is None:
        c = next((s[0] for s in (ctx.input_shape(2), ctx.input_shape(3))
                  if s is not None and len(s) == 1), None)
    out = x if x is not None else dy
    if out is not None and dy is not None:
        out = tuple(a if a is not None else b for a, b in zip(out, dy))
    return [out, (c,), (c,), (0,), (0,)]


# --- numpy references ------------------------------------------------------------------------
def _channels_last(ctx, x: np.ndarray, formats) -> np.ndarray:
    """``x`` as float64 with its channel axis moved last, after checking its rank."""
    fmt = ctx.attrs["data_format"]
    if fmt not in formats:
        raise ExecutionError(f"data_format must be one of {', '.join(formats)}, got {fmt!r}",
                             ctx.node)
    rank = FORMATS[fmt][0]
    if x.ndim != rank:
        raise ExecutionError(f"input must be {rank}-dimensional for data_format {fmt}, got "
                             f"shape {list(x.shape)}", ctx.node)
    return np.moveaxis(x.astype(np.float64), channel_axis(fmt), -1)


def _back(ctx, y: np.ndarray, dtype) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(y, -1, channel_axis(ctx.attrs["data_format"]))
                                .astype(dtype))


def _vector(ctx, v: np.ndarray, name: str, channels: int, may_be_empty: bool = False) -> bool:
    """Check ``v`` is [channels] (or [0] where allowed); whether it holds values."""
    if v.ndim != 1:
        raise ExecutionError(f"{name} must be 1-dimensional, got shape {list(v.shape)}", ctx.node)
    if v.shape[0] == channels:
        return True
    if may_be_empty and v.shape[0] == 0:
        return False
    raise ExecutionError(f"{name} must have the same number of elements as the channels of x, "
                         f"got {v.shape[0]} and {channels}", ctx.node)


def batch_norm_forward(ctx, x, scale, offset, mean, variance, reserve_3: bool = True,
                       formats=tuple(FORMATS)):
    """The reference of FusedBatchNorm{,V2,V3} (the module docstring has the formulas)."""
    xs = _channels_last(ctx, x, formats)
    c = xs.shape[-1]
    u = scale.dtype
    _vector(ctx, scale, "scale", c)
    _vector(ctx, offset, "offset", c)
    empty_ok = _stats_may_be_empty(ctx.attrs)
    for v, name in ((mean, "mean"), (variance, "variance")):
        _vector(ctx, v, name, c, empty_ok)
    eps = float(ctx.attrs["epsilon"])
    flat = xs.reshape(-1, c)
    if ctx.attrs["is_training"]:
        n = flat.shape[0]
        with np.errstate(invalid="ignore", divide="ignore"):
            m = flat.sum(axis=0) / n
            var = ((flat - m) ** 2).sum(axis=0) / n
        unbiased = var * (n / (n - 1)) if n > 1 else var
        f = float(ctx.attrs.get("exponential_avg_factor", 1.0))
        if f == 1.0:
            new_mean, new_var = m, unbiased
        else:
            new_mean = (1 - f) * mean.astype(np.float64) + f * m
            new_var = (1 - f) * variance.astype(np.float64) + f * unbiased
        saved = (m, var)
    else:
        m, var = mean.astype(np.float64), variance.astype(np.float64)
        new_mean, new_var, saved = m, var, (m, var)
    a = scale.astype(np.float64) / np.sqrt(var + eps)
    y = (xs - m) * a + offset.astype(np.float64)
    outs = [_back(ctx, y, x.dtype), new_mean.astype(u), new_var.astype(u),
            saved[0].astype(u), saved[1].astype(u)]
    if reserve_3:
        outs.append(np.zeros((), u))
    return tuple(outs)


def batch_norm_grad(ctx, dy, x, scale, saved_mean, saved_var, *reserve_3,
                    formats=tuple(FORMATS)):
    """The reference of FusedBatchNormGrad{,V2,V3} (the module docstring has the formulas)."""
    if dy.shape != x.shape:
        raise ExecutionError(f"x and y_backprop must have the same shape, got {list(x.shape)} "
                             f"and {list(dy.shape)}", ctx.node)
    xs, dys = _channels_last(ctx, x, formats), _channels_last(ctx, dy, formats)
    c = xs.shape[-1]
    u = saved_mean.dtype
    for v, name in ((scale, "scale"), (saved_mean, "reserve_space_1"),
                    (saved_var, "reserve_space_2")):
        _vector(ctx, v, name, c)
    inv = 1.0 / np.sqrt(saved_var.astype(np.float64) + float(ctx.attrs["epsilon"]))
    xhat = (xs - saved_mean.astype(np.float64)) * inv
    flat_dy, flat_xhat = dys.reshape(-1, c), xhat.reshape(-1, c)
    d_offset = flat_dy.sum(axis=0)
    d_scale = (flat_dy * flat_xhat).sum(axis=0)
    k = scale.astype(np.float64) * inv
    if ctx.attrs["is_training"]:
        n = flat_dy.shape[0]
        dx = k * (dys - d_offset / max(n, 1) - xhat * (d_scale / max(n, 1)))
    else:
        dx = dys * k
    empty = np.zeros((0,), u)
    return (_back(ctx, dx, x.dtype), d_scale.astype(u), d_offset.astype(u), empty, empty.copy())


# --- registration ----------------------------------------------------------------------------
def _attrs(types: List[str]) -> List[str]:
    return types + ["epsilon: float = 0.0001", "exponential_avg_factor: float = 1.0",
                    'data_format: string = "NHWC"', "is_training: bool = true"]


_DOC = ("Batch normalization over every dim but the channel one (the last for NHWC/NDHWC, 1 "
        "for NCHW/NCDHW): batch statistics when is_training, else the given mean/variance.")
_GRAD_DOC = "Gradient of fused batch normalization with respect to x, scale and offset."
_GRAD_ATTRS = ["epsilon: float = 0.0001", 'data_format: string = "NHWC"',
               "is_training: bool = true"]

register_op("FusedBatchNorm",
            inputs=["x: T", "scale: T", "offset: T", "mean: T", "variance: T"],
            outputs=["y: T", "batch_mean: T", "batch_variance: T", "reserve_space_1: T",
                     "reserve_space_2: T"],
            attrs=_attrs(["T: {f32, f64}"]),
            shape=lambda ctx: _forward_shape(ctx, False, FORMATS_4D),
            kernel=lambda ctx, *a: batch_norm_forward(ctx, *a, reserve_3=False,
                                                      formats=FORMATS_4D),
            group="other", doc=_DOC)
for _name, _r3, _formats in (("FusedBatchNormV2", False, FORMATS_4D),
                             ("FusedBatchNormV3", True, tuple(FORMATS))):
    register_op(_name,
                inputs=["x: T", "scale: U", "offset: U", "mean: U", "variance: U"],
                outputs=["y: T", "batch_mean: U", "batch_variance: U", "reserve_space_1: U",
                         "reserve_space_2: U"] + (["reserve_space_3: U"] if _r3 else []),
                attrs=_attrs(["T: {float}", "U: {f32, f64}"]),
                shape=lambda ctx, r3=_r3, f=_formats: _forward_shape(ctx, r3, f),
                kernel=lambda ctx, *a, r3=_r3, f=_formats: batch_norm_forward(
                    ctx, *a, reserve_3=r3, formats=f),
                group="other", doc=_DOC)

for _name, _inputs, _outputs, _types, _formats in (
        ("FusedBatchNormGrad",
         ["y_backprop: T", "x: T", "scale: T", "reserve_space_1: T", "reserve_space_2: T"],
         ["x_backprop: T", "scale_backprop: T", "offset_backprop: T", "reserve_space_3: T",
          "reserve_space_4: T"], ["T: {f32, f64}"], FORMATS_4D),
        ("FusedBatchNormGradV2",
         ["y_backprop: T", "x: T", "scale: U", "reserve_space_1: U", "reserve_space_2: U"],
         ["x_backprop: T", "scale_backprop: U", "offset_backprop: U", "reserve_space_3: U",
          "reserve_space_4: U"], ["T: {float}", "U: {f32, f64}"], FORMATS_4D),
        ("FusedBatchNormGradV3",
         ["y_backprop: T", "x: T", "scale: U", "reserve_space_1: U", "reserve_space_2: U",
          "reserve_space_3: U"],
         ["x_backprop: T", "scale_backprop: U", "offset_backprop: U", "reserve_space_4: U",
          "reserve_space_5: U"], ["T: {float}", "U: {f32, f64}"], tuple(FORMATS))):
    register_op(_name, inputs=_inputs, outputs=_outputs, attrs=_types + _GRAD_ATTRS,
                shape=lambda ctx, f=_formats: _grad_shape(ctx, f),
                kernel=lambda ctx, *a, f=_formats: batch_norm_grad(ctx, *a, formats=f),
                group="other", doc=_GRAD_DOC)
