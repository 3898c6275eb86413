"""Variable initializers, as TensorFlow 1.x's ``tf.*_initializer`` classes.

An initializer is a callable ``init(shape, dtype=None)`` that adds the ops computing an initial
value. The random ones draw from the Philox ops with TF1's seed rule (``dsl.random_ops``), so
``glorot_uniform_initializer(seed=1)`` gives TensorFlow's numbers for the same seed.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from dsl.ops import constant
from dsl.random_ops import random_normal, random_uniform, truncated_normal
from dsl.tensor import Tensor
from runtime.dtypes import DType, as_dtype

__all__ = ["Initializer", "zeros_initializer", "ones_initializer", "constant_initializer",
           "random_uniform_initializer", "random_normal_initializer",
           "truncated_normal_initializer", "glorot_uniform_initializer",
           "glorot_normal_initializer", "variance_scaling_initializer", "initializers"]


def _fans(shape: Sequence[int]):
    """(fan_in, fan_out) as TensorFlow computes them (convolution kernels: HWIO)."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _static(shape) -> list:
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ValueError(f"an initializer needs a fully known shape, got {list(shape)}")
    return dims


class Initializer:
    """Base class: ``init(shape, dtype=None) -> Tensor``."""

    dtype: Optional[DType] = None

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        raise NotImplementedError

    def _dtype(self, dtype) -> DType:
        return as_dtype(dtype if dtype is not None else (self.dtype or DType.f32))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class zeros_initializer(Initializer):  # noqa: N801  (TensorFlow's names)
    def __init__(self, dtype=None):
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dt = self._dtype(dtype)
        return constant(np.zeros(_static(shape), dt.np), name="zeros")


class ones_initializer(Initializer):  # noqa: N801
    def __init__(self, dtype=None):
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dt = self._dtype(dtype)
        return constant(np.ones(_static(shape), dt.np), name="ones")


class constant_initializer(Initializer):  # noqa: N801
    """A scalar fills the shape; a list must have the shape's number of elements."""

    def __init__(self, value=0, dtype=None):
        self.value = value
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dt = self._dtype(dtype)
        dims = _static(shape)
        v = np.asarray(self.value, dt.np)
        if v.ndim == 0:
            return constant(np.full(dims, v, dt.np), name="Const")
        if v.size != math.prod(dims):
            raise ValueError(f"constant_initializer has {v.size} values; the shape {dims} needs "
                             f"{math.prod(dims)}")
        return constant(v.reshape(dims), name="Const")


class random_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=None):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return random_uniform(_static(shape), self.minval, self.maxval, self._dtype(dtype),
                              seed=self.seed)


class random_normal_initializer(Initializer):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return random_normal(_static(shape), self.mean, self.stddev, self._dtype(dtype),
                             seed=self.seed)


class truncated_normal_initializer(Initializer):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        return truncated_normal(_static(shape), self.mean, self.stddev, self._dtype(dtype),
                                seed=self.seed)


class variance_scaling_initializer(Initializer):  # noqa: N801
    """TF1's VarianceScaling: scale / fan, drawn uniform, normal or truncated normal."""

    # stddev of a unit normal truncated to [-2, 2]
    _TRUNCATED_STDDEV = 0.87962566103423978

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=None):
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"mode must be fan_in, fan_out or fan_avg, got {mode!r}")
        if distribution == "normal":
            distribution = "truncated_normal"
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(f"unknown distribution {distribution!r}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dims = _static(shape)
        dt = self._dtype(dtype)
        fan_in, fan_out = _fans(dims)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[self.mode]
        scale = self.scale / max(1.0, fan)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * scale)
            return random_uniform(dims, -limit, limit, dt, seed=self.seed)
        if self.distribution == "truncated_normal":
            return truncated_normal(dims, 0.0, math.sqrt(scale) / self._TRUNCATED_STDDEV, dt,
                                    seed=self.seed)
        return random_normal(dims, 0.0, math.sqrt(scale), dt, seed=self.seed)


class glorot_uniform_initializer(variance_scaling_initializer):  # noqa: N801
    """Uniform in [-limit, limit], limit = sqrt(6 / (fan_in + fan_out)) (Xavier)."""

    def __init__(self, seed=None, dtype=None):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out)) (TF1's glorot_normal)."""

    def __init__(self, seed=None, dtype=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)


class initializers:  # noqa: N801  (a namespace: fl.initializers.glorot_uniform(seed=1))
    zeros = zeros_initializer
    ones = ones_initializer
    constant = constant_initializer
    random_uniform = random_uniform_initializer
    random_normal = random_normal_initializer
    truncated_normal = truncated_normal_initializer
    glorot_uniform = glorot_uniform_initializer
    glorot_normal = glorot_normal_initializer
    variance_scaling = variance_scaling_initializer
