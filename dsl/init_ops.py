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
           "glorot_normal_initializer", "variance_scaling_initializer", "initializers",
           "orthogonal_initializer", "identity_initializer", "uniform_unit_scaling_initializer"]


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


class orthogonal_initializer(Initializer):  # noqa: N801
    """A (semi-)orthogonal matrix times ``gain``, reshaped to the shape (TF1's Orthogonal:
    the QR decomposition of a standard normal ``max(rows, cols) x min(rows, cols)`` matrix,
    rows = the product of all dims but the last, columns made sign-unique by ``sign(diag(r))``,
    transposed when rows < cols).

    The value is computed when the initializer is called, with numpy, from the numbers the
    ``RandomStandardNormal`` op of the same seeds draws first (flowc's Philox streams are
    TensorFlow's): the variable's initial value is a constant, the same matrix TensorFlow's
    initializer op gives on its first run for that seed (re-running the initializer gives it
    again, where TensorFlow would draw a new one). flowc has no QR op to do it in the graph."""

    def __init__(self, gain=1.0, seed=None, dtype=None):
        self.gain, self.seed = float(gain), seed
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        from compiler.ops.random import normal_values
        from dsl.random_ops import op_seeds
        dims = _static(shape)
        dt = self._dtype(dtype)
        if dt not in (DType.f32, DType.f64):
            raise TypeError(f"the orthogonal initializer makes float32 or float64, got {dt}")
        if len(dims) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        rows, cols = math.prod(dims[:-1]), dims[-1]
        flat = (max(rows, cols), min(rows, cols))
        seed, seed2 = op_seeds(self.seed)
        a = normal_values(flat[0] * flat[1], dt, seed, seed2).astype(np.float64).reshape(flat)
        q, r = np.linalg.qr(a)
        d = np.diag(r)
        q = q * np.where(d < 0, -1.0, 1.0)         # sign(0) as 1: a unique Q all the same
        if rows < cols:
            q = q.T
        return constant((self.gain * q).reshape(dims).astype(dt.np), dtype=dt)


class identity_initializer(Initializer):  # noqa: N801
    """``gain`` times the identity matrix (2-D shapes only; TF1's Identity)."""

    def __init__(self, gain=1.0, dtype=None):
        self.gain = float(gain)
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dims = _static(shape)
        if len(dims) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        dt = self._dtype(dtype)
        return constant((self.gain * np.eye(*dims)).astype(dt.np), dtype=dt)


class uniform_unit_scaling_initializer(Initializer):  # noqa: N801
    """Uniform in [-m, m], m = factor * sqrt(3 / input_size), input_size the product of all
    dims but the last (TF1's UniformUnitScaling, deprecated there for variance_scaling)."""

    def __init__(self, factor=1.0, seed=None, dtype=None):
        self.factor, self.seed = float(factor), seed
        self.dtype = None if dtype is None else as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None) -> Tensor:
        dims = _static(shape)
        input_size = math.prod(dims[:-1]) if len(dims) > 1 else (dims[0] if dims else 1)
        limit = math.sqrt(3 / max(1, input_size)) * self.factor
        return random_uniform(dims, -limit, limit, self._dtype(dtype), seed=self.seed)


def he_normal(seed=None):
    """``variance_scaling(2, "fan_in", truncated normal)`` (``tf.initializers.he_normal``)."""
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    """``variance_scaling(2, "fan_in", uniform)`` (``tf.initializers.he_uniform``)."""
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None):
    """``variance_scaling(1, "fan_in", truncated normal)`` (``tf.initializers.lecun_normal``)."""
    return variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
    """``variance_scaling(1, "fan_in", uniform)`` (``tf.initializers.lecun_uniform``)."""
    return variance_scaling_initializer(1.0, "fan_in", "uniform", seed)


def glorot_uniform(seed=None, dtype=None):
    return glorot_uniform_initializer(seed, dtype)


def glorot_normal(seed=None, dtype=None):
    return glorot_normal_initializer(seed, dtype)


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
    orthogonal = orthogonal_initializer
    identity = identity_initializer
    uniform_unit_scaling = uniform_unit_scaling_initializer
    he_normal = staticmethod(he_normal)
    he_uniform = staticmethod(he_uniform)
    lecun_normal = staticmethod(lecun_normal)
    lecun_uniform = staticmethod(lecun_uniform)
