"""``fl.nn`` functions TensorFlow 1.x programs use beyond the core set, each built over ops as
TensorFlow 1.x builds it: ``lrn`` (``local_response_normalization``, one ``LRN`` node),
``conv1d`` (a ``Conv2D`` over an inserted dim of 1), ``atrous_conv2d`` (a dilated
``Conv2D``), ``separable_conv2d`` (depthwise, then a 1x1 pointwise ``Conv2D``),
``weighted_cross_entropy_with_logits`` and ``zero_fraction``."""
from __future__ import annotations

from typing import Optional

import numpy as np

from dsl.array_ops import expand_dims, squeeze
from dsl.context import name_scope
from dsl.math_ops import abs as _abs, cast, equal, exp, log1p, relu
from dsl.nn_conv import conv2d, depthwise_conv2d
from dsl.ops import apply_op, convert_to_tensor
from dsl.reduction_ops import reduce_mean
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType

__all__ = ["lrn", "local_response_normalization", "conv1d", "atrous_conv2d",
           "separable_conv2d", "weighted_cross_entropy_with_logits", "zero_fraction"]


def local_response_normalization(input, depth_radius: int = 5, bias: float = 1.0,  # noqa: A002
                                 alpha: float = 1.0, beta: float = 0.5,
                                 name: Optional[str] = None) -> Tensor:
    """``input / (bias + alpha * sqr_sum) ** beta`` with ``sqr_sum`` the sum of squares over
    the last dim's window ``d - depth_radius .. d + depth_radius`` of a 4-D input
    (``tf.nn.lrn``)."""
    x = convert_to_tensor(input)
    return apply_op("LRN", [x], {"depth_radius": int(depth_radius), "bias": float(bias),
                                 "alpha": float(alpha), "beta": float(beta)},
                    name=name or "LRN")


lrn = local_response_normalization


def _spatial(value, what: str) -> int:
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return int(value[0])
        if len(value) == 3:
            return value
        raise ValueError(f"{what} must be an int or a list of 1 or 3 ints, got {value!r}")
    return int(value)


def conv1d(value=None, filters=None, stride=None, padding=None, use_cudnn_on_gpu=None,
           data_format: Optional[str] = None, name: Optional[str] = None, input=None,  # noqa: A002
           dilations=None) -> Tensor:
    """1-D convolution of ``[batch, in_width, in_channels]`` (``NWC``, the default) or
    ``[batch, in_channels, in_width]`` (``NCW``) with ``filters`` ``[filter_width,
    in_channels, out_channels]``, as ``tf.nn.conv1d``: the input gets a height of 1, the filter
    a filter height of 1, one ``Conv2D`` runs, and the height is squeezed out again."""
    if value is not None and input is not None:
        raise ValueError("conv1d takes value or input, not both")
    value = input if value is None else value
    if value is None or filters is None or stride is None or padding is None:
        raise TypeError("conv1d needs value (or input), filters, stride and padding")
    if data_format is None or data_format in ("NHWC", "NWC"):
        fmt, spatial = "NHWC", 1
    elif data_format in ("NCHW", "NCW"):
        fmt, spatial = "NCHW", 2
    else:
        raise ValueError("data_format must be \"NWC\" or \"NCW\".")
    with name_scope(name or "conv1d"):
        x = expand_dims(convert_to_tensor(value), spatial)
        f = expand_dims(convert_to_tensor(filters, dtype=x.dtype), 0)
        s = _spatial(stride, "stride")
        d = _spatial(dilations if dilations is not None else 1, "dilations")
        strides = ([1, 1, s, 1] if fmt == "NHWC" else [1, 1, 1, s]) if isinstance(s, int) \
            else ([s[0], 1, s[1], s[2]] if fmt == "NHWC" else [s[0], s[1], 1, s[2]])
        dil = ([1, 1, d, 1] if fmt == "NHWC" else [1, 1, 1, d]) if isinstance(d, int) \
            else ([d[0], 1, d[1], d[2]] if fmt == "NHWC" else [d[0], d[1], 1, d[2]])
        y = conv2d(x, f, strides, padding, data_format=fmt, dilations=dil)
        return squeeze(y, [spatial])


def atrous_conv2d(value, filters, rate: int, padding: str, name: Optional[str] = None) -> Tensor:
    """2-D convolution with the filter dilated by ``rate`` in height and width (``tf.nn
    .atrous_conv2d``): one ``Conv2D`` with ``dilations = [1, rate, rate, 1]``, stride 1."""
    if int(rate) < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    return conv2d(value, filters, [1, 1, 1, 1], padding, dilations=[1, int(rate), int(rate), 1],
                  name=name or "atrous_conv2d")


def _ints(value) -> list:
    return [int(value)] if isinstance(value, (int, np.integer)) else [int(v) for v in value]


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding,  # noqa: A002
                     rate=None, name: Optional[str] = None, data_format: Optional[str] = None,
                     dilations=None) -> Tensor:
    """A depthwise convolution (``depthwise_filter`` ``[KH, KW, C, M]``, with ``strides`` and
    ``rate``) followed by a 1x1 convolution mixing its ``C * M`` channels
    (``pointwise_filter`` ``[1, 1, C * M, out]``), as ``tf.nn.separable_conv2d``."""
    if rate is not None and dilations is not None:
        raise ValueError("separable_conv2d takes rate or dilations, not both")
    x = convert_to_tensor(input)
    dw = convert_to_tensor(depthwise_filter, dtype=x.dtype)
    pw = convert_to_tensor(pointwise_filter, dtype=x.dtype)
    ds, ps = static_shape(dw), static_shape(pw)
    if ds is not None and len(ds) != 4:
        raise ValueError(f"depthwise_filter must be 4-D, got shape {list(ds)}")
    if ps is not None:
        if len(ps) != 4:
            raise ValueError(f"pointwise_filter must be 4-D, got shape {list(ps)}")
        if ps[0] != 1 or ps[1] != 1:
            raise ValueError(f"pointwise_filter must be [1, 1, in, out], got shape {list(ps)}")
        if ds is not None and None not in (ds[2], ds[3], ps[2]) and ds[2] * ds[3] != ps[2]:
            raise ValueError(f"pointwise_filter has {ps[2]} input channels, the depthwise "
                             f"convolution gives {ds[2] * ds[3]}")
    fmt = data_format or "NHWC"
    dilation = rate if rate is not None else dilations
    if dilation is not None and max(_ints(dilation)) > 1 and max(_ints(strides)) > 1:
        raise ValueError("separable_conv2d: if any value of rate is greater than 1, then all "
                         f"values of strides must be 1 (rate {dilation!r}, strides "
                         f"{strides!r})")
    with name_scope(name or "separable_conv2d"):
        depthwise = depthwise_conv2d(x, dw, strides, padding, rate=rate, data_format=fmt,
                                     dilations=dilations, name="depthwise")
        return conv2d(depthwise, pw, [1, 1, 1, 1], "VALID", data_format=fmt,
                      name="pointwise")


def weighted_cross_entropy_with_logits(labels=None, logits=None, pos_weight=None,
                                       name: Optional[str] = None, targets=None) -> Tensor:
    """Sigmoid cross-entropy with the positive term weighted by ``pos_weight``
    (``tf.nn.weighted_cross_entropy_with_logits``; ``targets`` is TF1's older name for
    ``labels``): ``(1 - labels) * logits + (1 + (pos_weight - 1) * labels) *
    (log1p(exp(-|logits|)) + relu(-logits))``."""
    if labels is not None and targets is not None:
        raise ValueError("weighted_cross_entropy_with_logits takes labels or targets, not both")
    labels = targets if labels is None else labels
    if labels is None or logits is None or pos_weight is None:
        raise ValueError("weighted_cross_entropy_with_logits needs labels (or targets), logits "
                         "and pos_weight")
    with name_scope(name or "logistic_loss"):
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels, dtype=logits.dtype)
        ls, gs = static_shape(logits), static_shape(labels)
        if ls is not None and gs is not None and (len(ls) != len(gs) or any(
                a is not None and b is not None and a != b for a, b in zip(ls, gs))):
            raise ValueError(f"logits and labels must have the same shape ({list(ls)} vs "
                             f"{list(gs)})")
        pos_weight = convert_to_tensor(pos_weight, dtype=logits.dtype)
        log_weight = 1.0 + (pos_weight - 1.0) * labels
        return (1.0 - labels) * logits + log_weight * (log1p(exp(-_abs(logits)))
                                                       + relu(-logits))


def zero_fraction(value, name: Optional[str] = None) -> Tensor:
    """The fraction of ``value``'s elements that are zero, a float32 scalar
    (``tf.nn.zero_fraction``; NaN for an empty value)."""
    with name_scope(name or "zero_fraction"):
        value = convert_to_tensor(value)
        zero = np.zeros((), value.dtype.np)
        return reduce_mean(cast(equal(value, zero), DType.f32))
