"""``fl.layers.conv2d_transpose`` and ``fl.layers.Conv2DTranspose``, as TensorFlow 1.x's: the
transpose of a convolution (``fl.nn.conv2d_transpose``) with ``<scope>/kernel``
([kernel_h, kernel_w, filters, in_channels]; glorot_uniform by default), plus ``<scope>/bias``
(zeros), then the activation. Output size per spatial dim: ``in * stride`` ("same") or
``in * stride + max(kernel - stride, 0)`` ("valid")."""
from __future__ import annotations

from typing import Optional

from dsl.array_ops import shape as shape_of, stack, transpose
from dsl.layers.base import InputSpec
from dsl.layers.convolutional import Conv2D
from dsl.layers.core import add_kernel_and_bias
from dsl.nn_conv import conv2d_transpose as nn_conv2d_transpose
from dsl.tensor import Tensor, static_shape

__all__ = ["Conv2DTranspose", "Convolution2DTranspose", "conv2d_transpose",
           "deconv_output_length"]


def deconv_output_length(length, filter_size: int, padding: str, stride: int):
    """The spatial size a transposed convolution produces (Keras' rule, no output padding)."""
    if length is None:
        return None
    if padding == "valid":
        return length * stride + max(filter_size - stride, 0)
    return length * stride


class Conv2DTranspose(Conv2D):
    """Transposed 2-D convolution layer (``tf.layers.Conv2DTranspose``)."""

    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                 data_format: str = "channels_last", activation=None, use_bias: bool = True,
                 kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable: bool = True, name: Optional[str] = None,
                 **kwargs):
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, activation=activation, use_bias=use_bias,
                         kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer,
                         kernel_regularizer=kernel_regularizer,
                         bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                         trainable=trainable, name=name, **kwargs)

    def build(self, input_shape) -> None:
        input_shape = static_shape(input_shape)
        if input_shape is None or len(input_shape) != 4:
            raise ValueError(f"Inputs should have rank 4. Received input shape: {input_shape}")
        channels = input_shape[self._channel_axis]
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. "
                             "Found `None`.")
        self.input_spec = InputSpec(ndim=4, axes={self._channel_axis: channels})
        add_kernel_and_bias(self, list(self.kernel_size) + [self.filters, channels],
                            self.filters)

    def call(self, inputs: Tensor) -> Tensor:
        first = self.data_format == "channels_first"
        if first:
            inputs = transpose(inputs, [0, 2, 3, 1])
        dims = static_shape(inputs) or (None,) * 4
        dynamic = shape_of(inputs)
        sizes = []
        for axis, k, s in ((1, self.kernel_size[0], self.strides[0]),
                           (2, self.kernel_size[1], self.strides[1])):
            if dims[axis] is not None:
                sizes.append(deconv_output_length(dims[axis], k, self.padding, s))
            elif self.padding == "valid":
                sizes.append(dynamic[axis] * s + max(k - s, 0))
            else:
                sizes.append(dynamic[axis] * s)
        output_shape = stack([dynamic[0], sizes[0], sizes[1], self.filters])
        outputs = nn_conv2d_transpose(inputs, self.kernel, output_shape,
                                      strides=[1] + list(self.strides) + [1],
                                      padding=self.padding.upper(), data_format="NHWC",
                                      name="conv2d_transpose")
        outputs.set_shape([dims[0]] + [s if isinstance(s, int) else None for s in sizes] +
                          [self.filters])
        return self._finish(outputs, first)

    def _output_length(self, length, kernel: int, stride: int, dilation: int):
        return deconv_output_length(length, kernel, self.padding, stride)


Convolution2DTranspose = Conv2DTranspose


def conv2d_transpose(inputs, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                     data_format: str = "channels_last", activation=None, use_bias: bool = True,
                     kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                     bias_constraint=None, trainable: bool = True, name: Optional[str] = None,
                     reuse=None) -> Tensor:
    """Transposed 2-D convolution layer (``tf.layers.conv2d_transpose``)."""
    layer = Conv2DTranspose(filters, kernel_size, strides=strides, padding=padding,
                            data_format=data_format, activation=activation, use_bias=use_bias,
                            kernel_initializer=kernel_initializer,
                            bias_initializer=bias_initializer,
                            kernel_regularizer=kernel_regularizer,
                            bias_regularizer=bias_regularizer,
                            activity_regularizer=activity_regularizer,
                            kernel_constraint=kernel_constraint,
                            bias_constraint=bias_constraint, trainable=trainable, name=name,
                            _scope=name, _reuse=reuse)
    return layer(inputs)
