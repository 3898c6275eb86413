"""Convolution and pooling ops fused with the elementwise op around them, made by the
``fuse-conv`` pass (``compiler/passes/fuse_conv.py``) on CPU, NHWC only:

- ``_FusedConv2D(input, filter, bias)``: ``Relu(BiasAdd(Conv2D(input, filter), bias))``
  (``fused_ops = ["BiasAdd", "Relu"]``, TensorFlow's name and attr for its own fusion) or
  ``BiasAdd(Conv2D(...))`` (``["BiasAdd"]``), without a separate pass over the whole output.
- ``_Conv2DBackpropFilterBias(input, filter_sizes, out_backprop)``: the outputs of
  ``Conv2DBackpropFilter(input, filter_sizes, dy)`` and ``BiasAddGrad(dy)`` of the same ``dy``
  (a convolution layer's two parameter gradients): the bias gradient is summed from each chunk
  of ``dy`` the filter gradient has just read, instead of in a separate pass over ``dy``.
- ``_MaxPoolReluGrad(orig_input, orig_output, grad)``: ``ReluGrad(MaxPoolGrad(x, y, dy), x)``
  where ``x`` is a ReLU's output (what the gradient of ``MaxPool(Relu(z))`` is): the pooling
  gradient kept only where ``x`` is positive, in the pooling gradient's own pass.
- ``_MaxPoolArgmax(input)``: ``MaxPool`` that also outputs, as u8, where each output's first
  maximum is in its window clipped to the input (row-major), for windows of at most 255
  pixels; and ``_MaxPoolGradArgmax(orig_input, orig_output, argmax, grad)`` (``relu``: the
  ``_MaxPoolReluGrad`` form, masked where ``orig_output`` is not positive), the pooling
  gradient routed by those places: it does not read ``orig_input`` again (only its shape).

The C lowering is ``compiler/codegen/c_ops/conv_fused.py``. The reference kernels compose
the reference kernels of the ops they replace (``_MaxPoolGradArgmax``'s finds the places
again in ``orig_input``: ``argmax`` must be ``_MaxPoolArgmax``'s of it, as the pass makes
them).
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import TensorType, shape_str
from compiler.ops import conv
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType

_FUSIONS = (["BiasAdd"], ["BiasAdd", "Relu"])


def _fused_ops(attrs, err) -> list:
    fused = list(attrs["fused_ops"])
    if fused not in _FUSIONS:
        raise err(f"fused_ops must be one of {_FUSIONS}, got {fused}")
    return fused


def _fused_conv_shape(ctx) -> list:
    _fused_ops(ctx.attrs, ctx.error)
    out = conv._conv_shape(ctx)[0]
    bias = ctx.input_shape(2)
    if bias is not None and len(bias) != 1:
        raise ctx.error(f"bias must be a vector (rank 1), got shape {shape_str(bias)}")
    if bias is not None and bias[0] is not None and out[3] is not None and bias[0] != out[3]:
        raise ctx.error(f"bias has {bias[0]} elements but the filter has {out[3]} out-channels")
    return [out]


def _fused_conv_ref(ctx, x, f, bias):
    fused = _fused_ops(ctx.attrs, lambda m: ExecutionError(m, ctx.node))
    y = conv._conv_ref(ctx, x, f)
    if bias.shape != (y.shape[3],):
        raise ExecutionError(f"bias has shape {list(bias.shape)}, expected [{y.shape[3]}]",
                             ctx.node)
    y = y + bias
    if "Relu" in fused:
        y = np.where(y < 0, y.dtype.type(0), y)
    return y.astype(x.dtype)


def _max_pool_relu_grad_ref(ctx, x, y, dy):
    dx = conv._max_pool_grad_ref(ctx, x, y, dy)
    return np.where(x > 0, dx, dx.dtype.type(0))


register_op("_FusedConv2D", inputs=["input: T", "filter: T", "bias: T"], outputs=["output: T"],
            attrs=conv._CONV_ATTRS + ["fused_ops: list(string)"],
            shape=_fused_conv_shape, kernel=_fused_conv_ref, **conv._COMMON,
            doc="Conv2D, then BiasAdd, then (when fused_ops says so) Relu, in one kernel.")
register_op("_MaxPoolReluGrad", inputs=["orig_input: T", "orig_output: T", "grad: T"],
            outputs=["output: T"], attrs=conv._MAX_POOL_ATTRS,
            shape=conv._max_pool_grad_shape, kernel=_max_pool_relu_grad_ref, **conv._COMMON,
            doc="ReluGrad(MaxPoolGrad(orig_input, orig_output, grad), orig_input): the max "
                "pooling gradient where orig_input (a ReLU's output) is positive, else 0.")


def _filter_bias_grad_shape(ctx) -> list:
    filter_shape = conv._conv_filter_shape(ctx)[0]
    return [filter_shape, (filter_shape[3],)]


def _filter_bias_grad_ref(ctx, x, sizes, dy):
    return (conv._conv_filter_ref(ctx, x, sizes, dy),
            np.sum(dy, axis=(0, 1, 2), dtype=dy.dtype))


register_op("_Conv2DBackpropFilterBias", inputs=["input: T", "filter_sizes: i32",
                                                 "out_backprop: T"],
            outputs=["filter_grad: T", "bias_grad: T"], attrs=conv._CONV_ATTRS,
            shape=_filter_bias_grad_shape, kernel=_filter_bias_grad_ref, **conv._COMMON,
            doc="Conv2DBackpropFilter(input, filter_sizes, out_backprop) and "
                "BiasAddGrad(out_backprop) (NHWC) in one kernel.")


def _argmax_shape(ctx) -> list:
    out = conv._pool_shape(ctx)[0]
    k = ctx.attr("ksize")
    if k[1] * k[2] > 255:
        raise ctx.error(f"a window of {k[1]}x{k[2]} pixels does not fit u8 places")
    return [out, TensorType(DType.u8, out)]


def _argmax_ref(ctx, x):
    """The pooled output and each maximum's index in its clipped window."""
    best, flat = conv.max_pool_argmax(ctx, x)
    k, s = ctx.attrs["ksize"], ctx.attrs["strides"]
    _, oh, ow, pt, pl = conv._ref_geometry(ctx, x.shape, k[1], k[2], ksize=True)
    w = x.shape[2]
    h0 = np.maximum(np.arange(oh) * s[1] - pt, 0)[None, :, None, None]
    ws = np.arange(ow) * s[2] - pl
    w0 = np.maximum(ws, 0)[None, None, :, None]
    width = (np.minimum(ws + k[2], w) - np.maximum(ws, 0))[None, None, :, None]
    if best.size == 0 or x.shape[1] == 0 or w == 0:            # no window holds a pixel
        return best, np.zeros(best.shape, np.uint8)
    return best, ((flat // w - h0) * width + flat % w - w0).astype(np.uint8)


def _grad_argmax_shape(ctx) -> list:
    return conv._max_pool_grad_shape(_WithoutArgmax(ctx))


def _grad_argmax_ref(ctx, x, y, argmax, dy):
    dx = conv._max_pool_grad_ref(ctx, x, y, dy)
    return np.where(x > 0, dx, dx.dtype.type(0)) if ctx.attrs["relu"] else dx


class _WithoutArgmax:
    """_MaxPoolGradArgmax's shape context seen as MaxPoolGrad's (argmax, input 2, left out)."""

    def __init__(self, ctx):
        self._ctx, self.attrs, self.node = ctx, ctx.attrs, ctx.node

    def attr(self, name: str):
        return self._ctx.attr(name)

    def input_shape(self, i: int):
        return self._ctx.input_shape((0, 1, 3)[i])

    def input_value(self, i: int):
        return self._ctx.input_value((0, 1, 3)[i])

    def error(self, message: str):
        return self._ctx.error(message)


register_op("_MaxPoolArgmax", inputs=["input: T"], outputs=["output: T", "argmax: u8"],
            attrs=conv._MAX_POOL_ATTRS, shape=_argmax_shape, kernel=_argmax_ref,
            **conv._COMMON,
            doc="MaxPool, and where each output's first maximum is in its window clipped to "
                "the input (row-major index, u8).")
register_op("_MaxPoolGradArgmax", inputs=["orig_input: T", "orig_output: T", "argmax: u8",
                                          "grad: T"],
            outputs=["output: T"], attrs=conv._MAX_POOL_ATTRS + ["relu: bool = false"],
            shape=_grad_argmax_shape, kernel=_grad_argmax_ref, **conv._COMMON,
            doc="MaxPoolGrad routed by _MaxPoolArgmax's places (orig_input's data is not "
                "read); with relu, 0 where orig_output is not positive.")
