"""Gradient clipping (TF1's ``tf.clip_by_value``, ``tf.clip_by_norm``, ``tf.global_norm``,
``tf.clip_by_global_norm``), with TensorFlow's formulas:

- ``clip_by_value(t, lo, hi)     = maximum(minimum(t, hi), lo)``
- ``clip_by_norm(t, c, axes)     = t * c / maximum(l2norm(t, axes), c)``, where
  ``l2norm = sqrt(sum(t * t, axes, keepdims=True))`` (0 where that sum is 0, with a safe
  gradient)
- ``global_norm(ts)              = sqrt(sum_i 2 * l2_loss(t_i))``
- ``clip_by_global_norm(ts, c)   = [t_i * c / maximum(global_norm, c)], global_norm``; the
  scale is ``c * min(1 / global_norm, 1 / c)``, NaN for every tensor when the norm is
  infinite or NaN, as in TensorFlow.

``IndexedSlices`` are clipped as TensorFlow does: their values are clipped (norms are the
norms of the values, repeated indices counted separately), the indices and dense shape are
kept. ``None`` entries of a list stay None. Scalars such as ``clip_norm`` take the dtype of
the tensor they scale.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from dsl.array_ops import identity, ones_like, stack
from dsl.context import name_scope
from dsl.indexed_slices import IndexedSlices
from dsl.math_ops import cast, greater, maximum, minimum, sqrt, where
from dsl.nn_losses import l2_loss
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["clip_by_value", "clip_by_norm", "global_norm", "clip_by_global_norm"]


def _values(t):
    """The dense tensor to work on: ``t`` itself, or an IndexedSlices' values."""
    return t.values if isinstance(t, IndexedSlices) else convert_to_tensor(t)


def _like(t, values: Tensor):
    """``values`` in the form of ``t`` (IndexedSlices keep their indices and dense shape)."""
    if isinstance(t, IndexedSlices):
        return IndexedSlices(values, t.indices, t.dense_shape)
    return values


def _scalar(value, dtype: DType) -> Tensor:
    """A Python number as ``dtype``; a tensor cast to it."""
    if isinstance(value, Tensor) or hasattr(value, "_as_graph_tensor"):
        return cast(convert_to_tensor(value), dtype)
    return convert_to_tensor(value, dtype=dtype)


def clip_by_value(t, clip_value_min, clip_value_max, name: Optional[str] = None):
    """Each element of ``t`` limited to [clip_value_min, clip_value_max]."""
    with name_scope(name or "clip_by_value"):
        values = _values(t)
        lo = _scalar(clip_value_min, values.dtype)
        hi = _scalar(clip_value_max, values.dtype)
        clipped = maximum(minimum(values, hi), lo)
        return _like(t, identity(clipped, name="clipped"))


def clip_by_norm(t, clip_norm, axes=None, name: Optional[str] = None):
    """``t`` scaled so that its L2 norm (over ``axes``, all when None) is at most
    ``clip_norm``; unchanged where the norm is already smaller."""
    with name_scope(name or "clip_by_norm"):
        values = _values(t)
        c = _scalar(clip_norm, values.dtype)
        l2sum = reduce_sum(values * values, axes, keepdims=True)
        pred = greater(l2sum, 0)
        l2sum_safe = where(pred, l2sum, ones_like(l2sum))      # no NaN gradient at 0
        l2norm = where(pred, sqrt(l2sum_safe), l2sum)
        clipped = values * c / maximum(l2norm, c)
        return _like(t, identity(clipped, name="clipped"))


def global_norm(t_list: Sequence, name: Optional[str] = None) -> Tensor:
    """sqrt(sum of the squares of every element of every tensor of ``t_list``); None entries
    are skipped. Tensors of several float dtypes are summed in the widest."""
    if isinstance(t_list, (Tensor, IndexedSlices)) or not isinstance(t_list, (list, tuple)):
        raise TypeError("global_norm takes a list or tuple of tensors")
    values = [_values(t) for t in t_list if t is not None]
    if not values:
        raise ValueError("global_norm needs at least one tensor that is not None")
    with name_scope(name or "global_norm"):
        halves = [l2_loss(v) for v in values]
        dtype = _widest([h.dtype for h in halves])
        half = reduce_sum(stack([cast(h, dtype) for h in halves]))
        return sqrt(half * convert_to_tensor(2, dtype=dtype), name="global_norm")


def clip_by_global_norm(t_list: Sequence, clip_norm, use_norm=None,
                        name: Optional[str] = None) -> Tuple[List, Tensor]:
    """Every tensor of ``t_list`` scaled by ``clip_norm / max(global_norm, clip_norm)``;
    returns ``(clipped list, global norm)``. ``use_norm`` supplies the norm if already known."""
    if isinstance(t_list, (Tensor, IndexedSlices)) or not isinstance(t_list, (list, tuple)):
        raise TypeError("clip_by_global_norm takes a list or tuple of tensors")
    t_list = list(t_list)
    norm = global_norm(t_list) if use_norm is None else convert_to_tensor(use_norm)
    with name_scope(name or "clip_by_global_norm"):
        dtype = norm.dtype
        c = _scalar(clip_norm, dtype)
        one = convert_to_tensor(1, dtype=dtype)
        scale_for_finite = c * minimum(one / norm, one / c)
        scale = scale_for_finite + (norm - norm)               # NaN if the norm is inf or NaN
        out = []
        for k, t in enumerate(t_list):
            if t is None:
                out.append(None)
                continue
            values = _values(t)
            clipped = identity(values * cast(scale, values.dtype), name=f"clipped_{k}")
            out.append(_like(t, clipped))
        return out, norm


_FLOAT_ORDER = (DType.f16, DType.bf16, DType.f32, DType.f64)


def _widest(dtypes) -> DType:
    return max(dtypes, key=lambda d: _FLOAT_ORDER.index(d) if d in _FLOAT_ORDER else -1)
