"""``fl.layers.conv1d`` and ``fl.layers.Conv1D``, as TensorFlow 1.x's: ``fl.nn.conv1d`` (a
``Conv2D`` over an inserted dim of 1) of the input with ``<scope>/kernel`` ([kernel_size,
in_channels, filters]; glorot_uniform by default), plus ``<scope>/bias`` (zeros), then the
activation. ``channels_first`` inputs ([batch, channels, width]) run between two
transposes, as ``Conv2D`` does."""
from __future__ import annotations

from typing import Optional

from dsl.array_ops import transpose
from dsl.init_ops import zeros_initializer
from dsl.layers.base import InputSpec, Layer
from dsl.layers.convolutional import conv_output_length, normalize_padding, normalize_tuple
from dsl.layers.core import _data_format, add_kernel_and_bias
from dsl.nn import bias_add
from dsl.nn_tf1_extra import conv1d as nn_conv1d
from dsl.tensor import Tensor, static_shape
from dsl.tensor_shape import TensorShape, as_shape

__all__ = ["Conv1D", "Convolution1D", "conv1d"]


class Conv1D(Layer):
    """1-D convolution layer (``tf.layers.Conv1D``)."""

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid",
                 data_format: str = "channels_last", dilation_rate=1, activation=None,
                 use_bias: bool = True, kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable: bool = True,
                 name: Optional[str] = None, **kwargs):
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        self.filters = int(filters)
        if self.filters <= 0:
            raise ValueError(f"Invalid value for argument `filters`. Expected a strictly "
                             f"positive value. Received filters={filters}.")
        self.kernel_size = normalize_tuple(kernel_size, 1, "kernel_size")
        self.strides = normalize_tuple(strides, 1, "strides")
        self.padding = normalize_padding(padding)
        self.data_format = _data_format(data_format)
        self.dilation_rate = normalize_tuple(dilation_rate, 1, "dilation_rate")
        if self.strides[0] > 1 and self.dilation_rate[0] > 1:
            raise ValueError("`strides > 1` not supported in conjunction with "
                             f"`dilation_rate > 1`. Received: strides={self.strides} and "
                             f"dilation_rate={self.dilation_rate}")
        self.activation = activation
        self.use_bias = bool(use_bias)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer if bias_initializer is not None \
            else zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.input_spec = InputSpec(ndim=3)

    @property
    def _channel_axis(self) -> int:
        return 1 if self.data_format == "channels_first" else -1

    def build(self, input_shape) -> None:
        input_shape = static_shape(input_shape)
        if input_shape is None or len(input_shape) != 3:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                             f"expected ndim=3, found shape {input_shape}")
        channels = input_shape[self._channel_axis]
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. The "
                             f"input_shape received is {input_shape}, where axis "
                             f"{self._channel_axis} (0-based) is the channel dimension, which "
                             "found to be `None`.")
        self.input_spec = InputSpec(ndim=3, axes={self._channel_axis: channels})
        add_kernel_and_bias(self, [self.kernel_size[0], channels, self.filters], self.filters)

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
