"""``fl.train.AdadeltaOptimizer`` (TF1 ``tf.train.AdadeltaOptimizer``), defaults
``learning_rate=0.001``, ``rho=0.95``, ``epsilon=1e-8``; slots ``"accum"`` and
``"accum_update"`` (the variables ``<var>/Adadelta`` and ``<var>/Adadelta_1``, zeros).

Dense, as TF1's ``ApplyAdadelta`` kernel::

    accum        = rho * accum + (1 - rho) * grad^2
    update       = sqrt(accum_update + epsilon) / sqrt(accum + epsilon) * grad
    accum_update = rho * accum_update + (1 - rho) * update^2
    var         -= lr * update

Sparse, as ``ResourceSparseApplyAdadelta`` after TF1's deduplication: the same for each
distinct index's row only.
"""
from __future__ import annotations

from dsl.control_ops import group
from dsl.math_ops import sqrt
from dsl.tensor import Tensor
from dsl.train.optimizer import Optimizer, _DedupedSlices
from dsl.variables import Variable

__all__ = ["AdadeltaOptimizer"]


class AdadeltaOptimizer(Optimizer):
    """Adadelta (Zeiler, 2012): step sizes from running averages of squared gradients and
    squared updates."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8, use_locking: bool = False,
                 name: str = "Adadelta"):
        super().__init__(use_locking, name)
        self._set_hyper("learning_rate", learning_rate)
        self._set_hyper("rho", rho)
        self._set_hyper("epsilon", epsilon)

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _prepare(self, dtype):
        self._get_one_minus("rho", dtype)

    def _update(self, grad: Tensor, accum: Tensor, accum_update: Tensor, dtype):
        rho, epsilon = self._get_hyper("rho", dtype), self._get_hyper("epsilon", dtype)
        one_minus_rho = self._get_one_minus("rho", dtype)
        accum_t = accum * rho + grad * grad * one_minus_rho
        update = sqrt(accum_update + epsilon) / sqrt(accum_t + epsilon) * grad
        accum_update_t = accum_update * rho + update * update * one_minus_rho
        return accum_t, update, accum_update_t

    def _apply_dense(self, grad: Tensor, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        accum, accum_update = self.get_slot(var, "accum"), self.get_slot(var, "accum_update")
        accum_t, update, accum_update_t = self._update(grad, accum.value(), accum_update.value(),
                                                       var.dtype)
        return group(accum.assign(accum_t, read_value=False),
                     accum_update.assign(accum_update_t, read_value=False),
                     var.assign_sub(update * lr, read_value=False))

    def _apply_sparse(self, grad: _DedupedSlices, var: Variable):
        lr = self._get_hyper("learning_rate", var.dtype)
        accum, accum_update = self.get_slot(var, "accum"), self.get_slot(var, "accum_update")
        ids = grad.indices
        accum_rows, update, accum_update_rows = self._update(
            grad.values, accum.sparse_read(ids), accum_update.sparse_read(ids), var.dtype)
        return group(self._write_rows(accum, grad, accum_rows),
                     self._write_rows(accum_update, grad, accum_update_rows),
                     self._subtract_rows(var, grad, update * lr))
