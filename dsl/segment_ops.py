"""TF1's segment reductions: ``fl.segment_sum/mean/max/min/prod`` (sorted ids),
``fl.unsorted_segment_max/min/prod/mean/sqrt_n`` and ``fl.sparse_segment_sum/mean/sqrt_n``,
each over the raw op of TF's name (``unsorted_segment_mean`` and ``_sqrt_n`` composed as TF
composes them: the unsorted sum divided by the row count per segment, at least 1).
"""
from __future__ import annotations

from typing import Optional

from dsl.array_ops import concat, ones, rank, reshape, shape
from dsl.context import name_scope
from dsl.math_ops import divide, maximum, sqrt, unsorted_segment_sum
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor

__all__ = [
    "segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod",
    "unsorted_segment_max", "unsorted_segment_min", "unsorted_segment_prod",
    "unsorted_segment_mean", "unsorted_segment_sqrt_n",
    "sparse_segment_sum", "sparse_segment_mean", "sparse_segment_sqrt_n",
]


def _sorted(op: str, data, segment_ids, name: Optional[str]) -> Tensor:
    return apply_op(op, [data, segment_ids], name=name or op)


def segment_sum(data, segment_ids, name: Optional[str] = None) -> Tensor:
    """Sums of data's rows per sorted segment id (tf.math.segment_sum)."""
    return _sorted("SegmentSum", data, segment_ids, name)


def segment_mean(data, segment_ids, name: Optional[str] = None) -> Tensor:
    """Means of data's rows per sorted segment id; an empty segment gives 0."""
    return _sorted("SegmentMean", data, segment_ids, name)


def segment_max(data, segment_ids, name: Optional[str] = None) -> Tensor:
    """Maxima of data's rows per sorted segment id; an empty segment gives 0."""
    return _sorted("SegmentMax", data, segment_ids, name)


def segment_min(data, segment_ids, name: Optional[str] = None) -> Tensor:
    """Minima of data's rows per sorted segment id; an empty segment gives 0."""
    return _sorted("SegmentMin", data, segment_ids, name)


def segment_prod(data, segment_ids, name: Optional[str] = None) -> Tensor:
    """Products of data's rows per sorted segment id; an empty segment gives 1."""
    return _sorted("SegmentProd", data, segment_ids, name)


def _unsorted(op: str, data, segment_ids, num_segments, name: Optional[str]) -> Tensor:
    return apply_op(op, [data, segment_ids, num_segments], name=name or op)


def unsorted_segment_max(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
    """Maxima per segment id (negative ids dropped); an empty segment gives the type's lowest."""
    return _unsorted("UnsortedSegmentMax", data, segment_ids, num_segments, name)


def unsorted_segment_min(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
    """Minima per segment id (negative ids dropped); an empty segment gives the type's highest."""
    return _unsorted("UnsortedSegmentMin", data, segment_ids, num_segments, name)


def unsorted_segment_prod(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
    """Products per segment id (negative ids dropped); an empty segment gives 1."""
    return _unsorted("UnsortedSegmentProd", data, segment_ids, num_segments, name)


def _unsorted_segment_n(data: Tensor, segment_ids: Tensor, num_segments: Tensor) -> Tensor:
    """Rows per segment, at least 1, shaped to broadcast against the segment sums (TF's
    ``_unsorted_segment_N``)."""
    n = unsorted_segment_sum(ones(shape(segment_ids), dtype=data.dtype), segment_ids,
                             num_segments)
    extra = rank(data) - rank(segment_ids)
    wide = concat([reshape(num_segments, [1]),
                   ones(reshape(extra, [1]), dtype=num_segments.dtype)], 0)
    return maximum(reshape(n, wide), 1)


def unsorted_segment_mean(data, segment_ids, num_segments, name: Optional[str] = None) -> Tensor:
    """Means per segment id (negative ids dropped; an empty segment gives 0), as TF composes
    it: the unsorted sum divided by the row count."""
    with name_scope(name or "UnsortedSegmentMean"):
        data, segment_ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
        num_segments = convert_to_tensor(num_segments)
        n = _unsorted_segment_n(data, segment_ids, num_segments)
        return divide(unsorted_segment_sum(data, segment_ids, num_segments), n)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments,
                            name: Optional[str] = None) -> Tensor:
    """Sums per segment id divided by sqrt(row count) (negative ids dropped; an empty segment
    gives 0), as TF composes it."""
    with name_scope(name or "UnsortedSegmentSqrtN"):
        data, segment_ids = convert_to_tensor(data), convert_to_tensor(segment_ids)
        num_segments = convert_to_tensor(num_segments)
        n = _unsorted_segment_n(data, segment_ids, num_segments)
        return divide(unsorted_segment_sum(data, segment_ids, num_segments), sqrt(n))


def _sparse(op: str, data, indices, segment_ids, name, num_segments) -> Tensor:
    if num_segments is not None:
        return apply_op(op + "WithNumSegments", [data, indices, segment_ids, num_segments],
                        name=name or op + "WithNumSegments")
    return apply_op(op, [data, indices, segment_ids], name=name or op)


def sparse_segment_sum(data, indices, segment_ids, name: Optional[str] = None,
                       num_segments=None) -> Tensor:
    """Sums of the rows ``data[indices]`` per sorted segment id (tf.sparse.segment_sum)."""
    return _sparse("SparseSegmentSum", data, indices, segment_ids, name, num_segments)


def sparse_segment_mean(data, indices, segment_ids, name: Optional[str] = None,
                        num_segments=None) -> Tensor:
    """Means of the rows ``data[indices]`` per sorted segment id; an empty segment gives 0."""
    return _sparse("SparseSegmentMean", data, indices, segment_ids, name, num_segments)


def sparse_segment_sqrt_n(data, indices, segment_ids, name: Optional[str] = None,
                          num_segments=None) -> Tensor:
    """Sums of the rows ``data[indices]`` per sorted segment id divided by sqrt(count)."""
    return _sparse("SparseSegmentSqrtN", data, indices, segment_ids, name, num_segments)
