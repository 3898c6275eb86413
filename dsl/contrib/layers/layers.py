"""The layer functions of TensorFlow 1.x's ``tf.contrib.layers`` (tf_slim's ``layers``):
``fully_connected``, ``conv2d``, ``conv2d_transpose``, ``separable_conv2d``, the pools,
``flatten``, ``dropout``, ``batch_norm``, ``layer_norm``, ``bias_add``, ``one_hot_encoding``,
``embed_sequence``, ``repeat`` and ``stack``.

Each one opens a variable scope (the ``scope`` given, else a unique default: ``Conv``,
``fully_connected``, ``BatchNorm``, ...) and makes its weights with ``model_variable``, so
they are named as slim names them (``Conv/weights``, ``Conv/biases``, ``BatchNorm/beta``,
``BatchNorm/moving_mean``) and sit in ``GraphKeys.MODEL_VARIABLES`` as well as the global (and
trainable) variables; a TF1 checkpoint restores into them by name. A regularizer's loss goes
to ``GraphKeys.REGULARIZATION_LOSSES``. Every function is decorated with ``add_arg_scope``.
The math is that of ``fl.nn``'s ops (``fl.layers`` computes the same): ``activation_fn``
defaults to relu for ``fully_connected`` and the convolutions, and a ``normalizer_fn``
replaces the biases.
"""
from __future__ import annotations

import functools
import math
import numbers
from typing import Optional

from dsl.array_ops import (concat, expand_dims, identity, one_hot, reshape,
                           shape as shape_of, squeeze, stack as stack_tensors, transpose)
from dsl.context import control_dependencies, name_scope
from dsl.contrib.framework import add_arg_scope, model_variable
from dsl.contrib.layers.regularizers import xavier_initializer
from dsl.embedding_ops import embedding_lookup
from dsl.init_ops import ones_initializer, zeros_initializer
from dsl.layers.base import select_by_training, training_value
from dsl.layers.conv_transpose import deconv_output_length
from dsl.layers.convolutional import normalize_padding, normalize_tuple
from dsl.linalg_ops import matmul
from dsl.math_ops import cast, elu as _elu, relu as _relu, relu6 as _relu6, sqrt, square
from dsl.nn import bias_add as nn_bias_add, softmax as nn_softmax
from dsl.nn_conv import avg_pool, conv2d as nn_conv2d, conv2d_transpose as nn_conv2d_transpose
from dsl.nn_conv import depthwise_conv2d, max_pool
from dsl.nn_losses import dropout as nn_dropout
from dsl.nn_norm import batch_normalization as nn_batch_normalization
from dsl.nn_norm import fused_batch_norm, moments
from dsl.ops import constant, convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor, static_shape
from dsl.train.moving_averages import assign_moving_average
from dsl.variable_scope import variable_scope
from dsl.variables import GraphKeys, add_to_collections
from runtime.dtypes import DType

__all__ = ["avg_pool2d", "max_pool2d", "batch_norm", "bias_add", "convolution",
           "convolution1d", "convolution2d", "conv1d", "conv2d", "convolution2d_transpose",
           "conv2d_transpose", "separable_convolution2d", "separable_conv2d", "dropout",
           "flatten", "fully_connected", "layer_norm", "one_hot_encoding", "embed_sequence",
           "repeat", "stack", "softmax", "unit_norm", "linear", "relu", "relu6", "elu"]

NHWC, NCHW = "NHWC", "NCHW"


def _collections(variables_collections, name: str):
    """The collections a weight ``name`` goes to: ``variables_collections`` itself (a list)
    or its entry for ``name`` (a dict)."""
    if isinstance(variables_collections, dict):
        return variables_collections.get(name)
    return variables_collections


def _collect(outputs_collections, outputs: Tensor) -> Tensor:
    if outputs_collections:
        add_to_collections(outputs_collections, outputs)
    return outputs


def _check_format(data_format: str, allowed=(NHWC, NCHW)) -> None:
    if data_format not in allowed:
        raise ValueError(f"data_format has to be either {' or '.join(allowed)}, got "
                         f"{data_format!r}.")


def _known_rank(inputs: Tensor, what: str) -> int:
    s = static_shape(inputs)
    if s is None:
        raise ValueError(f"{what}: inputs {inputs.name} have undefined rank.")
    return len(s)


def _channels(inputs: Tensor, axis: int, what: str) -> int:
    c = static_shape(inputs)[axis]
    if c is None:
        raise ValueError(f"{what}: the channel dimension of {inputs.name} must be known, "
                         f"found shape {static_shape(inputs)}.")
    return int(c)


def _finish(outputs: Tensor, normalizer_fn, normalizer_params, activation_fn,
            outputs_collections) -> Tensor:
    if normalizer_fn is not None:
        outputs = normalizer_fn(outputs, **(normalizer_params or {}))
    if activation_fn is not None:
        outputs = activation_fn(outputs)
    return _collect(outputs_collections, outputs)


def _finish_nhwc(outputs: Tensor, biases, first: bool, normalizer_fn, normalizer_params,
                 activation_fn, outputs_collections) -> Tensor:
    """An NHWC result: its biases added, back to NCHW where the input was (``first``), then
    ``_finish``."""
    if biases is not None:
        outputs = nn_bias_add(outputs, biases)
    if first:
        outputs = transpose(outputs, [0, 3, 1, 2])
    return _finish(outputs, normalizer_fn, normalizer_params, activation_fn,
                   outputs_collections)


def _weights_and_biases(weights_shape, bias_size: int, dtype, use_bias: bool,
                        weights_initializer, weights_regularizer, biases_initializer,
                        biases_regularizer, variables_collections, trainable,
                        weights_name: str = "weights"):
    weights = model_variable(weights_name, shape=list(weights_shape), dtype=dtype,
                             initializer=weights_initializer, regularizer=weights_regularizer,
                             collections=_collections(variables_collections, "weights"),
                             trainable=trainable)
    biases = None
    if use_bias:
        biases = model_variable("biases", shape=[bias_size], dtype=dtype,
                                initializer=biases_initializer,
                                regularizer=biases_regularizer,
                                collections=_collections(variables_collections, "biases"),
                                trainable=trainable)
    return weights, biases


# --- dense and convolutions ------------------------------------------------------------------
@add_arg_scope
def fully_connected(inputs, num_outputs: int, activation_fn=_relu, normalizer_fn=None,
                    normalizer_params=None, weights_initializer=xavier_initializer(),
                    weights_regularizer=None, biases_initializer=zeros_initializer(),
                    biases_regularizer=None, reuse=None, variables_collections=None,
                    outputs_collections=None, trainable: bool = True, scope=None) -> Tensor:
    """``activation_fn(inputs @ weights + biases)`` with ``<scope>/weights`` [last input
    dim, num_outputs] (xavier) and ``<scope>/biases`` (zeros; none when ``biases_initializer``
    is None or a ``normalizer_fn`` is given). Inputs of rank > 2 are multiplied along their
    last dim."""
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, numbers.Integral):
        raise ValueError(f"num_outputs type should be one of [int], got {type(num_outputs)}.")
    with variable_scope(scope, "fully_connected", reuse=reuse):
        inputs = convert_to_tensor(inputs)
        dims = static_shape(inputs)
        if dims is None or len(dims) < 2 or dims[-1] is None:
            raise ValueError(f"fully_connected: the last dimension of the inputs "
                             f"{inputs.name} must be known and the rank at least 2, found "
                             f"shape {dims}.")
        use_bias = normalizer_fn is None and biases_initializer is not None
        weights, biases = _weights_and_biases(
            [dims[-1], int(num_outputs)], int(num_outputs), inputs.dtype, use_bias,
            weights_initializer, weights_regularizer, biases_initializer, biases_regularizer,
            variables_collections, trainable)
        if len(dims) == 2:
            outputs = matmul(inputs, weights)
        else:
            flat = matmul(reshape(inputs, [-1, dims[-1]]), weights)
            outputs = reshape(flat, concat([shape_of(inputs)[:-1], [int(num_outputs)]], 0),
                              name="Tensordot")
            outputs.set_shape(list(dims[:-1]) + [int(num_outputs)])
        if biases is not None:
            outputs = nn_bias_add(outputs, biases)
        return _finish(outputs, normalizer_fn, normalizer_params, activation_fn,
                       outputs_collections)


def _conv2d_nhwc(inputs: Tensor, weights, stride, padding: str, rate) -> Tensor:
    return nn_conv2d(inputs, weights, strides=[1, stride[0], stride[1], 1], padding=padding,
                     data_format=NHWC, dilations=[1, rate[0], rate[1], 1])


@add_arg_scope
def convolution(inputs, num_outputs: int, kernel_size, stride=1, padding: str = "SAME",
                data_format: Optional[str] = None, rate=1, activation_fn=_relu,
                normalizer_fn=None, normalizer_params=None,
                weights_initializer=xavier_initializer(), weights_regularizer=None,
                biases_initializer=zeros_initializer(), biases_regularizer=None, reuse=None,
                variables_collections=None, outputs_collections=None, trainable: bool = True,
                scope=None, conv_dims: Optional[int] = None) -> Tensor:
    """A 1-D (rank-3 inputs) or 2-D (rank-4) convolution with ``<scope>/weights``
    ([*kernel_size, in_channels, num_outputs]) and ``<scope>/biases``; default scope ``Conv``.
    ``rate`` dilates the kernel (then ``stride`` must be 1)."""
    if data_format not in (None, "NWC", "NCW", "NHWC", "NCHW", "NDHWC", "NCDHW"):
        raise ValueError(f"Invalid data_format: {data_format!r}")
    with variable_scope(scope, "Conv", reuse=reuse):
        inputs = convert_to_tensor(inputs)
        rank = _known_rank(inputs, "convolution")
        if conv_dims is not None and conv_dims + 2 != rank:
            raise ValueError(f"Convolution expects input with rank {conv_dims + 2}, got {rank}")
        if rank not in (3, 4):
            raise ValueError(f"Convolution not supported for input with rank {rank} (flowc "
                             "has 1-D and 2-D convolutions)")
        n = rank - 2
        kernel = normalize_tuple(kernel_size, n, "kernel_size")
        strides = normalize_tuple(stride, n, "strides")
        rates = normalize_tuple(rate, n, "dilation_rate")
        if max(strides) > 1 and max(rates) > 1:
            raise ValueError("`strides > 1` not supported in conjunction with "
                             f"`dilation_rate > 1`. Received: strides={strides} and "
                             f"dilation_rate={rates}")
        padding = normalize_padding(padding).upper()
        first = bool(data_format) and data_format.startswith("NC")
        channels = _channels(inputs, 1 if first else -1, "convolution")
        use_bias = normalizer_fn is None and biases_initializer is not None
        weights, biases = _weights_and_biases(
            list(kernel) + [channels, int(num_outputs)], int(num_outputs), inputs.dtype,
            use_bias, weights_initializer, weights_regularizer, biases_initializer,
            biases_regularizer, variables_collections, trainable)
        x = inputs
        if first:   # the compiled convolutions are channels-last
            x = transpose(x, [0] + list(range(2, rank)) + [1])
        if n == 1:
            w = expand_dims(weights, 0)
            outputs = squeeze(_conv2d_nhwc(expand_dims(x, 1), w, (1, strides[0]), padding,
                                           (1, rates[0])), [1])
        else:
            outputs = _conv2d_nhwc(x, weights, strides, padding, rates)
        if biases is not None:
            outputs = nn_bias_add(outputs, biases)
        if first:
            outputs = transpose(outputs, [0, rank - 1] + list(range(1, rank - 1)))
        return _finish(outputs, normalizer_fn, normalizer_params, activation_fn,
                       outputs_collections)


def _fixed_rank(conv_dims: int):
    def conv(inputs, num_outputs, kernel_size, stride=1, padding="SAME", data_format=None,
             rate=1, activation_fn=_relu, normalizer_fn=None, normalizer_params=None,
             weights_initializer=xavier_initializer(), weights_regularizer=None,
             biases_initializer=zeros_initializer(), biases_regularizer=None, reuse=None,
             variables_collections=None, outputs_collections=None, trainable=True,
             scope=None):
        return convolution(inputs, num_outputs, kernel_size, stride=stride, padding=padding,
                           data_format=data_format, rate=rate, activation_fn=activation_fn,
                           normalizer_fn=normalizer_fn, normalizer_params=normalizer_params,
                           weights_initializer=weights_initializer,
                           weights_regularizer=weights_regularizer,
                           biases_initializer=biases_initializer,
                           biases_regularizer=biases_regularizer, reuse=reuse,
                           variables_collections=variables_collections,
                           outputs_collections=outputs_collections, trainable=trainable,
                           scope=scope, conv_dims=conv_dims)
    conv.__name__ = conv.__qualname__ = f"convolution{conv_dims}d"
    conv.__doc__ = f"``convolution`` of rank-{conv_dims + 2} inputs."
    return add_arg_scope(conv)


convolution1d = _fixed_rank(1)
convolution2d = _fixed_rank(2)
conv1d = convolution1d
conv2d = convolution2d


@add_arg_scope
def convolution2d_transpose(inputs, num_outputs: int, kernel_size, stride=1,
                            padding: str = "SAME", data_format: str = NHWC,
                            activation_fn=_relu, normalizer_fn=None, normalizer_params=None,
                            weights_initializer=xavier_initializer(),
                            weights_regularizer=None, biases_initializer=zeros_initializer(),
                            biases_regularizer=None, reuse=None, variables_collections=None,
                            outputs_collections=None, trainable: bool = True,
                            scope=None) -> Tensor:
    """The transpose of a 2-D convolution, with ``<scope>/weights`` ([kh, kw, num_outputs,
    in_channels]) and ``<scope>/biases``; default scope ``Conv2d_transpose``. Each spatial
    dim becomes ``in * stride`` (SAME) or ``in * stride + max(kernel - stride, 0)``
    (VALID)."""
    with variable_scope(scope, "Conv2d_transpose", reuse=reuse):
        _check_format(data_format)
        inputs = convert_to_tensor(inputs)
        if _known_rank(inputs, "conv2d_transpose") != 4:
            raise ValueError(f"Inputs should have rank 4. Received input shape: "
                             f"{static_shape(inputs)}")
        kernel = normalize_tuple(kernel_size, 2, "kernel_size")
        strides = normalize_tuple(stride, 2, "strides")
        pad = normalize_padding(padding)
        first = data_format == NCHW
        channels = _channels(inputs, 1 if first else -1, "conv2d_transpose")
        use_bias = normalizer_fn is None and biases_initializer is not None
        weights, biases = _weights_and_biases(
            list(kernel) + [int(num_outputs), channels], int(num_outputs), inputs.dtype,
            use_bias, weights_initializer, weights_regularizer, biases_initializer,
            biases_regularizer, variables_collections, trainable)
        x = transpose(inputs, [0, 2, 3, 1]) if first else inputs
        dims = static_shape(x)
        dynamic = shape_of(x)
        sizes = []
        for axis, k, s in ((1, kernel[0], strides[0]), (2, kernel[1], strides[1])):
            if dims[axis] is not None:
                sizes.append(deconv_output_length(dims[axis], k, pad, s))
            else:
                sizes.append(dynamic[axis] * s + (max(k - s, 0) if pad == "valid" else 0))
        outputs = nn_conv2d_transpose(x, weights, stack_tensors([dynamic[0], sizes[0],
                                                                 sizes[1], int(num_outputs)]),
                                      strides=[1, strides[0], strides[1], 1],
                                      padding=pad.upper(), data_format=NHWC,
                                      name="conv2d_transpose")
        outputs.set_shape([dims[0]] + [s if isinstance(s, int) else None for s in sizes] +
                          [int(num_outputs)])
        return _finish_nhwc(outputs, biases, first, normalizer_fn, normalizer_params,
                            activation_fn, outputs_collections)


conv2d_transpose = convolution2d_transpose


@add_arg_scope
def separable_convolution2d(inputs, num_outputs, kernel_size, depth_multiplier: int = 1,
                            stride=1, padding: str = "SAME", data_format: str = NHWC, rate=1,
                            activation_fn=_relu, normalizer_fn=None, normalizer_params=None,
                            weights_initializer=xavier_initializer(),
                            pointwise_initializer=None, weights_regularizer=None,
                            biases_initializer=zeros_initializer(), biases_regularizer=None,
                            reuse=None, variables_collections=None, outputs_collections=None,
                            trainable: bool = True, scope=None) -> Tensor:
    """A depthwise convolution (``<scope>/depthwise_weights``, [kh, kw, in_channels,
    depth_multiplier]) then, when ``num_outputs`` is not None, a 1x1 convolution
    (``<scope>/pointwise_weights``, [1, 1, in_channels * depth_multiplier, num_outputs]),
    plus ``<scope>/biases``; default scope ``SeparableConv2d``."""
    _check_format(data_format)
    with variable_scope(scope, "SeparableConv2d", reuse=reuse):
        inputs = convert_to_tensor(inputs)
        if _known_rank(inputs, "separable_conv2d") != 4:
            raise ValueError(f"separable_conv2d: inputs should have rank 4, found shape "
                             f"{static_shape(inputs)}")
        kernel = normalize_tuple(kernel_size, 2, "kernel_size")
        strides = normalize_tuple(stride, 2, "strides")
        rates = normalize_tuple(rate, 2, "dilation_rate")
        pad = normalize_padding(padding).upper()
        first = data_format == NCHW
        channels = _channels(inputs, 1 if first else -1, "separable_conv2d")
        dtype = inputs.dtype
        weights_collections = _collections(variables_collections, "weights")
        depthwise = model_variable("depthwise_weights",
                                   shape=list(kernel) + [channels, int(depth_multiplier)],
                                   dtype=dtype, initializer=weights_initializer,
                                   regularizer=weights_regularizer, trainable=trainable,
                                   collections=weights_collections)
        out_channels = channels * int(depth_multiplier)
        pointwise = None
        if num_outputs is not None:
            pointwise = model_variable(
                "pointwise_weights", shape=[1, 1, out_channels, int(num_outputs)],
                dtype=dtype, initializer=pointwise_initializer or weights_initializer,
                regularizer=weights_regularizer, trainable=trainable,
                collections=weights_collections)
            out_channels = int(num_outputs)
        biases = None
        if normalizer_fn is None and biases_initializer is not None:
            biases = model_variable("biases", shape=[out_channels], dtype=dtype,
                                    initializer=biases_initializer,
                                    regularizer=biases_regularizer, trainable=trainable,
                                    collections=_collections(variables_collections, "biases"))
        x = transpose(inputs, [0, 2, 3, 1]) if first else inputs
        outputs = depthwise_conv2d(x, depthwise, [1, strides[0], strides[1], 1], pad,
                                   rate=list(rates))
        if pointwise is not None:
            outputs = nn_conv2d(outputs, pointwise, strides=[1, 1, 1, 1], padding="VALID")
        return _finish_nhwc(outputs, biases, first, normalizer_fn, normalizer_params,
                            activation_fn, outputs_collections)


separable_conv2d = separable_convolution2d


@add_arg_scope
def bias_add(inputs, activation_fn=None, initializer=zeros_initializer(), regularizer=None,
             reuse=None, variables_collections=None, outputs_collections=None,
             trainable: bool = True, data_format: str = NHWC, scope=None) -> Tensor:
    """``inputs + <scope>/biases`` along the channel dim; default scope ``BiasAdd``."""
    _check_format(data_format)
    with variable_scope(scope, "BiasAdd", reuse=reuse):
        inputs = convert_to_tensor(inputs)
        rank = _known_rank(inputs, "bias_add")
        if rank != 4 and data_format == NCHW:
            raise ValueError("Data format NCHW only supports 4D Tensor")
        channels = _channels(inputs, 1 if data_format == NCHW else -1, "bias_add")
        biases = model_variable("biases", shape=[channels], dtype=inputs.dtype,
                                initializer=initializer, regularizer=regularizer,
                                collections=_collections(variables_collections, "biases"),
                                trainable=trainable)
        outputs = nn_bias_add(inputs, biases, data_format=data_format)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect(outputs_collections, outputs)


# --- pooling, flatten, dropout ---------------------------------------------------------------
def _pool2d(fn, default_name: str, inputs, kernel_size, stride, padding, data_format,
            outputs_collections, scope) -> Tensor:
    _check_format(data_format)
    with name_scope(scope or default_name):
        inputs = convert_to_tensor(inputs)
        if _known_rank(inputs, default_name) != 4:
            raise ValueError(f"{default_name}: inputs should have rank 4, found shape "
                             f"{static_shape(inputs)}")
        kernel = normalize_tuple(kernel_size, 2, "pool_size")
        strides = normalize_tuple(stride, 2, "strides")
        pad = normalize_padding(padding).upper()
        first = data_format == NCHW
        x = transpose(inputs, [0, 2, 3, 1]) if first else inputs
        outputs = fn(x, ksize=[1, kernel[0], kernel[1], 1],
                     strides=[1, strides[0], strides[1], 1], padding=pad, data_format=NHWC)
        if first:
            outputs = transpose(outputs, [0, 3, 1, 2])
        return _collect(outputs_collections, outputs)


@add_arg_scope
def max_pool2d(inputs, kernel_size, stride=2, padding: str = "VALID",
               data_format: str = NHWC, outputs_collections=None, scope=None) -> Tensor:
    """The max of each ``kernel_size`` window, moved by ``stride`` (default 2, VALID)."""
    return _pool2d(max_pool, "MaxPool2D", inputs, kernel_size, stride, padding, data_format,
                   outputs_collections, scope)


@add_arg_scope
def avg_pool2d(inputs, kernel_size, stride=2, padding: str = "VALID",
               data_format: str = NHWC, outputs_collections=None, scope=None) -> Tensor:
    """The mean of each ``kernel_size`` window (of its in-range elements with SAME)."""
    return _pool2d(avg_pool, "AvgPool2D", inputs, kernel_size, stride, padding, data_format,
                   outputs_collections, scope)


@add_arg_scope
def flatten(inputs, outputs_collections=None, scope=None) -> Tensor:
    """[batch, ...] -> [batch, product of the rest]."""
    with name_scope(scope or "Flatten"):
        inputs = convert_to_tensor(inputs)
        dims = static_shape(inputs)
        if dims is None or len(dims) < 2:
            raise ValueError(f"Inputs must have a least 2 dimensions, found shape {dims}.")
        if all(d is not None for d in dims[1:]):
            outputs = reshape(inputs, [-1, math.prod(dims[1:])])
        else:
            outputs = reshape(inputs, stack_tensors([shape_of(inputs)[0],
                                                     convert_to_tensor(-1)]))
        return _collect(outputs_collections, outputs)


@add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True,
            outputs_collections=None, scope=None, seed: Optional[int] = None) -> Tensor:
    """Keep each element with probability ``keep_prob`` (scaled by ``1 / keep_prob``) when
    ``is_training`` (a bool, or a bool tensor that decides per step); the identity
    otherwise."""
    with variable_scope(scope, "Dropout"):
        inputs = convert_to_tensor(inputs)
        if isinstance(keep_prob, numbers.Real) and keep_prob == 1:
            return _collect(outputs_collections, inputs)
        outputs = select_by_training(
            is_training,
            lambda: nn_dropout(inputs, rate=1 - keep_prob, noise_shape=noise_shape, seed=seed),
            lambda: inputs)
        return _collect(outputs_collections, outputs)


# --- normalization ---------------------------------------------------------------------------
def _norm_param(name: str, shape, dtype, initializers: dict, default, regularizers: dict,
                variables_collections, trainable: bool):
    return model_variable(name, shape=shape, dtype=dtype,
                          initializer=initializers.get(name, default),
                          regularizer=regularizers.get(name),
                          collections=_collections(variables_collections, name),
                          trainable=trainable)


@add_arg_scope
def batch_norm(inputs, decay: float = 0.999, center: bool = True, scale: bool = False,
               epsilon: float = 0.001, activation_fn=None, param_initializers=None,
               param_regularizers=None, updates_collections=GraphKeys.UPDATE_OPS,
               is_training=True, reuse=None, variables_collections=None,
               outputs_collections=None, trainable: bool = True, batch_weights=None,
               fused=None, data_format: str = NHWC, zero_debias_moving_mean: bool = False,
               scope=None, renorm: bool = False, renorm_clipping=None,
               renorm_decay: float = 0.99, adjustment=None) -> Tensor:
    """Batch normalization over every dim but the channels (last, or 1 with NCHW), with
    ``<scope>/beta`` (``center``), ``<scope>/gamma`` (``scale``; off by default, as in
    slim), and the moving averages ``<scope>/moving_mean`` and ``<scope>/moving_variance``;
    default scope ``BatchNorm``.

    When ``is_training`` the batch's statistics normalize and two updates move the averages
    (``moving -= (moving - batch) * (1 - decay)``): put into ``updates_collections``
    (``GraphKeys.UPDATE_OPS``; run them with the training step), or, with
    ``updates_collections=None``, run before the output is read. Otherwise the moving
    averages normalize. Rank-2 and rank-4 inputs run as one ``FusedBatchNormV3`` node (unless
    ``fused=False``), as TensorFlow's do: the update then takes the batch's unbiased
    variance, and ``epsilon`` is at least 1.001e-5; other ranks use ``fl.nn.moments``."""
    if batch_weights is not None:
        raise NotImplementedError("batch_norm(batch_weights=...) is not supported")
    if renorm or adjustment is not None:
        raise NotImplementedError("batch_norm's renorm and adjustment are not supported")
    _check_format(data_format)
    inputs = convert_to_tensor(inputs)
    rank = _known_rank(inputs, "batch_norm")
    use_fused = (fused is None or bool(fused)) and rank in (2, 4)
    # TensorFlow normalizes through tf.layers.BatchNormalization (which makes gamma before
    # beta, and normalizes a frozen layer as in inference) unless the updates go elsewhere
    # than UPDATE_OPS, the mean is zero-debiased or a 2-D input is fused: then through its
    # own code (beta first)
    own_code = (updates_collections is not GraphKeys.UPDATE_OPS or zero_debias_moving_mean
                or (use_fused and rank == 2))
    with variable_scope(scope, "BatchNorm", reuse=reuse):
        axis = 1 if data_format == NCHW else rank - 1
        channels = _channels(inputs, axis, "batch_norm")
        dtype = DType.f32 if use_fused or inputs.dtype in (DType.f16, DType.bf16) \
            else inputs.dtype
        initializers = dict(param_initializers or {})
        regularizers = dict(param_regularizers or {})
        made = {}
        for name in (("beta", "gamma") if own_code else ("gamma", "beta")):
            if (name == "beta" and center) or (name == "gamma" and scale):
                made[name] = _norm_param(
                    name, [channels], dtype, initializers,
                    zeros_initializer() if name == "beta" else ones_initializer(),
                    regularizers, variables_collections, trainable)
        moving_mean = _norm_param("moving_mean", [channels], dtype, initializers,
                                  zeros_initializer(), {}, variables_collections, False)
        moving_variance = _norm_param("moving_variance", [channels], dtype, initializers,
                                      ones_initializer(), {}, variables_collections, False)
        beta = made["beta"].value() if "beta" in made else None
        gamma = made["gamma"].value() if "gamma" in made else None
        training = is_training if trainable or own_code else False
        known = training_value(training)

        outputs = None
        if use_fused:
            x = inputs
            if rank == 2:
                x = reshape(inputs, [-1, channels, 1, 1] if data_format == NCHW
                            else [-1, 1, 1, channels])
            g = gamma if gamma is not None else constant(1.0, DType.f32, [channels])
            b = beta if beta is not None else constant(0.0, DType.f32, [channels])

            def fused_call(train: bool):
                return lambda: fused_batch_norm(x, g, b, mean=moving_mean.value(),
                                                variance=moving_variance.value(),
                                                epsilon=epsilon, is_training=train,
                                                data_format=data_format)
            outputs, mean, variance = select_by_training(training, fused_call(True),
                                                         fused_call(False))
        elif known is False:
            mean, variance = moving_mean.value(), moving_variance.value()
        else:
            batch_mean, batch_var = moments(inputs, [i for i in range(rank) if i != axis])
            mean, variance = select_by_training(
                training, lambda: (batch_mean, batch_var),
                lambda: (moving_mean.value(), moving_variance.value()))

        if known is not False:
            decay_now = decay if known else select_by_training(
                training, lambda: constant(float(decay)), lambda: constant(1.0))
            updates = [assign_moving_average(moving_mean, mean, decay_now,
                                             zero_debias=zero_debias_moving_mean),
                       assign_moving_average(moving_variance, variance, decay_now,
                                             zero_debias=False)]
            if updates_collections is None:        # the output waits for the updates
                with control_dependencies(updates):
                    if outputs is not None:
                        outputs = identity(outputs)
                    else:
                        mean, variance = identity(mean), identity(variance)
            else:
                for update in updates:
                    add_to_collections(updates_collections, update)

        if outputs is None:
            def broadcast(t):
                if t is None or axis == rank - 1:
                    return t
                return reshape(t, [1, channels] + [1] * (rank - 2))
            outputs = nn_batch_normalization(inputs, broadcast(mean), broadcast(variance),
                                             broadcast(beta), broadcast(gamma), epsilon)
        elif rank == 2:
            outputs = reshape(outputs, shape_of(inputs))
            outputs.set_shape(static_shape(inputs))
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect(outputs_collections, outputs)


@add_arg_scope
def layer_norm(inputs, center: bool = True, scale: bool = True, activation_fn=None,
               reuse=None, variables_collections=None, outputs_collections=None,
               trainable: bool = True, begin_norm_axis: int = 1, begin_params_axis: int = -1,
               scope=None) -> Tensor:
    """Normalize each example over the dims from ``begin_norm_axis`` on (epsilon 1e-12),
    then scale by ``<scope>/gamma`` and shift by ``<scope>/beta`` (shaped like the dims from
    ``begin_params_axis`` on); default scope ``LayerNorm``."""
    with variable_scope(scope, "LayerNorm", reuse=reuse):
        inputs = convert_to_tensor(inputs)
        rank = _known_rank(inputs, "layer_norm")
        dims = static_shape(inputs)
        if begin_norm_axis < 0:
            begin_norm_axis += rank
        if begin_params_axis >= rank or begin_norm_axis >= rank:
            raise ValueError(f"begin_params_axis ({begin_params_axis}) and begin_norm_axis "
                             f"({begin_norm_axis}) must be < rank(inputs) ({rank})")
        params_shape = list(dims[begin_params_axis:])
        if any(d is None for d in params_shape):
            raise ValueError(f"Inputs {inputs.name}: shape(inputs)[{begin_params_axis}:] is "
                             f"not fully defined: {dims}")
        beta = gamma = None
        if center:
            beta = model_variable("beta", shape=params_shape, dtype=inputs.dtype,
                                  initializer=zeros_initializer(),
                                  collections=_collections(variables_collections, "beta"),
                                  trainable=trainable)
        if scale:
            gamma = model_variable("gamma", shape=params_shape, dtype=inputs.dtype,
                                   initializer=ones_initializer(),
                                   collections=_collections(variables_collections, "gamma"),
                                   trainable=trainable)
        mean, variance = moments(inputs, list(range(begin_norm_axis, rank)), keep_dims=True)
        eps = 1e-3 if inputs.dtype is DType.f16 else 1e-12
        outputs = nn_batch_normalization(inputs, mean, variance,
                                         None if beta is None else beta.value(),
                                         None if gamma is None else gamma.value(), eps)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect(outputs_collections, outputs)


@add_arg_scope
def softmax(logits, scope=None) -> Tensor:
    """The softmax over the last dim of ``logits`` (rank 2 or more)."""
    with variable_scope(scope, "softmax"):
        logits = convert_to_tensor(logits)
        if _known_rank(logits, "softmax") < 2:
            raise ValueError(f"softmax: logits {logits.name} need rank 2 or more, found shape "
                             f"{static_shape(logits)}")
        return nn_softmax(logits)


@add_arg_scope
def unit_norm(inputs, dim: int, epsilon: float = 1e-7, scope=None) -> Tensor:
    """``inputs / sqrt(epsilon + sum(inputs^2 along dim))``."""
    with variable_scope(scope, "UnitNorm"):
        inputs = convert_to_tensor(inputs)
        rank = _known_rank(inputs, "unit_norm")
        if dim < 0 or dim >= rank:
            raise ValueError("dim must be positive but smaller than the input rank.")
        lengths = sqrt(epsilon + reduce_sum(square(inputs), dim, keepdims=True))
        return inputs / lengths


# --- encodings -------------------------------------------------------------------------------
@add_arg_scope
def one_hot_encoding(labels, num_classes: int, on_value=1.0, off_value=0.0,
                     outputs_collections=None, scope=None) -> Tensor:
    """``labels`` as one-hot float vectors of ``num_classes``."""
    with name_scope(scope or "OneHotEncoding"):
        labels = convert_to_tensor(labels)
        if labels.dtype is DType.i32:
            labels = cast(labels, DType.i64)
        outputs = one_hot(labels, num_classes, on_value=on_value, off_value=off_value)
        return _collect(outputs_collections, outputs)


def embed_sequence(ids, vocab_size: Optional[int] = None, embed_dim: Optional[int] = None,
                   unique: bool = False, initializer=None, regularizer=None,
                   trainable: bool = True, scope=None, reuse=None) -> Tensor:
    """The rows of ``<scope>/embeddings`` ([vocab_size, embed_dim]) that ``ids`` pick
    ([batch, length] -> [batch, length, embed_dim]); default scope ``EmbedSequence``."""
    if not (reuse or (vocab_size and embed_dim)):
        raise ValueError("Must specify vocab size and embedding dimension when not reusing. "
                         f"Got vocab_size={vocab_size} and embed_dim={embed_dim}")
    with variable_scope(scope, "EmbedSequence", reuse=reuse):
        shape = [vocab_size, embed_dim] if vocab_size and embed_dim else None
        embeddings = model_variable("embeddings", shape=shape, initializer=initializer,
                                    regularizer=regularizer, trainable=trainable)
        return embedding_lookup(embeddings, ids)


# --- composition -----------------------------------------------------------------------------
def _layer_name(layer, fallback: str) -> str:
    if hasattr(layer, "__name__"):
        return layer.__name__
    if hasattr(layer, "func") and hasattr(layer.func, "__name__"):
        return layer.func.__name__          # a functools.partial
    return fallback


def repeat(inputs, repetitions: int, layer, *args, **kwargs) -> Tensor:
    """``layer`` applied ``repetitions`` times, the i-th in scope ``<scope>/<scope>_<i>``."""
    scope = kwargs.pop("scope", None)
    with variable_scope(scope, "Repeat"):
        outputs = convert_to_tensor(inputs)
        scope = scope or _layer_name(layer, "repeat")
        for i in range(repetitions):
            kwargs["scope"] = f"{scope}_{i + 1}"
            outputs = layer(outputs, *args, **kwargs)
        return outputs


def stack(inputs, layer, stack_args, **kwargs) -> Tensor:
    """``layer`` applied once per entry of ``stack_args`` (its positional arguments), the
    i-th in scope ``<scope>/<scope>_<i>``: ``stack(x, fully_connected, [32, 64])``."""
    scope = kwargs.pop("scope", None)
    if not isinstance(stack_args, (list, tuple)):
        raise ValueError("stack_args need to be a list or tuple")
    with variable_scope(scope, "Stack"):
        outputs = convert_to_tensor(inputs)
        scope = scope or _layer_name(layer, "stack")
        for i, layer_args in enumerate(stack_args):
            kwargs["scope"] = f"{scope}_{i + 1}"
            if not isinstance(layer_args, (list, tuple)):
                layer_args = [layer_args]
            outputs = layer(outputs, *layer_args, **kwargs)
        return outputs


linear = functools.partial(fully_connected, activation_fn=None)
relu = functools.partial(fully_connected, activation_fn=_relu)
relu6 = functools.partial(fully_connected, activation_fn=_relu6)
elu = functools.partial(fully_connected, activation_fn=_elu)
