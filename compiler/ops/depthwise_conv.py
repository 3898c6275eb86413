"""Depthwise convolution, as TensorFlow defines it: ``DepthwiseConv2dNative`` and its two
backprops.

Each input channel ``c`` is convolved with its own ``M`` filters (the channel multiplier):
``output[n, oh, ow, c * M + m] = sum over the window's taps (kh, kw) of
input[n, oh * sh - pad_top + kh * dh, ow * sw - pad_left + kw * dw, c] * filter[kh, kw, c, m]``
(taps outside the input count as zero). The filter is ``[KH, KW, C, M]`` in both data formats;
the output has ``C * M`` channels. Strides, dilations and padding (SAME, VALID, EXPLICIT) have
Conv2D's window arithmetic (``compiler/ops/conv.py``). NCHW runs as the NHWC op on transposed
operands (in the interpreter, and in C through transposed copies); the C lowering is
``compiler/codegen/c_ops/depthwise_conv.py``.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ops.conv import (_COMMON, _check_grad, _check_out, _expect, _geometry, _merge,
                               _padded, _rank4, _ref_geometry, _register, _sizes, _sizes_value,
                               _taps)


def _times(a, b):
    return None if a is None or b is None else a * b


# --- shape functions (NHWC; _register handles NCHW) ----------------------------------------
def _depthwise_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error)
    x, f = _rank4(ctx, 0, "input"), _rank4(ctx, 1, "filter")
    _expect(ctx, "filter in-channels", (f[2],), (x[3],))
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    return [(n, oh, ow, _times(_merge(x[3], f[2]), f[3]))]


def _depthwise_input_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error)
    sizes = _sizes_value(ctx, 0, "input_sizes") or (None,) * 4
    f, dy = _rank4(ctx, 1, "filter"), _rank4(ctx, 2, "out_backprop")
    x = (_merge(sizes[0], dy[0]), sizes[1], sizes[2], _merge(sizes[3], f[2]))
    _expect(ctx, "filter in-channels", (f[2],), (sizes[3],))
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    _expect(ctx, "out_backprop", dy, (n, oh, ow, _times(x[3], f[3])))
    return [x]


def _depthwise_filter_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error)
    x, dy = _rank4(ctx, 0, "input"), _rank4(ctx, 2, "out_backprop")
    sizes = _sizes_value(ctx, 1, "filter_sizes") or (None,) * 4
    c = _merge(sizes[2], x[3])
    m = sizes[3]
    if m is None and dy[3] is not None and c:
        m = dy[3] // c
    f = (sizes[0], sizes[1], c, m)
    _expect(ctx, "filter_sizes in-channels", (sizes[2],), (x[3],))
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    _expect(ctx, "out_backprop", dy, (n, oh, ow, _times(c, m)))
    return [f]


# --- numpy reference kernels (NHWC) --------------------------------------------------------
def _check_channels(ctx, c_x: int, c_f: int) -> None:
    if c_x != c_f:
        raise ExecutionError(f"input depth {c_x} does not match filter in-channels {c_f}", ctx.node)


def _depthwise_ref(ctx, x, f):
    kh, kw, c, m = f.shape
    _check_channels(ctx, x.shape[3], c)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x.shape, kh, kw)
    taps, pads = _taps(g, x.shape, kh, kw, oh, ow, pt, pl)
    xp = _padded(x, pads)
    y = np.zeros((x.shape[0], oh, ow, c, m), x.dtype)
    for i, j, rs, cs in taps:
        y += xp[:, rs, cs, :, None] * f[i, j]
    return y.reshape(x.shape[0], oh, ow, c * m)


def _depthwise_input_ref(ctx, sizes, f, dy):
    x_shape = _sizes(ctx, sizes, "input_sizes")
    kh, kw, c, m = f.shape
    _check_channels(ctx, x_shape[3], c)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x_shape, kh, kw)
    _check_grad(ctx, dy.shape, (x_shape[0], oh, ow, c * m))
    taps, pads = _taps(g, x_shape, kh, kw, oh, ow, pt, pl)
    dy5 = dy.reshape(x_shape[0], oh, ow, c, m)
    dxp = _padded(np.zeros(x_shape, dy.dtype), pads)
    for i, j, rs, cs in taps:
        dxp[:, rs, cs, :] += np.sum(dy5 * f[i, j], axis=-1)
    return np.ascontiguousarray(dxp[:, pt:pt + x_shape[1], pl:pl + x_shape[2], :])


def _depthwise_filter_ref(ctx, x, sizes, dy):
    kh, kw, c, m = _sizes(ctx, sizes, "filter_sizes")
    _check_channels(ctx, x.shape[3], c)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x.shape, kh, kw)
    _check_grad(ctx, dy.shape, (x.shape[0], oh, ow, c * m))
    taps, pads = _taps(g, x.shape, kh, kw, oh, ow, pt, pl)
    xp = _padded(x, pads)
    dy5 = dy.reshape(x.shape[0], oh, ow, c, m)
    df = np.zeros((kh, kw, c, m), x.dtype)
    for i, j, rs, cs in taps:
        df[i, j] = np.einsum("nhwc,nhwcm->cm", xp[:, rs, cs, :], dy5)
    return df


# --- registration --------------------------------------------------------------------------
_DEPTHWISE_ATTRS = ["T: {float}", "strides: list(int)", "padding: string",
                    "explicit_paddings: list(int) = []", 'data_format: string = "NHWC"',
                    "dilations: list(int) = [1, 1, 1, 1]"]

_register("DepthwiseConv2dNative", ["input: T", "filter: T"], _depthwise_shape, _depthwise_ref,
          outputs=["output: T"], attrs=_DEPTHWISE_ATTRS, **_COMMON,
          doc="Depthwise 2-D convolution: input channel c with its M filters filter[:, :, c, :] "
              "gives output channels c*M .. c*M+M-1 (filter [KH, KW, C, M]).")
_register("DepthwiseConv2dNativeBackpropInput",
          ["input_sizes: i32", "filter: T", "out_backprop: T"], _depthwise_input_shape,
          _depthwise_input_ref, outputs=["output: T"], attrs=_DEPTHWISE_ATTRS, **_COMMON,
          doc="Gradient of DepthwiseConv2dNative with respect to its input.")
_register("DepthwiseConv2dNativeBackpropFilter",
          ["input: T", "filter_sizes: i32", "out_backprop: T"], _depthwise_filter_shape,
          _depthwise_filter_ref, out_is_activation=False, outputs=["output: T"],
          attrs=_DEPTHWISE_ATTRS, **_COMMON,
          doc="Gradient of DepthwiseConv2dNative with respect to its filter.")
