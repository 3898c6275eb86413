"""Small building blocks the lowerings share: constants of a tensor's dtype, static shapes,
ONNX axis arithmetic."""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

import dsl as fl
from dsl.ops import apply_op
from dsl.tensor import Tensor


def scalar(value, like: Tensor) -> Tensor:
    """A scalar constant of ``like``'s dtype."""
    return fl.constant(np.asarray(value).astype(like.dtype.np), dtype=like.dtype)


def index_const(values: Sequence[int]) -> Tensor:
    """A 1-D i64 constant (shapes, axes, paddings)."""
    return fl.constant(np.asarray(values, dtype=np.int64).reshape(-1), dtype=fl.int64)


def rank_of(x: Tensor, ctx=None) -> int:
    shape = static_shape(x)
    if shape is None:
        if ctx is not None:
            raise ctx.error(f"the rank of input '{x.name}' must be known")
        raise ValueError(f"the rank of '{x.name}' must be known")
    return len(shape)


def static_shape(x: Tensor) -> Optional[List[Optional[int]]]:
    """The static shape as a list of ints and None, or None for an unknown rank."""
    shape = x.output.shape
    return None if shape is None else list(shape)


def full_shape(x: Tensor) -> Optional[List[int]]:
    """The shape when every dim is known, else None."""
    s = static_shape(x)
    return s if s is not None and all(d is not None for d in s) else None


def normalize_axis(axis: int, rank: int, ctx) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def shape_i64(x: Tensor) -> Tensor:
    return apply_op("Shape", [x], {"out_type": fl.int64})


def binary(op: str, a: Tensor, b: Tensor) -> Tensor:
    return apply_op(op, [a, b])


def unary(op: str, x: Tensor) -> Tensor:
    return apply_op(op, [x])


def index_scalar(value: int) -> Tensor:
    return fl.constant(np.int64(value), dtype=fl.int64)
