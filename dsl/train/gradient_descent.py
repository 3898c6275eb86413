"""``fl.train.GradientDescentOptimizer`` (TF1 ``tf.train.GradientDescentOptimizer``).

Dense (TF1's ``ApplyGradientDescent`` kernel):   ``var -= grad * lr``
Sparse (TF1's ``_resource_apply_sparse_duplicate_indices``): ``var[indices] -= values * lr``
with one ``ResourceScatterSub``; repeated indices need no deduplication (the update is
linear, and the scatter adds them up), and rows not in ``indices`` are untouched.
"""
from __future__ import annotations

from dsl.indexed_slices import IndexedSlices
from dsl.tensor import Tensor
from dsl.train.optimizer import Optimizer
from dsl.variables import Variable

__all__ = ["GradientDescentOptimizer"]


class GradientDescentOptimizer(Optimizer):
    """Plain gradient descent: ``var -= learning_rate * grad``."""

    def __init__(self, learning_rate, use_locking: bool = False, name: str = "GradientDescent"):
        super().__init__(use_locking, name)
        self._set_hyper("learning_rate", learning_rate)

    def _apply_dense(self, grad: Tensor, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        return var.assign_sub(grad * lr, read_value=False)

    def _apply_sparse_duplicate_indices(self, grad: IndexedSlices, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        return var.scatter_sub(IndexedSlices(grad.values * lr, grad.indices, grad.dense_shape))
