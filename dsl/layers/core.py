"""``fl.layers.dense``, ``dropout``, ``flatten`` and their classes, as TensorFlow 1.x's
``tf.layers`` (Keras' Dense, Dropout and Flatten under TF1 variable scopes)."""
from __future__ import annotations

import math
import numbers
from typing import Optional

from dsl.array_ops import identity, reshape, shape, transpose
from dsl.init_ops import zeros_initializer
from dsl.layers.base import InputSpec, Layer, select_by_training
from dsl.linalg_ops import matmul
from dsl.nn import bias_add
from dsl.nn_losses import dropout as nn_dropout
from dsl.ops import convert_to_tensor
from dsl.tensor import Tensor, static_shape
from dsl.tensor_shape import TensorShape, as_shape

__all__ = ["Dense", "Dropout", "Flatten", "dense", "dropout", "flatten"]


def add_kernel_and_bias(layer: Layer, kernel_shape, bias_size: int) -> None:
    """``layer.kernel`` (and ``layer.bias`` when it uses one) from the layer's own
    initializers, regularizers and constraints, as Dense and Conv2D make them; built."""
    layer.kernel = layer.add_weight("kernel", shape=list(kernel_shape),
                                    initializer=layer.kernel_initializer,
                                    regularizer=layer.kernel_regularizer,
                                    constraint=layer.kernel_constraint, dtype=layer.dtype,
                                    trainable=True)
    layer.bias = None
    if layer.use_bias:
        layer.bias = layer.add_weight("bias", shape=[bias_size],
                                      initializer=layer.bias_initializer,
                                      regularizer=layer.bias_regularizer,
                                      constraint=layer.bias_constraint, dtype=layer.dtype,
                                      trainable=True)
    layer.built = True


class Dense(Layer):
    """``activation(inputs @ kernel + bias)``; ``kernel`` is [last input dim, units]. Inputs
    of rank > 2 are multiplied along their last dim."""

    def __init__(self, units: int, activation=None, use_bias: bool = True,
                 kernel_initializer=None, bias_initializer=None, kernel_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable: bool = True, name: Optional[str] = None,
                 **kwargs):
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        if self.units <= 0:
            raise ValueError(f"Received an invalid value for `units`, expected a positive "
                             f"integer. Received: units={units}")
        self.activation = activation
        self.use_bias = bool(use_bias)
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer if bias_initializer is not None \
            else zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.input_spec = InputSpec(min_ndim=2)

    def build(self, input_shape) -> None:
        input_shape = static_shape(input_shape)
        if input_shape is None or len(input_shape) < 2:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                             f"expected min_ndim=2, found shape {input_shape}")
        last = input_shape[-1]
        if last is None:
            raise ValueError("The last dimension of the inputs to a Dense layer should be "
                             f"defined. Found None. Full input shape received: {input_shape}")
        self.input_spec = InputSpec(min_ndim=2, axes={-1: last})
        add_kernel_and_bias(self, [last, self.units], self.units)

    def call(self, inputs: Tensor) -> Tensor:
        rank = None if static_shape(inputs) is None else len(static_shape(inputs))
        if rank == 2 or rank is None:
            outputs = matmul(inputs, self.kernel)
        else:
            # a product along the last dim, as tensordot: [..., k] -> [-1, k] @ kernel
            flat = reshape(inputs, [-1, static_shape(inputs)[-1]])
            outputs = matmul(flat, self.kernel)
            lead = shape(inputs)[:-1]
            from dsl.array_ops import concat
            outputs = reshape(outputs, concat([lead, [self.units]], 0), name="Tensordot")
        if self.use_bias:
            outputs = bias_add(outputs, self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape) -> TensorShape:
        input_shape = tuple(as_shape(input_shape).as_list())
        return TensorShape(input_shape[:-1] + (self.units,))


def dense(inputs, units: int, activation=None, use_bias: bool = True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable: bool = True, name: Optional[str] = None, reuse=None) -> Tensor:
    """A densely-connected layer (``tf.layers.dense``): ``activation(inputs @ kernel +
    bias)`` with variables ``<scope>/kernel`` (glorot_uniform by default) and
    ``<scope>/bias`` (zeros)."""
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer,
                  kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
                  trainable=trainable, name=name, _scope=name, _reuse=reuse)
    return layer(inputs)


class Dropout(Layer):
    """Zero each element with probability ``rate`` and scale the rest by ``1 / (1 - rate)``
    when ``training``; the identity otherwise."""

    def __init__(self, rate=0.5, noise_shape=None, seed: Optional[int] = None,
                 name: Optional[str] = None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(rate, numbers.Real) and not 0 <= rate <= 1:
            raise ValueError(f"Invalid value received for argument `rate`. Expected a float "
                             f"value between 0 and 1. Received: rate={rate}")
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed

    def _noise_shape(self, inputs: Tensor):
        if self.noise_shape is None:
            return None
        dims = shape(inputs)
        return [dims[i] if d is None else d for i, d in enumerate(self.noise_shape)] \
            if any(d is None for d in self.noise_shape) else list(self.noise_shape)

    def call(self, inputs: Tensor, training=False) -> Tensor:
        if isinstance(self.rate, numbers.Real) and self.rate == 0:
            return identity(inputs)
        if isinstance(self.rate, numbers.Real) and self.rate == 1:
            from dsl.array_ops import zeros_like

            def dropped():
                return zeros_like(inputs)
        else:
            def dropped():
                noise = self._noise_shape(inputs)
                if noise is not None and not isinstance(noise, Tensor) and any(
                        isinstance(d, Tensor) for d in noise):
                    from dsl.array_ops import stack
                    noise = stack([convert_to_tensor(d) for d in noise])
                return nn_dropout(inputs, rate=self.rate, noise_shape=noise, seed=self.seed)
        return select_by_training(training, dropped, lambda: identity(inputs))

    def compute_output_shape(self, input_shape) -> TensorShape:
        return as_shape(input_shape)


def dropout(inputs, rate=0.5, noise_shape=None, seed: Optional[int] = None, training=False,
            name: Optional[str] = None) -> Tensor:
    """Dropout (``tf.layers.dropout``): only when ``training`` (a Python bool, or a bool
    tensor that decides per step); note ``rate`` is the fraction dropped, not kept."""
    layer = Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)
    return layer(inputs, training=training)


class Flatten(Layer):
    """[batch, ...] -> [batch, product of the rest]; ``data_format='channels_first'`` first
    moves the channels last, so the order matches channels_last."""

    def __init__(self, data_format: Optional[str] = None, name: Optional[str] = None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.data_format = _data_format(data_format)

    def call(self, inputs: Tensor) -> Tensor:
        s = static_shape(inputs)
        rank = None if s is None else len(s)
        if self.data_format == "channels_first" and rank is not None and rank > 1:
            inputs = transpose(inputs, [0] + list(range(2, rank)) + [1])
            s = static_shape(inputs)
        if rank == 1:
            from dsl.array_ops import expand_dims
            return expand_dims(inputs, 1)
        if s is not None and all(d is not None for d in s[1:]):
            return reshape(inputs, [-1, math.prod(s[1:])])
        if s is not None and s[0] is not None:
            return reshape(inputs, [s[0], -1])
        from dsl.array_ops import stack
        return reshape(inputs, stack([shape(inputs)[0], convert_to_tensor(-1)]))

    def compute_output_shape(self, input_shape) -> TensorShape:
        input_shape = tuple(as_shape(input_shape).as_list())
        rest = input_shape[1:]
        return TensorShape((input_shape[0],
                            None if any(d is None for d in rest) else math.prod(rest)))


def flatten(inputs, name: Optional[str] = None, data_format: str = "channels_last") -> Tensor:
    """Flatten all but the first dim (``tf.layers.flatten``)."""
    return Flatten(data_format=data_format, name=name)(inputs)


def _data_format(value: Optional[str]) -> str:
    fmt = (value or "channels_last").lower()
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError("The `data_format` argument must be one of \"channels_first\", "
                         f"\"channels_last\". Received: {value}")
    return fmt
