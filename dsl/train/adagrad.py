"""``fl.train.AdagradOptimizer`` (TF1 ``tf.train.AdagradOptimizer``), slot ``"accumulator"``
(the variable ``<var>/Adagrad``, filled with ``initial_accumulator_value``, default 0.1).

Dense, as TF1's ``ApplyAdagrad`` kernel::

    accum += grad * grad
    var   -= grad * lr * rsqrt(accum)

Sparse, as ``ResourceSparseApplyAdagrad`` after TF1's deduplication: for each distinct
index ``i`` only, ``accum[i] += g * g`` and ``var[i] -= lr * g * rsqrt(accum[i])``.
"""
from __future__ import annotations

from dsl.control_ops import group
from dsl.init_ops import constant_initializer
from dsl.math_ops import rsqrt
from dsl.tensor import Tensor
from dsl.train.optimizer import Optimizer, _DedupedSlices
from dsl.variables import Variable

__all__ = ["AdagradOptimizer"]


class AdagradOptimizer(Optimizer):
    """Adagrad: per-coordinate learning rates from the sum of squared gradients."""

    def __init__(self, learning_rate, initial_accumulator_value: float = 0.1,
                 use_locking: bool = False, name: str = "Adagrad"):
        if not isinstance(initial_accumulator_value, (int, float)) or \
                initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value!r}")
        super().__init__(use_locking, name)
        self._set_hyper("learning_rate", learning_rate)
        self._initial_accumulator_value = float(initial_accumulator_value)

    def _create_slots(self, var_list):
        for v in var_list:
            self._get_or_make_slot_with_initializer(
                v, constant_initializer(self._initial_accumulator_value), "accumulator",
                self._name)

    def _apply_dense(self, grad: Tensor, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        accum = self.get_slot(var, "accumulator")
        accum_t = accum.value() + grad * grad
        accum_update = accum.assign(accum_t, read_value=False)
        return group(accum_update, var.assign_sub(grad * lr * rsqrt(accum_t), read_value=False))

    def _apply_sparse(self, grad: _DedupedSlices, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        accum = self.get_slot(var, "accumulator")
        g = grad.values
        accum_rows = accum.sparse_read(grad.indices) + g * g
        accum_update = self._write_rows(accum, grad, accum_rows)
        return group(accum_update, self._subtract_rows(var, grad, lr * g * rsqrt(accum_rows)))
