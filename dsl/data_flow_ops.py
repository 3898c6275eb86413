"""``fl.dynamic_partition`` and ``fl.dynamic_stitch`` (TensorFlow's data_flow_ops)."""
from __future__ import annotations

from typing import List, Optional, Sequence

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["dynamic_partition", "dynamic_stitch"]


def dynamic_partition(data, partitions, num_partitions: int,
                      name: Optional[str] = None) -> List[Tensor]:
    """``num_partitions`` tensors: output k holds the rows of ``data`` whose ``partitions``
    entry is k, in order (``partitions`` is int32, its shape a prefix of ``data``'s)."""
    out = apply_op("DynamicPartition",
                   [convert_to_tensor(data), convert_to_tensor(partitions, dtype=DType.i32)],
                   {"num_partitions": int(num_partitions)}, name=name or "DynamicPartition")
    return list(out) if isinstance(out, (list, tuple)) else [out]


def dynamic_stitch(indices: Sequence, data: Sequence, name: Optional[str] = None) -> Tensor:
    """``merged[indices[m][i]] = data[m][i]``: the inverse of ``dynamic_partition`` given the
    partitioned row numbers."""
    if len(indices) != len(data) or not indices:
        raise ValueError(f"dynamic_stitch needs as many index tensors as data tensors (and at "
                         f"least one), got {len(indices)} and {len(data)}")
    return apply_op("DynamicStitch", [[convert_to_tensor(i, dtype=DType.i32) for i in indices],
                                      [convert_to_tensor(d) for d in data]], {},
                    name=name or "DynamicStitch")
