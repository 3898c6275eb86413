"""``fl.layers.conv2d`` and ``fl.layers.Conv2D``, as TensorFlow 1.x's: a ``Conv2D`` of the
input with ``<scope>/kernel`` ([kernel_h, kernel_w, in_channels, filters]; glorot_uniform by
default), plus ``<scope>/bias`` (zeros), then the activation."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

from dsl.array_ops import transpose
from dsl.init_ops import zeros_initializer
from dsl.layers.base import InputSpec, Layer
from dsl.layers.core import _data_format, add_kernel_and_bias
from dsl.nn import bias_add
from dsl.nn_conv import conv2d as nn_conv2d
from dsl.tensor import Tensor, static_shape
from dsl.tensor_shape import TensorShape, as_shape

__all__ = ["Conv2D", "Convolution2D", "conv2d", "normalize_tuple", "normalize_padding",
           "conv_output_length"]


def normalize_tuple(value: Union[int, Sequence[int]], n: int, name: str) -> Tuple[int, ...]:
    """An int, or n ints, as a tuple of n ints (Keras' rule and error)."""
    if isinstance(value, int):
        return (value,) * n
    try:
        out = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(f"The `{name}` argument must be a tuple of {n} integers. Received: "
                         f"{value}") from None
    if len(out) != n:
        raise ValueError(f"The `{name}` argument must be a tuple of {n} integers. Received: "
                         f"{value}")
    return out


def normalize_padding(value: str) -> str:
    padding = str(value).lower()
    if padding not in ("valid", "same"):
        raise ValueError("The `padding` argument must be a list/tuple or one of \"valid\", "
                         f"\"same\". Received: {value}")
    return padding


def conv_output_length(length, filter_size: int, padding: str, stride: int,
                       dilation: int = 1):
    if length is None:
        return None
    dilated = (filter_size - 1) * dilation + 1
    if padding == "same":
        out = length
    else:
        out = length - dilated + 1
    return (out + stride - 1) // stride


class Conv2D(Layer):
    """2-D convolution layer (``tf.layers.Conv2D``). ``_RANK``: the spatial dims (a subclass
    with another rank, ``Conv1D``, shares the arguments, checks and variables)."""

    _RANK = 2

    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                 data_format: str = "channels_last", dilation_rate=(1, 1), activation=None,
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
        self.kernel_size = normalize_tuple(kernel_size, self._RANK, "kernel_size")
        self.strides = normalize_tuple(strides, self._RANK, "strides")
        self.padding = normalize_padding(padding)
        self.data_format = _data_format(data_format)
        self.dilation_rate = normalize_tuple(dilation_rate, self._RANK, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
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
        self.input_spec = InputSpec(ndim=self._RANK + 2)

    @property
    def _channel_axis(self) -> int:
        return 1 if self.data_format == "channels_first" else -1

    def build(self, input_shape) -> None:
        input_shape = static_shape(input_shape)
        if input_shape is None or len(input_shape) != self._RANK + 2:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                             f"expected ndim={self._RANK + 2}, found shape {input_shape}")
        channels = input_shape[self._channel_axis]
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. The "
                             f"input_shape received is {input_shape}, where axis "
                             f"{self._channel_axis} (0-based) is the channel dimension, which "
                             "found to be `None`.")
        self.input_spec = InputSpec(ndim=self._RANK + 2, axes={self._channel_axis: channels})
        add_kernel_and_bias(self, list(self.kernel_size) + [channels, self.filters], self.filters)

    def call(self, inputs: Tensor) -> Tensor:
        # channels_first runs as NHWC between two transposes: flowc's compiled Conv2D is
        # NHWC (as TensorFlow's CPU kernel, which refuses NCHW)
        first = self.data_format == "channels_first"
        if first:
            inputs = transpose(inputs, [0, 2, 3, 1])
        outputs = nn_conv2d(inputs, self.kernel, strides=[1] + list(self.strides) + [1],
                            padding=self.padding.upper(), data_format="NHWC",
                            dilations=[1] + list(self.dilation_rate) + [1], name="Conv2D")
        return self._finish(outputs, first)

    def _finish(self, outputs: Tensor, first: bool) -> Tensor:
        """The NHWC convolution's result with the bias added, back in channels_first when the
        layer is, through the activation."""
        if self.use_bias:
            outputs = bias_add(outputs, self.bias, data_format="NHWC")
        if first:
            outputs = transpose(outputs, [0, 3, 1, 2])
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def _output_length(self, length, kernel: int, stride: int, dilation: int):
        return conv_output_length(length, kernel, self.padding, stride, dilation)

    def compute_output_shape(self, input_shape) -> TensorShape:
        input_shape = tuple(as_shape(input_shape).as_list())
        if self.data_format == "channels_first":
            n, _, h, w = input_shape
        else:
            n, h, w, _ = input_shape
        oh, ow = (self._output_length(d, k, s, r) for d, k, s, r in
                  zip((h, w), self.kernel_size, self.strides, self.dilation_rate))
        if self.data_format == "channels_first":
            return TensorShape((n, self.filters, oh, ow))
        return TensorShape((n, oh, ow, self.filters))


Convolution2D = Conv2D


def conv2d(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
           data_format: str = "channels_last", dilation_rate=(1, 1), activation=None,
           use_bias: bool = True, kernel_initializer=None, bias_initializer=None,
           kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
           kernel_constraint=None, bias_constraint=None, trainable: bool = True,
           name: Optional[str] = None, reuse=None) -> Tensor:
    """2-D convolution layer (``tf.layers.conv2d``)."""
    layer = Conv2D(filters, kernel_size, strides=strides, padding=padding,
                   data_format=data_format, dilation_rate=dilation_rate, activation=activation,
                   use_bias=use_bias, kernel_initializer=kernel_initializer,
                   bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer, activity_regularizer=activity_regularizer,
                   kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                   trainable=trainable, name=name, _scope=name, _reuse=reuse)
    return layer(inputs)
