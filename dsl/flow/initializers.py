"""``init.*`` in ``*.flow`` files: seeded constant initialisers, computed with numpy when the
graph is built (variables come with training; until then weights are constants)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from dsl.ops import constant
from dsl.tensor import Tensor
from runtime.dtypes import DType, as_dtype

__all__ = ["normal", "uniform", "he_normal", "glorot_uniform", "zeros"]


def _shape(shape: Sequence[int]) -> tuple:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = [shape]
    dims = tuple(shape)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
               for d in dims):
        raise ValueError(f"shape must be a list of non-negative integers, got {list(dims)}")
    return dims


def _const(values: np.ndarray, dtype, name: Optional[str]) -> Tensor:
    dt = as_dtype(dtype)
    if not dt.is_floating:
        raise TypeError(f"initialisers make floating-point tensors, not {dt}")
    return constant(values.astype(dt.np), dtype=dt, name=name)


def normal(shape: Sequence[int], stddev: float = 1.0, mean: float = 0.0, seed: int = 0,
           dtype=DType.f32, name: Optional[str] = None) -> Tensor:
    """A constant drawn from N(mean, stddev²) with numpy's generator seeded by ``seed``."""
    rng = np.random.default_rng(seed)
    return _const(rng.normal(mean, stddev, size=_shape(shape)), dtype, name)


def uniform(shape: Sequence[int], minval: float = 0.0, maxval: float = 1.0, seed: int = 0,
            dtype=DType.f32, name: Optional[str] = None) -> Tensor:
    """A constant drawn uniformly from [minval, maxval) with a seeded generator."""
    low, high = float(minval), float(maxval)
    if not np.isfinite(high - low):
        raise ValueError(f"uniform needs a finite range, got [{minval}, {maxval})")
    rng = np.random.default_rng(seed)
    # what rng.uniform(low, high) computes, without its per-call error-state setup
    return _const(rng.random(_shape(shape)) * (high - low) + low, dtype, name)


def he_normal(shape: Sequence[int], seed: int = 0, dtype=DType.f32,
              name: Optional[str] = None) -> Tensor:
    """N(0, 2 / fan_in), fan_in being the first dim (He et al., for ReLU layers)."""
    dims = _shape(shape)
    fan_in = dims[0] if dims else 1
    return normal(dims, stddev=float(np.sqrt(2.0 / max(fan_in, 1))), seed=seed, dtype=dtype,
                  name=name)


def glorot_uniform(shape: Sequence[int], seed: int = 0, dtype=DType.f32,
                   name: Optional[str] = None) -> Tensor:
    """U(-l, l) with l = sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio)."""
    dims = _shape(shape)
    fan_in = dims[0] if dims else 1
    fan_out = dims[-1] if dims else 1
    limit = float(np.sqrt(6.0 / max(fan_in + fan_out, 1)))
    return uniform(dims, -limit, limit, seed=seed, dtype=dtype, name=name)


def zeros(shape: Sequence[int], dtype=DType.f32, name: Optional[str] = None) -> Tensor:
    """A constant of zeros."""
    return _const(np.zeros(_shape(shape)), dtype, name)
