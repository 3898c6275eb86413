"""The regularizers of ``fl.contrib.layers`` (TensorFlow 1.x's ``tf.contrib.layers``)
(``l2_regularizer(scale)(w) = scale * l2_loss(w) = scale * sum(w^2) / 2``, ``l1_regularizer``:
``scale * sum(|w|)``, their sum, ``sum_regularizer``, ``apply_regularization``) and the
initializers TF1 programs take from there (``xavier_initializer`` is glorot's,
``variance_scaling_initializer`` with contrib's defaults)."""
from __future__ import annotations

import math
import numbers
from typing import Callable, List, Optional

from dsl.context import get_default_graph, name_scope
from dsl.init_ops import Initializer
from dsl.random_ops import random_uniform, truncated_normal
from dsl.math_ops import abs as _abs, add_n, multiply
from dsl.nn_losses import l2_loss
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor
from dsl.variables import GraphKeys
from runtime.dtypes import as_dtype

__all__ = ["l1_regularizer", "l2_regularizer", "l1_l2_regularizer", "sum_regularizer",
           "apply_regularization", "xavier_initializer", "xavier_initializer_conv2d",
           "variance_scaling_initializer"]


def _check_scale(scale, what: str) -> None:
    if isinstance(scale, numbers.Integral):
        raise ValueError(f"scale cannot be an integer: {scale}")
    if isinstance(scale, numbers.Real):
        if scale < 0.0:
            raise ValueError(f"Setting a scale less than 0 on a regularizer: {scale}")


def _value(weights) -> Tensor:
    return weights.value() if hasattr(weights, "_as_graph_tensor") else convert_to_tensor(weights)


def l1_regularizer(scale, scope: Optional[str] = None) -> Callable:
    """``scale * sum(|weights|)``; a scale of 0 regularizes nothing (returns None)."""
    _check_scale(scale, "l1")
    if isinstance(scale, numbers.Real) and scale == 0.0:
        return lambda _: None

    def l1(weights) -> Tensor:
        with name_scope(scope or "l1_regularizer") as s:
            w = _value(weights)
            my_scale = convert_to_tensor(scale, dtype=w.dtype)
            return multiply(my_scale, reduce_sum(_abs(w)), name=s)
    return l1


def l2_regularizer(scale, scope: Optional[str] = None) -> Callable:
    """``scale * l2_loss(weights)`` (half the sum of squares); a scale of 0 regularizes
    nothing (returns None)."""
    _check_scale(scale, "l2")
    if isinstance(scale, numbers.Real) and scale == 0.0:
        return lambda _: None

    def l2(weights) -> Tensor:
        with name_scope(scope or "l2_regularizer") as s:
            w = _value(weights)
            my_scale = convert_to_tensor(scale, dtype=w.dtype)
            return multiply(my_scale, l2_loss(w), name=s)
    return l2


def sum_regularizer(regularizer_list: List[Callable], scope: Optional[str] = None) -> Callable:
    """The sum of what each regularizer of the list gives (None when all give None)."""
    regularizer_list = [r for r in regularizer_list if r]
    if not regularizer_list:
        return lambda _: None

    def total(weights):
        terms = [r(weights) for r in regularizer_list]
        terms = [t for t in terms if t is not None]
        if not terms:
            return None
        with name_scope(scope or "sum_regularizer"):
            return add_n(terms)
    return total


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope: Optional[str] = None) -> Callable:
    """``l1_regularizer(scale_l1) + l2_regularizer(scale_l2)``."""
    if isinstance(scale_l1, numbers.Real) and isinstance(scale_l2, numbers.Real) and \
            scale_l1 == 0.0 and scale_l2 == 0.0:
        return lambda _: None
    return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)],
                           scope=scope or "l1_l2_regularizer")


def apply_regularization(regularizer: Callable, weights_list=None) -> Tensor:
    """The sum of ``regularizer`` over ``weights_list`` (default: the ``weights``
    collection), also added to ``GraphKeys.REGULARIZATION_LOSSES``."""
    if not weights_list:
        weights_list = get_default_graph().get_collection(GraphKeys.WEIGHTS)
    if not weights_list:
        raise ValueError("No weights to regularize.")
    with name_scope("get_regularization_penalty"):
        penalties = [regularizer(w) for w in weights_list]
        penalties = [p for p in penalties if p is not None]
        summed = add_n(penalties) if penalties else convert_to_tensor(0.0)
    get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, summed)
    return summed


class variance_scaling_initializer(Initializer):  # noqa: N801  (TensorFlow's name)
    """contrib's variance scaling (He's by default): with ``n`` the fan (``FAN_IN``,
    ``FAN_OUT`` or their mean ``FAN_AVG``), uniform in ``+-sqrt(3 * factor / n)``, or a normal
    truncated at 2 stddevs with stddev ``sqrt(1.3 * factor / n)``."""

    def __init__(self, factor: float = 2.0, mode: str = "FAN_IN", uniform: bool = False,
                 seed: Optional[int] = None, dtype=None):
        if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
            raise TypeError(f"Unknown mode {mode} [FAN_IN, FAN_OUT, FAN_AVG]")
        self.factor, self.mode, self.uniform, self.seed = factor, mode, uniform, seed
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dims = [int(d) for d in shape]
        fan_in = float(dims[-2]) if len(dims) > 1 else float(dims[-1]) if dims else 1.0
        fan_out = float(dims[-1]) if dims else 1.0
        for d in dims[:-2]:
            fan_in *= d
            fan_out *= d
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2}[self.mode]
        dt = self._dtype(dtype)
        if self.uniform:
            limit = math.sqrt(3.0 * self.factor / n)
            return random_uniform(dims, -limit, limit, dt, seed=self.seed)
        return truncated_normal(dims, 0.0, math.sqrt(1.3 * self.factor / n), dt,
                                seed=self.seed)


def xavier_initializer(uniform: bool = True, seed: Optional[int] = None, dtype=None):
    """Glorot (Xavier) initialization, as contrib's: ``variance_scaling_initializer(1.0,
    "FAN_AVG", uniform)``."""
    return variance_scaling_initializer(1.0, "FAN_AVG", uniform, seed=seed, dtype=dtype)


xavier_initializer_conv2d = xavier_initializer
