"""Gradients of DepthwiseConv2dNative and of its two backprops (second derivatives), as
TensorFlow's: each op is linear in each of its tensor inputs, and the adjoints are the other
two ops of the family with the same window attrs."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]
_WINDOW_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


def _window(op: Operation) -> dict:
    return {k: op.get_attr(k) for k in _WINDOW_ATTRS}


def _shape(t: Tensor) -> Tensor:
    return apply_op("Shape", [t], {"out_type": "i32"})


@RegisterGradient("DepthwiseConv2dNative")
def _depthwise_grad(op: Operation, g: Tensor) -> Grads:
    x, f = op.inputs
    w = _window(op)
    return [apply_op("DepthwiseConv2dNativeBackpropInput", [_shape(x), f, g], w),
            apply_op("DepthwiseConv2dNativeBackpropFilter", [x, _shape(f), g], w)]


@RegisterGradient("DepthwiseConv2dNativeBackpropInput")
def _depthwise_backprop_input_grad(op: Operation, g: Tensor) -> Grads:
    _, f, dy = op.inputs
    w = _window(op)
    return [None, apply_op("DepthwiseConv2dNativeBackpropFilter", [g, _shape(f), dy], w),
            apply_op("DepthwiseConv2dNative", [g, f], w)]


@RegisterGradient("DepthwiseConv2dNativeBackpropFilter")
def _depthwise_backprop_filter_grad(op: Operation, g: Tensor) -> Grads:
    x, _, dy = op.inputs
    w = _window(op)
    return [apply_op("DepthwiseConv2dNativeBackpropInput", [_shape(x), g, dy], w), None,
            apply_op("DepthwiseConv2dNative", [x, g], w)]
