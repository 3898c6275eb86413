"""``fl.layers.batch_normalization`` and ``fl.layers.BatchNormalization``, as TensorFlow
1.x's (Keras' BatchNormalization under a TF1 variable scope).

Variables: ``gamma`` (ones; when ``scale``), ``beta`` (zeros; when ``center``), and the
non-trainable ``moving_mean`` (zeros) and ``moving_variance`` (ones), shaped like the
normalized axis. In training the batch's statistics normalize, and two update ops, put in
``GraphKeys.UPDATE_OPS``, move the moving averages: ``moving -= (moving - batch) * (1 -
momentum)``, where the batch's variance is the unbiased one in the fused form (what
FusedBatchNormV3 gives) and the biased one otherwise (``fl.nn.moments``), as in TensorFlow;
in inference the moving averages normalize. A 4-D input normalized over its channel axis (1 or 3), in float32, runs
as one ``FusedBatchNormV3`` node (``fused=None`` or ``True``, as TensorFlow 1.x chooses;
epsilon then at least 1.001e-5); anything else as ``fl.nn.moments`` and
``fl.nn.batch_normalization``. A ``training`` tensor selects per step, without a ``cond``:
both normalizations are built, ``where`` picks, and the update's momentum is 1 (no change)
when not training.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from dsl.array_ops import reshape
from dsl.context import colocate_with, name_scope
from dsl.init_ops import ones_initializer, zeros_initializer
from dsl.layers.base import InputSpec, Layer, select_by_training, training_value
from dsl.math_ops import cast
from dsl.nn_norm import batch_normalization as nn_batch_normalization
from dsl.nn_norm import fused_batch_norm, moments
from dsl.ops import constant, convert_to_tensor
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType
from dsl.tensor_shape import as_shape

__all__ = ["BatchNormalization", "batch_normalization"]


class BatchNormalization(Layer):
    """Batch normalization layer (``tf.layers.BatchNormalization``); ``call(inputs,
    training=False)``."""

    def __init__(self, axis: Union[int, Sequence[int]] = -1, momentum: float = 0.99,
                 epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                 beta_initializer=None, gamma_initializer=None, moving_mean_initializer=None,
                 moving_variance_initializer=None, beta_regularizer=None,
                 gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 renorm: bool = False, renorm_clipping=None, renorm_momentum: float = 0.99,
                 fused: Optional[bool] = None, trainable: bool = True,
                 virtual_batch_size=None, adjustment=None, name: Optional[str] = None,
                 **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        if renorm:
            raise NotImplementedError("batch renormalization (renorm=True) is not supported")
        if virtual_batch_size is not None or adjustment is not None:
            raise NotImplementedError("virtual_batch_size and adjustment are not supported")
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else int(axis)
        self.momentum = momentum
        self.epsilon = float(epsilon)
        self.center = bool(center)
        self.scale = bool(scale)
        self.beta_initializer = beta_initializer or zeros_initializer()
        self.gamma_initializer = gamma_initializer or ones_initializer()
        self.moving_mean_initializer = moving_mean_initializer or zeros_initializer()
        self.moving_variance_initializer = moving_variance_initializer or ones_initializer()
        self.beta_regularizer = beta_regularizer
        self.gamma_regularizer = gamma_regularizer
        self.beta_constraint = beta_constraint
        self.gamma_constraint = gamma_constraint
        if fused and isinstance(self.axis, list) and len(self.axis) > 1:
            raise ValueError("Passing `fused=True` is only supported when axis is 1 or 3 for "
                             f"input rank = 4 or 1 or 4 for input rank = 5. Got axis {axis}")
        self.fused = True if fused is None else bool(fused)   # TF1: decided in build
        self.renorm = False
        self.virtual_batch_size = None
        self.adjustment = None

    def _param_dtype(self) -> DType:
        return DType.f32 if self.dtype in (None, DType.f16, DType.bf16) else self.dtype

    def build(self, input_shape) -> None:
        input_shape = static_shape(input_shape)
        if input_shape is None:
            raise ValueError(f"Input has undefined rank: {self.name} needs it to pick its axis")
        rank = len(input_shape)
        axes = self.axis if isinstance(self.axis, list) else [self.axis]
        norm = []
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(f"Invalid axis: {a}. Expected -{rank} <= axis < {rank}")
            norm.append(a % rank)
        if len(set(norm)) != len(norm):
            raise ValueError(f"Duplicate axis: {axes}")
        self.axis = norm
        fusable = (len(norm) == 1 and rank in (4, 5) and self._param_dtype() is DType.f32
                   and (self.dtype in (None, DType.f32)))
        if self.fused:
            if not fusable:
                self.fused = False
            elif norm == [1]:
                self._data_format = "NCHW" if rank == 4 else "NCDHW"
            elif norm == [rank - 1]:
                self._data_format = "NHWC" if rank == 4 else "NDHWC"
            elif rank == 5:
                self.fused = False
            else:
                raise ValueError("Unsupported axis. The use of `fused=True` is only possible "
                                 "with `axis=1` or `axis=3` for 4D input tensors. Received: "
                                 f"axis={tuple(norm)}")
        dims = {a: input_shape[a] for a in norm}
        for a, d in dims.items():
            if d is None:
                raise ValueError(f"Input has undefined `axis` dimension. Received input with "
                                 f"shape {tuple(input_shape)} and axis={tuple(norm)}")
        self.input_spec = InputSpec(ndim=rank, axes=dims)
        if len(norm) == 1:
            param_shape = [dims[norm[0]]]
        else:
            param_shape = [dims[i] if i in dims else 1 for i in range(rank)]
        self._param_shape = param_shape
        dtype = self._param_dtype()
        self.gamma = self.add_weight("gamma", shape=param_shape, dtype=dtype,
                                     initializer=self.gamma_initializer,
                                     regularizer=self.gamma_regularizer,
                                     constraint=self.gamma_constraint,
                                     trainable=True) if self.scale else None
        self.beta = self.add_weight("beta", shape=param_shape, dtype=dtype,
                                    initializer=self.beta_initializer,
                                    regularizer=self.beta_regularizer,
                                    constraint=self.beta_constraint,
                                    trainable=True) if self.center else None
        self.moving_mean = self.add_weight("moving_mean", shape=param_shape, dtype=dtype,
                                           initializer=self.moving_mean_initializer,
                                           trainable=False)
        self.moving_variance = self.add_weight("moving_variance", shape=param_shape,
                                               dtype=dtype,
                                               initializer=self.moving_variance_initializer,
                                               trainable=False)
        self.built = True

    # --- moving averages -------------------------------------------------------------------
    def _assign_moving_average(self, variable, value: Tensor, momentum) -> Tensor:
        """``variable -= (variable - value) * (1 - momentum)``, the AssignSub op returned."""
        with name_scope("AssignMovingAvg"):
            with colocate_with(variable):
                decay = convert_to_tensor(1.0, dtype=variable.dtype) - (
                    convert_to_tensor(momentum, dtype=variable.dtype)
                    if not isinstance(momentum, Tensor) else cast(momentum, variable.dtype))
                delta = (variable.value() - cast(value, variable.dtype)) * decay
                return variable.assign_sub(delta, read_value=False)

    def _momentum(self, training):
        """The momentum of the updates: ``momentum``, or 1 (no change) when a ``training``
        tensor says inference."""
        if training_value(training) is None:
            return select_by_training(training, lambda: constant(float(self.momentum)),
                                      lambda: constant(1.0))
        return self.momentum

    def _fused(self, inputs: Tensor, training) -> Tensor:
        dtype = self._param_dtype()
        beta = self.beta.value() if self.center else constant(0.0, dtype, self._param_shape)
        gamma = self.gamma.value() if self.scale else constant(1.0, dtype, self._param_shape)

        def train():
            return fused_batch_norm(inputs, gamma, beta, mean=self.moving_mean.value(),
                                    variance=self.moving_variance.value(),
                                    epsilon=self.epsilon, is_training=True,
                                    data_format=self._data_format)

        def infer():
            return fused_batch_norm(inputs, gamma, beta, mean=self.moving_mean.value(),
                                    variance=self.moving_variance.value(),
                                    epsilon=self.epsilon, is_training=False,
                                    data_format=self._data_format)

        output, mean, variance = select_by_training(training, train, infer)
        if training_value(training) is not False:
            momentum = self._momentum(training)
            self.add_update(self._assign_moving_average(self.moving_mean, mean, momentum))
            self.add_update(self._assign_moving_average(self.moving_variance, variance,
                                                        momentum))
        return output

    def call(self, inputs: Tensor, training=False) -> Tensor:
        if not self.trainable:
            training = False                   # a frozen layer normalizes as in inference
        if self.fused:
            return self._fused(inputs, training)
        in_dtype = inputs.dtype
        if in_dtype in (DType.f16, DType.bf16):
            inputs = cast(inputs, DType.f32)
        rank = len(static_shape(inputs))
        reduction = [i for i in range(rank) if i not in self.axis]
        broadcast_shape = [1] * rank
        broadcast_shape[self.axis[0]] = static_shape(inputs)[self.axis[0]]

        def broadcast(v):
            if v is not None and len(static_shape(v)) != rank and reduction != list(range(rank - 1)):
                return reshape(v, broadcast_shape)
            return v

        scale = broadcast(self.gamma.value()) if self.scale else None
        offset = broadcast(self.beta.value()) if self.center else None
        known = training_value(training)
        if known is False:
            mean, variance = self.moving_mean.value(), self.moving_variance.value()
        else:
            keep = len(self.axis) > 1
            batch_mean, batch_var = moments(cast(inputs, self._param_dtype()), reduction,
                                            keep_dims=keep)
            mean = select_by_training(training, lambda: batch_mean,
                                      lambda: self.moving_mean.value())
            variance = select_by_training(training, lambda: batch_var,
                                          lambda: self.moving_variance.value())
            momentum = self._momentum(training)
            self.add_update(self._assign_moving_average(self.moving_mean, mean, momentum))
            self.add_update(self._assign_moving_average(self.moving_variance, variance,
                                                        momentum))
        mean, variance = cast(mean, inputs.dtype), cast(variance, inputs.dtype)
        if offset is not None:
            offset = cast(offset, inputs.dtype)
        if scale is not None:
            scale = cast(scale, inputs.dtype)
        outputs = nn_batch_normalization(inputs, broadcast(mean), broadcast(variance), offset,
                                         scale, self.epsilon)
        if in_dtype in (DType.f16, DType.bf16):
            outputs = cast(outputs, in_dtype)
        return outputs

    def compute_output_shape(self, input_shape) -> TensorShape:
        return as_shape(input_shape)


def batch_normalization(inputs, axis=-1, momentum: float = 0.99, epsilon: float = 1e-3,
                        center: bool = True, scale: bool = True, beta_initializer=None,
                        gamma_initializer=None, moving_mean_initializer=None,
                        moving_variance_initializer=None, beta_regularizer=None,
                        gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                        training=False, trainable: bool = True, name: Optional[str] = None,
                        reuse=None, renorm: bool = False, renorm_clipping=None,
                        renorm_momentum: float = 0.99, fused: Optional[bool] = None,
                        virtual_batch_size=None, adjustment=None) -> Tensor:
    """Batch normalization (``tf.layers.batch_normalization``). The moving averages change
    only through the ops in ``GraphKeys.UPDATE_OPS``: run them with the training step, e.g.
    ``with fl.control_dependencies(fl.get_collection(fl.GraphKeys.UPDATE_OPS)):
    train_op = opt.minimize(loss)``."""
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        beta_constraint=beta_constraint, gamma_constraint=gamma_constraint, renorm=renorm,
        renorm_clipping=renorm_clipping, renorm_momentum=renorm_momentum, fused=fused,
        trainable=trainable, virtual_batch_size=virtual_batch_size, adjustment=adjustment,
        name=name, _scope=name, _reuse=reuse)
    return layer(inputs, training=training)
