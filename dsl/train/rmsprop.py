"""``fl.train.RMSPropOptimizer`` (TF1 ``tf.train.RMSPropOptimizer``).

Slots: ``"rms"`` (``<var>/RMSProp``, initialised to ONES, as in TF1), ``"mg"`` when
``centered`` (zeros), and ``"momentum"`` (zeros); with the defaults ``decay=0.9``,
``momentum=0.0``, ``epsilon=1e-10``.

Dense, as TF1's ``ApplyRMSProp`` / ``ApplyCenteredRMSProp`` kernels (``rho`` = decay)::

    ms  += (grad * grad - ms) * (1 - rho)          # = rho * ms + (1 - rho) * grad^2
    mg  += (grad - mg) * (1 - rho)                 # centered only
    denom = ms + epsilon                           # centered: (ms - mg * mg) + epsilon
    mom  = mom * momentum + grad * lr / sqrt(denom)
    var -= mom

Sparse, as ``ResourceSparseApply(Centered)RMSProp`` after TF1's deduplication, for each
distinct index ``i`` only (other rows keep var, ms, mg and mom)::

    ms[i]  = ms[i] * rho + g * g * (1 - rho)
    mg[i]  = mg[i] * rho + g * (1 - rho)           # centered only
    denom  = ms[i] + epsilon                       # centered: ms[i] + epsilon - mg[i]^2
    mom[i] = mom[i] * momentum + rsqrt(denom) * lr * g
    var[i] -= mom[i]
"""
from __future__ import annotations

from dsl.control_ops import group
from dsl.init_ops import ones_initializer
from dsl.math_ops import rsqrt, sqrt
from dsl.tensor import Tensor
from dsl.train.optimizer import Optimizer, _DedupedSlices
from dsl.variables import Variable

__all__ = ["RMSPropOptimizer"]


class RMSPropOptimizer(Optimizer):
    """RMSProp (Hinton's lecture 6e), optionally centered and with momentum."""

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking: bool = False, centered: bool = False, name: str = "RMSProp"):
        super().__init__(use_locking, name)
        self._set_hyper("learning_rate", learning_rate)
        self._set_hyper("decay", decay)
        self._set_hyper("momentum", momentum)
        self._set_hyper("epsilon", epsilon)
        self._centered = bool(centered)

    def _create_slots(self, var_list):
        for v in var_list:
            self._get_or_make_slot_with_initializer(v, ones_initializer(), "rms", self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _prepare(self, dtype):
        self._get_one_minus("decay", dtype)

    def _apply_dense(self, grad: Tensor, var: Variable):
        dt = var.dtype
        lr, momentum = self._get_hyper("learning_rate", dt), self._get_hyper("momentum", dt)
        epsilon, one_minus_rho = self._get_hyper("epsilon", dt), self._get_one_minus("decay", dt)
        ms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        ms_old = ms.value()
        ms_t = ms_old + (grad * grad - ms_old) * one_minus_rho
        updates = [ms.assign(ms_t, read_value=False)]
        if self._centered:
            mg = self.get_slot(var, "mg")
            mg_old = mg.value()
            mg_t = mg_old + (grad - mg_old) * one_minus_rho
            updates.append(mg.assign(mg_t, read_value=False))
            denom = (ms_t - mg_t * mg_t) + epsilon
        else:
            denom = ms_t + epsilon
        mom_t = mom.value() * momentum + grad * lr / sqrt(denom)
        updates.append(mom.assign(mom_t, read_value=False))
        updates.append(var.assign_sub(mom_t, read_value=False))
        return group(*updates)

    def _apply_sparse(self, grad: _DedupedSlices, var: Variable):
        dt = var.dtype
        lr, momentum = self._get_hyper("learning_rate", dt), self._get_hyper("momentum", dt)
        epsilon, rho = self._get_hyper("epsilon", dt), self._get_hyper("decay", dt)
        one_minus_rho = self._get_one_minus("decay", dt)
        ms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        g, ids = grad.values, grad.indices
        ms_rows = ms.sparse_read(ids) * rho + g * g * one_minus_rho
        updates = [self._write_rows(ms, grad, ms_rows)]
        if self._centered:
            mg = self.get_slot(var, "mg")
            mg_rows = mg.sparse_read(ids) * rho + g * one_minus_rho
            updates.append(self._write_rows(mg, grad, mg_rows))
            denom = ms_rows + epsilon - mg_rows * mg_rows
        else:
            denom = ms_rows + epsilon
        mom_rows = mom.sparse_read(ids) * momentum + rsqrt(denom) * lr * g
        updates.append(self._write_rows(mom, grad, mom_rows))
        updates.append(self._subtract_rows(var, grad, mom_rows))
        return group(*updates)
