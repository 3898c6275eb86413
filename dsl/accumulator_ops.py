"""``fl.ConditionalAccumulator``: a gradient accumulator in the graph (TensorFlow 1.x's
``tf.ConditionalAccumulator``), over the ops of ``compiler/ops/accumulator.py``.

Replicas ``apply_grad(grad, local_step)``; one taker ``take_grad(num_required)`` gets the mean
of ``num_required`` fresh gradients. Gradients older than the accumulator's global step are
dropped as stale; with ``max_accumulated=k`` only the first ``k`` fresh gradients of a step are
kept and later ones are dropped (the paper's backup workers). ``dropped_counts()`` measures both.
"""
from __future__ import annotations

from typing import Optional, Tuple

from dsl.context import colocate_with
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Operation, Tensor
from runtime.dtypes import DType, as_dtype

__all__ = ["ConditionalAccumulator", "SparseConditionalAccumulator"]


class ConditionalAccumulator:
    """``ConditionalAccumulator(dtype, shape, shared_name=None, max_accumulated=0)``."""

    _OP = "ConditionalAccumulator"

    def __init__(self, dtype, shape, shared_name: Optional[str] = None,
                 max_accumulated: int = 0, name: str = "conditional_accumulator"):
        self.dtype = as_dtype(dtype)
        if shape is None:
            raise ValueError("a ConditionalAccumulator needs the gradients' shape")
        self.shape = tuple(None if d is None or d < 0 else int(d) for d in shape)
        self.max_accumulated = int(max_accumulated)
        self.accumulator_ref = apply_op(
            self._OP, [],
            {"dtype": self.dtype, "shape": self.shape, "shared_name": shared_name or "",
             "max_accumulated": self.max_accumulated}, name=name)
        self.name = self.accumulator_ref.op.name

    def _op(self, op: str, inputs, attrs, name: Optional[str]):
        with colocate_with(self.accumulator_ref):
            return apply_op(op, [self.accumulator_ref] + list(inputs), attrs,
                            name=name or f"{self.name}_{op.replace('Accumulator', '')}")

    def apply_grad(self, grad, local_step=0, name: Optional[str] = None) -> Operation:
        """Add ``grad`` computed at ``local_step`` (dropped if stale or beyond the limit)."""
        return self._op("AccumulatorApplyGradient",
                        [convert_to_tensor(local_step, dtype=DType.i64),
                         convert_to_tensor(grad, dtype=self.dtype)], {}, name)

    def take_grad(self, num_required, name: Optional[str] = None) -> Tensor:
        """The mean of ``num_required`` gradients, once they are there (blocks)."""
        return self._op("AccumulatorTakeGradient",
                        [convert_to_tensor(num_required, dtype=DType.i32)],
                        {"dtype": self.dtype}, name)

    def num_accumulated(self, name: Optional[str] = None) -> Tensor:
        return self._op("AccumulatorNumAccumulated", [], {}, name)

    def set_global_step(self, new_global_step, name: Optional[str] = None) -> Operation:
        return self._op("AccumulatorSetGlobalStep",
                        [convert_to_tensor(new_global_step, dtype=DType.i64)], {}, name)

    def dropped_counts(self, name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
        """(gradients dropped beyond ``max_accumulated``, stale gradients) so far, i64."""
        dropped, stale = self._op("AccumulatorDropCounts", [], {}, name)
        return dropped, stale

    def close(self, name: Optional[str] = None) -> Operation:
        """End of input: waiting takes end with OutOfRangeError, later applies AbortedError."""
        return self._op("AccumulatorClose", [], {}, name)


class SparseConditionalAccumulator(ConditionalAccumulator):
    """The same for sparse gradients (``fl.IndexedSlices`` of a tensor of ``shape``):
    ``apply_indexed_slices_grad`` and ``take_indexed_slices_grad`` (each touched row once)."""

    _OP = "SparseConditionalAccumulator"

    def __init__(self, dtype, shape, shared_name: Optional[str] = None,
                 max_accumulated: int = 0, name: str = "sparse_conditional_accumulator"):
        super().__init__(dtype, shape, shared_name, max_accumulated, name)

    def apply_grad(self, grad_indices, grad_values, local_step=0,
                   name: Optional[str] = None) -> Operation:
        from dsl.array_ops import cast
        indices = convert_to_tensor(grad_indices)
        if indices.dtype is not DType.i64:
            indices = cast(indices, DType.i64)
        return self._op("SparseAccumulatorApplyGradient",
                        [convert_to_tensor(local_step, dtype=DType.i64), indices,
                         convert_to_tensor(grad_values, dtype=self.dtype)], {}, name)

    def apply_indexed_slices_grad(self, grad, local_step=0,
                                  name: Optional[str] = None) -> Operation:
        return self.apply_grad(grad.indices, grad.values, local_step, name)

    def take_grad(self, num_required, name: Optional[str] = None):
        """(indices, values, dense_shape) of the mean, once ``num_required`` are there."""
        return self._op("SparseAccumulatorTakeGradient",
                        [convert_to_tensor(num_required, dtype=DType.i32)],
                        {"dtype": self.dtype}, name)

    def take_indexed_slices_grad(self, num_required, name: Optional[str] = None):
        from dsl.indexed_slices import IndexedSlices
        indices, values, shape = self.take_grad(num_required, name)
        return IndexedSlices(values, indices, shape)
