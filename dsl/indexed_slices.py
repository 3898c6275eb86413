"""``fl.IndexedSlices``: a sparse gradient as the paper prescribes, a tuple of dense tensors.

``values[i]`` is the slice at row ``indices[i]`` of a tensor of ``dense_shape``; an index may
repeat (its slices add up). The gradient of ``GatherV2`` (axis 0) and ``ResourceGather`` is one,
so an optimizer updates only the rows a step used (``ResourceScatterSub``). Anything that needs
the dense tensor converts it with ``to_dense`` (an ``UnsortedSegmentSum``).
"""
from __future__ import annotations

from typing import Optional

from dsl.tensor import Tensor

__all__ = ["IndexedSlices"]


class IndexedSlices:
    def __init__(self, values, indices, dense_shape=None):
        from dsl.ops import convert_to_tensor
        self.values: Tensor = convert_to_tensor(values)
        self.indices: Tensor = convert_to_tensor(indices)
        self.dense_shape = dense_shape          # a Tensor, a list, or None

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def graph(self):
        return self.values.graph

    @property
    def name(self) -> str:
        return self.values.name

    def num_rows(self) -> Tensor:
        from dsl.array_ops import shape as shape_of
        from dsl.ops import convert_to_tensor
        if self.dense_shape is None:
            raise ValueError("these IndexedSlices have no dense_shape; cannot make them dense")
        ds = self.dense_shape
        if isinstance(ds, (list, tuple)) and ds and isinstance(ds[0], int):
            return convert_to_tensor(ds[0], dtype=self.indices.dtype)
        from dsl.ops import apply_op
        return apply_op("GatherV2", [convert_to_tensor(ds), 0, 0], {}, name="num_rows")

    def to_dense(self, name: Optional[str] = None) -> Tensor:
        """The dense tensor: slices summed into their rows."""
        from dsl.math_ops import unsorted_segment_sum
        from dsl.array_ops import cast
        n = self.num_rows()
        if n.dtype is not self.indices.dtype:
            n = cast(n, self.indices.dtype)
        return unsorted_segment_sum(self.values, self.indices, n, name=name or "to_dense")

    def _as_graph_tensor(self, dtype=None) -> Tensor:
        return self.to_dense()

    def __repr__(self) -> str:
        return f"<fl.IndexedSlices values={self.values.name} indices={self.indices.name}>"
