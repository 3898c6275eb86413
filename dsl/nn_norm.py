"""`fl.nn` normalization: ``moments``, ``batch_normalization`` (composed of ordinary ops) and
``fused_batch_norm`` (one ``FusedBatchNormV3`` node), with TensorFlow 1.x's signatures and
formulas."""
from __future__ import annotations

from typing import Optional, Sequence

from dsl.array_ops import squeeze, stop_gradient
from dsl.context import name_scope
from dsl.math_ops import cast, maximum, multiply, rsqrt, square, squared_difference
from dsl.ops import apply_op, convert_to_tensor, constant
from dsl.reduction_ops import reduce_mean, reduce_sum
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["moments", "batch_normalization", "fused_batch_norm", "l2_normalize"]

# cuDNN's least epsilon, which TensorFlow's fused_batch_norm applies on every device
_MIN_FUSED_EPSILON = 1.001e-5


def moments(x, axes: Sequence[int], shift=None, name: Optional[str] = None, keep_dims=None,
            keepdims=None):
    """(mean, variance) of ``x`` over ``axes``: ``mean = reduce_mean(x)``, ``variance =
    reduce_mean(squared_difference(x, stop_gradient(mean)))`` (biased). ``shift`` is accepted
    and unused, as in TensorFlow."""
    if keep_dims is not None and keepdims is not None:
        raise ValueError("cannot specify both keep_dims and keepdims")
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with name_scope(name or "moments"):
        x = convert_to_tensor(x)
        y = cast(x, DType.f32) if x.dtype is DType.f16 else x
        axes = [int(a) for a in axes]
        mean = reduce_mean(y, axes, keepdims=True, name="mean")
        variance = reduce_mean(squared_difference(y, stop_gradient(mean)), axes, keepdims=True,
                               name="variance")
        if not keep:
            mean = squeeze(mean, axes)
            variance = squeeze(variance, axes)
        if x.dtype is DType.f16:
            return cast(mean, DType.f16), cast(variance, DType.f16)
        return mean, variance


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon,
                        name: Optional[str] = None) -> Tensor:
    """``(x - mean) * scale / sqrt(variance + variance_epsilon) + offset``, computed as
    TensorFlow does: ``inv = rsqrt(variance + eps) * scale``, ``x * inv + (offset - mean *
    inv)``. ``offset``/``scale`` may be None."""
    with name_scope(name or "batchnorm"):
        x = convert_to_tensor(x)
        mean = convert_to_tensor(mean, dtype=x.dtype)
        variance = convert_to_tensor(variance, dtype=x.dtype)
        inv = rsqrt(variance + convert_to_tensor(variance_epsilon, dtype=variance.dtype))
        if scale is not None:
            inv = inv * convert_to_tensor(scale, dtype=x.dtype)
        shift = (convert_to_tensor(offset, dtype=x.dtype) - mean * inv if offset is not None
                 else -mean * inv)
        return x * cast(inv, x.dtype) + cast(shift, x.dtype)


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon: float = 0.001,
                     data_format: str = "NHWC", is_training: bool = True,
                     name: Optional[str] = None, exponential_avg_factor: float = 1.0):
    """Batch normalization of a 4-D (or 5-D) ``x`` as one ``FusedBatchNormV3`` node; returns
    ``(y, batch_mean, batch_variance)`` (in training, the batch mean and the unbiased batch
    variance, or their moving averages with ``exponential_avg_factor`` < 1; in inference,
    ``mean`` and ``variance`` again). As in TensorFlow, ``epsilon`` is at least 1.001e-5 and
    ``mean``/``variance`` may be None only in training with ``exponential_avg_factor`` 1."""
    if (not is_training or exponential_avg_factor != 1.0) and (mean is None or variance is None):
        raise ValueError("Both `mean` and `variance` must be a 1D tensor when is_training is "
                         "False or exponential_avg_factor != 1.0.")
    x = convert_to_tensor(x)
    scale = convert_to_tensor(scale)
    offset = convert_to_tensor(offset, dtype=scale.dtype)
    mean = constant([], dtype=scale.dtype) if mean is None else convert_to_tensor(
        mean, dtype=scale.dtype)
    variance = constant([], dtype=scale.dtype) if variance is None else convert_to_tensor(
        variance, dtype=scale.dtype)
    epsilon = max(float(epsilon), _MIN_FUSED_EPSILON)
    outs = apply_op("FusedBatchNormV3", [x, scale, offset, mean, variance],
                    {"epsilon": epsilon, "exponential_avg_factor": float(exponential_avg_factor),
                     "data_format": data_format, "is_training": bool(is_training)},
                    name=name or "FusedBatchNormV3")
    return outs[0], outs[1], outs[2]


def l2_normalize(x, axis=None, epsilon: float = 1e-12, name: Optional[str] = None,
                 dim=None) -> Tensor:
    """``x / sqrt(max(sum(x^2, axis), epsilon))`` (``tf.nn.l2_normalize``; all axes when
    ``axis`` is None)."""
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    with name_scope(name or "l2_normalize") as scope:
        x = convert_to_tensor(x)
        square_sum = reduce_sum(square(x), axis, keepdims=True)
        inv_norm = rsqrt(maximum(square_sum, convert_to_tensor(epsilon, dtype=x.dtype)))
        return multiply(x, inv_norm, name=scope)
