"""``fl.train.MomentumOptimizer`` (TF1 ``tf.train.MomentumOptimizer``), slot ``"momentum"``
(the variable ``<var>/Momentum``, zeros).

Dense, as TF1's ``ApplyMomentum`` kernel::

    accum = accum * momentum + grad
    var  -= accum * lr                                   (use_nesterov=False)
    var  -= grad * lr + accum * momentum * lr            (use_nesterov=True)

Sparse, as ``ResourceSparseApplyMomentum`` after TF1's deduplication (``g`` the summed
slices of one index): for each distinct index ``i`` only,
``accum[i] = accum[i] * momentum + g``, then ``var[i] -= lr * accum[i]`` (Nesterov:
``var[i] -= lr * g + lr * momentum * accum[i]``). Other rows of ``var`` and ``accum`` keep
their values, even where ``accum`` is not zero (unlike the dense update).
"""
from __future__ import annotations

from dsl.control_ops import group
from dsl.tensor import Tensor
from dsl.train.optimizer import Optimizer, _DedupedSlices
from dsl.variables import Variable

__all__ = ["MomentumOptimizer"]


class MomentumOptimizer(Optimizer):
    """Gradient descent with momentum (heavy ball, or Nesterov's form)."""

    def __init__(self, learning_rate, momentum, use_locking: bool = False,
                 name: str = "Momentum", use_nesterov: bool = False):
        super().__init__(use_locking, name)
        self._set_hyper("learning_rate", learning_rate)
        self._set_hyper("momentum", momentum)
        self._use_nesterov = bool(use_nesterov)

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad: Tensor, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        mom = self._get_hyper("momentum", var.dtype)
        accum = self.get_slot(var, "momentum")
        accum_t = accum.value() * mom + grad
        accum_update = accum.assign(accum_t, read_value=False)
        if self._use_nesterov:
            step = grad * lr + accum_t * mom * lr
        else:
            step = accum_t * lr
        return group(accum_update, var.assign_sub(step, read_value=False))

    def _apply_sparse(self, grad: _DedupedSlices, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        mom = self._get_hyper("momentum", var.dtype)
        accum = self.get_slot(var, "momentum")
        accum_rows = accum.sparse_read(grad.indices) * mom + grad.values
        accum_update = self._write_rows(accum, grad, accum_rows)
        if self._use_nesterov:
            step = lr * grad.values + lr * mom * accum_rows
        else:
            step = lr * accum_rows
        return group(accum_update, self._subtract_rows(var, grad, step))
