"""Convolution and pooling ops fused with the elementwise op around them, made by the
``fuse-conv`` pass (``compiler/passes/fuse_conv.py``) on CPU, NHWC only:

- ``_FusedConv2D(input, filter, args)`` and ``_FusedDepthwiseConv2dNative(input, filter,
  args)`` (TensorFlow's names, inputs and attrs for its own fusions): the convolution, then
  the epilogue ``fused_ops`` names, applied to each chunk of output while it is in cache:
  ``"BiasAdd"`` (``args[0]``, one value per output channel), then optionally ``"Add"`` (a
  residual ``args[1]`` of the output's shape: ResNet's shortcut), then optionally one
  activation, ``"Relu"``, ``"Relu6"``, ``"Elu"`` or ``"LeakyRelu"`` (slope
  ``leakyrelu_alpha``). ``num_args`` is 1, or 2 with ``"Add"``.
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
- ``_MaxPoolGradArgmaxBias(orig_input, orig_output, argmax, grad)``: ``_MaxPoolGradArgmax``'s
  output and, as ``bias_grad``, that output summed per channel (``BiasAddGrad`` of it): where
  the pooling gradient is a convolution's output gradient, the convolution's bias gradient
  comes from the pass that writes it (each window's grad lands at one place, so the sum is
  of the routed grads), and the filter gradient runs without one.

The C lowering is ``compiler/codegen/c_ops/conv_fused.py``. The reference kernels compose
the reference kernels of the ops they replace (``_MaxPoolGradArgmax``'s finds the places
again in ``orig_input``: ``argmax`` must be ``_MaxPoolArgmax``'s of it, as the pass makes
them).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import TensorType, shape_str
from compiler.ops import conv, depthwise_conv
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType

# The activations a fused convolution may end with, as TensorFlow's fused_ops name them.
ACTIVATIONS = ("Relu", "Relu6", "Elu", "LeakyRelu")


def epilogue(attrs, err) -> Tuple[bool, Optional[str]]:
    """(whether a residual is added, the activation or None) that ``fused_ops`` names:
    ``["BiasAdd"]``, then optionally ``"Add"``, then optionally one of ``ACTIVATIONS``."""
    fused = list(attrs["fused_ops"])
    rest = fused[1:]
    add = bool(rest) and rest[0] == "Add"
    if add:
        rest = rest[1:]
    act = rest[0] if rest else None
    if fused[:1] != ["BiasAdd"] or len(rest) > 1 or (act is not None and act not in ACTIVATIONS):
        raise err(f"fused_ops must be BiasAdd, then optionally Add, then optionally one of "
                  f"{', '.join(ACTIVATIONS)}; got {fused}")
    want = 2 if add else 1
    if attrs.get("num_args", want) != want:
        raise err(f"fused_ops {fused} take {want} args, got num_args={attrs.get('num_args')}")
    return add, act


def _fused_shape(base):
    def shape(ctx) -> list:
        if ctx.attrs.get("data_format", "NHWC") != "NHWC":
            raise ctx.error("fused convolutions are NHWC only")
        add, _ = epilogue(ctx.attrs, ctx.error)
        out = base(ctx)[0]
        bias = ctx.input_shape(2)
        if bias is not None and len(bias) != 1:
            raise ctx.error(f"bias must be a vector (rank 1), got shape {shape_str(bias)}")
        if bias is not None and bias[0] is not None and out[3] is not None and bias[0] != out[3]:
            raise ctx.error(f"bias has {bias[0]} elements but the output has {out[3]} channels")
        if add:
            addend = ctx.input_shape(3)
            if addend is not None and (len(addend) != 4 or any(
                    a is not None and o is not None and a != o for a, o in zip(addend, out))):
                raise ctx.error(f"the residual has shape {shape_str(addend)}, the output "
                                f"{shape_str(out)}")
        return [out]
    return shape


def apply_activation(y: np.ndarray, act: Optional[str], alpha: float) -> np.ndarray:
    """The activation ``act`` as flowc's own op computes it (NaN stays NaN)."""
    zero = y.dtype.type(0)
    if act == "Relu":
        return np.where(y < 0, zero, y)
    if act == "Relu6":
        return np.where(y < 0, zero, np.where(y > 6, y.dtype.type(6), y))
    if act == "Elu":
        return np.where(y < 0, np.expm1(y), y)
    if act == "LeakyRelu":
        return np.where(y > 0, y, y * y.dtype.type(alpha))
    return y


def _fused_ref(base):
    def kernel(ctx, x, f, *args):
        add, act = epilogue(ctx.attrs, lambda m: ExecutionError(m, ctx.node))
        y = base(ctx, x, f)
        bias = args[0]
        if bias.shape != (y.shape[3],):
            raise ExecutionError(f"bias has shape {list(bias.shape)}, expected [{y.shape[3]}]",
                                 ctx.node)
        y = y + bias
        if add:
            if args[1].shape != y.shape:
                raise ExecutionError(f"the residual has shape {list(args[1].shape)}, the "
                                     f"output {list(y.shape)}", ctx.node)
            y = y + args[1]
        return apply_activation(y, act, float(ctx.attrs.get("leakyrelu_alpha", 0.2))).astype(
            x.dtype)
    return kernel


_EPILOGUE_ATTRS = ["num_args: int >= 0", "fused_ops: list(string) = []",
                   "epsilon: float = 0.0001", "leakyrelu_alpha: float = 0.2"]

register_op("_FusedConv2D", inputs=["input: T", "filter: T", "args: num_args * T"],
            outputs=["output: T"], attrs=conv._CONV_ATTRS + _EPILOGUE_ATTRS,
            shape=_fused_shape(conv._conv_shape), kernel=_fused_ref(conv._conv_ref),
            **conv._COMMON,
            doc="Conv2D, then BiasAdd (args[0]), then optionally Add (args[1]: a residual), "
                "then optionally an activation, as fused_ops says: one kernel.")
register_op("_FusedDepthwiseConv2dNative", inputs=["input: T", "filter: T", "args: num_args * T"],
            outputs=["output: T"], attrs=depthwise_conv._DEPTHWISE_ATTRS + _EPILOGUE_ATTRS,
            shape=_fused_shape(depthwise_conv._depthwise_shape),
            kernel=_fused_ref(depthwise_conv._depthwise_ref), **conv._COMMON,
            doc="DepthwiseConv2dNative, then BiasAdd (args[0]), then optionally Add (args[1]), "
                "then optionally an activation, as fused_ops says: one kernel.")


def _max_pool_relu_grad_ref(ctx, x, y, dy):
    dx = conv._max_pool_grad_ref(ctx, x, y, dy)
    return np.where(x > 0, dx, dx.dtype.type(0))


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


def _grad_argmax_bias_shape(ctx) -> list:
    dx = _grad_argmax_shape(ctx)[0]
    return [dx, (dx[3],)]


def _grad_argmax_bias_ref(ctx, x, y, argmax, dy):
    dx = _grad_argmax_ref(ctx, x, y, argmax, dy)
    return dx, np.sum(dx, axis=(0, 1, 2), dtype=dx.dtype)


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
register_op("_MaxPoolGradArgmaxBias", inputs=["orig_input: T", "orig_output: T", "argmax: u8",
                                              "grad: T"],
            outputs=["output: T", "bias_grad: T"],
            attrs=conv._MAX_POOL_ATTRS + ["relu: bool = false"],
            shape=_grad_argmax_bias_shape, kernel=_grad_argmax_bias_ref, **conv._COMMON,
            doc="_MaxPoolGradArgmax, and its output summed per channel (NHWC: BiasAddGrad of "
                "it) in the same pass.")
