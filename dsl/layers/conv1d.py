"""``fl.layers.conv1d`` and ``fl.layers.Conv1D``, as TensorFlow 1.x's: ``fl.nn.conv1d`` (a
``Conv2D`` over an inserted dim of 1) of the input with ``<scope>/kernel`` ([kernel_size,
in_channels, filters]; glorot_uniform by default), plus ``<scope>/bias`` (zeros), then the
activation. ``channels_first`` inputs ([batch, channels, width]) run between two
transposes, as ``Conv2D`` does."""
from __future__ import annotations

from typing import Optional

from dsl.array_ops import transpose
from dsl.layers.convolutional import Conv2D, conv_output_length
from dsl.nn import bias_add
from dsl.nn_tf1_extra import conv1d as nn_conv1d
from dsl.tensor import Tensor
from dsl.tensor_shape import TensorShape, as_shape

__all__ = ["Conv1D", "Convolution1D", "conv1d"]


class Conv1D(Conv2D):
    """1-D convolution layer (``tf.layers.Conv1D``): ``Conv2D``'s arguments, checks and
    variables over one spatial dim."""

    _RANK = 1

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid",
                 data_format: str = "channels_last", dilation_rate=1, activation=None,
                 use_bias: bool = True, kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable: bool = True,
                 name: Optional[str] = None, **kwargs):
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         activation=activation, use_bias=use_bias,
                         kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer,
                         kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                         trainable=trainable, name=name, **kwargs)

    def call(self, inputs: Tensor) -> Tensor:
        first = self.data_format == "channels_first"
        if first:
            inputs = transpose(inputs, [0, 2, 1])
        outputs = nn_conv1d(inputs, self.kernel, stride=self.strides[0],
                            padding=self.padding.upper(), data_format="NWC",
                            dilations=self.dilation_rate[0], name="conv1d")
        if self.use_bias:
            outputs = bias_add(outputs, self.bias, data_format="NHWC")
        if first:
            outputs = transpose(outputs, [0, 2, 1])
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape) -> TensorShape:
        n, a, b = tuple(as_shape(input_shape).as_list())
        width = b if self.data_format == "channels_first" else a
        out = conv_output_length(width, self.kernel_size[0], self.padding, self.strides[0],
                                 self.dilation_rate[0])
        if self.data_format == "channels_first":
            return TensorShape((n, self.filters, out))
        return TensorShape((n, out, self.filters))


Convolution1D = Conv1D


def conv1d(inputs, filters: int, kernel_size, strides=1, padding: str = "valid",
           data_format: str = "channels_last", dilation_rate=1, activation=None,
           use_bias: bool = True, kernel_initializer=None, bias_initializer=None,
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
           kernel_constraint=None, bias_constraint=None, trainable: bool = True,
           name: Optional[str] = None, reuse=None) -> Tensor:
    """1-D convolution layer (``tf.layers.conv1d``)."""
    layer = Conv1D(filters, kernel_size, strides=strides, padding=padding,
                   data_format=data_format, dilation_rate=dilation_rate, activation=activation,
                   use_bias=use_bias, kernel_initializer=kernel_initializer,
                   bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                   kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                   trainable=trainable, name=name, _scope=name, _reuse=reuse)
    return layer(inputs)
