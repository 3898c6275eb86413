"""``fl.layers.max_pooling2d``, ``average_pooling2d`` and their classes, as TensorFlow 1.x's:
one ``MaxPool``/``AvgPool`` over ``pool_size`` windows moved by ``strides``."""
from __future__ import annotations

from typing import Optional

from dsl.array_ops import transpose
from dsl.layers.base import InputSpec, Layer
from dsl.layers.convolutional import conv_output_length, normalize_padding, normalize_tuple
from dsl.layers.core import _data_format
from dsl.nn_conv import avg_pool, max_pool
from dsl.tensor import Tensor, static_shape
from dsl.tensor_shape import TensorShape, as_shape

__all__ = ["MaxPooling2D", "AveragePooling2D", "MaxPool2D", "AveragePool2D", "max_pooling2d",
           "average_pooling2d"]


class _Pooling2D(Layer):
    _fn = None

    def __init__(self, pool_size, strides, padding: str = "valid",
                 data_format: str = "channels_last", name: Optional[str] = None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pool_size = normalize_tuple(pool_size, 2, "pool_size")
        self.strides = normalize_tuple(strides if strides is not None else self.pool_size, 2,
                                       "strides")
        self.padding = normalize_padding(padding)
        self.data_format = _data_format(data_format)
        self.input_spec = InputSpec(ndim=4)

    def call(self, inputs: Tensor) -> Tensor:
        if static_shape(inputs) is not None and len(static_shape(inputs)) != 4:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                             f"expected ndim=4, found ndim={len(static_shape(inputs))}")
        # channels_first runs as NHWC between two transposes (the compiled pools are NHWC)
        first = self.data_format == "channels_first"
        if first:
            inputs = transpose(inputs, [0, 2, 3, 1])
        outputs = type(self)._fn(inputs, ksize=[1] + list(self.pool_size) + [1],
                                 strides=[1] + list(self.strides) + [1],
                                 padding=self.padding.upper(), data_format="NHWC")
        return transpose(outputs, [0, 3, 1, 2]) if first else outputs

    def compute_output_shape(self, input_shape) -> TensorShape:
        input_shape = tuple(as_shape(input_shape).as_list())
        if self.data_format == "channels_first":
            n, c, h, w = input_shape
        else:
            n, h, w, c = input_shape
        oh, ow = (conv_output_length(d, k, self.padding, s) for d, k, s in
                  zip((h, w), self.pool_size, self.strides))
        return TensorShape((n, c, oh, ow) if self.data_format == "channels_first"
                           else (n, oh, ow, c))


class MaxPooling2D(_Pooling2D):
    """Max over each window (``tf.layers.MaxPooling2D``)."""
    _fn = staticmethod(max_pool)


class AveragePooling2D(_Pooling2D):
    """Mean over the in-range elements of each window (``tf.layers.AveragePooling2D``)."""
    _fn = staticmethod(avg_pool)


MaxPool2D = MaxPooling2D
AveragePool2D = AveragePooling2D


def max_pooling2d(inputs, pool_size, strides, padding: str = "valid",
                  data_format: str = "channels_last", name: Optional[str] = None) -> Tensor:
    """Max pooling (``tf.layers.max_pooling2d``)."""
    return MaxPooling2D(pool_size, strides, padding=padding, data_format=data_format,
                        name=name)(inputs)


def average_pooling2d(inputs, pool_size, strides, padding: str = "valid",
                      data_format: str = "channels_last", name: Optional[str] = None) -> Tensor:
    """Average pooling (``tf.layers.average_pooling2d``)."""
    return AveragePooling2D(pool_size, strides, padding=padding, data_format=data_format,
                            name=name)(inputs)
