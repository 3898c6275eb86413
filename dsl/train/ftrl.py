"""``fl.train.FtrlOptimizer`` (TF1 ``tf.train.FtrlOptimizer``): FTRL-Proximal (McMahan et al.,
2013). Slots ``"accum"`` (``<var>/Ftrl``, filled with ``initial_accumulator_value``) and
``"linear"`` (``<var>/Ftrl_1``, zeros; ``accum_name`` / ``linear_name`` rename them). ``l2``
below is ``l2_regularization_strength + beta / (2 * learning_rate)``, as TF1 adjusts it.

Dense, as TF1's ``ApplyFtrl`` (``ApplyFtrlV2`` with ``l2_shrinkage_regularization_strength``,
whose ``grad + 2 * l2_shrinkage * var`` replaces ``grad`` in the linear term), with
``p = -learning_rate_power``::

    new_accum = accum + grad^2
    linear   += grad - (new_accum^p - accum^p) / lr * var
    var       = (clip(linear, -l1, l1) - linear) / (new_accum^p / lr + 2 * l2)  if |linear| > l1
                else 0
    accum     = new_accum

Sparse, as ``ResourceSparseApplyFtrl(V2)`` after TF1's deduplication: the same for each distinct
index's row only.
"""
from __future__ import annotations

from dsl.control_ops import group
from dsl.math_ops import abs as _abs, maximum, minimum, pow as _pow, sqrt, where
from dsl.array_ops import zeros_like
from dsl.init_ops import constant_initializer
from dsl.tensor import Tensor
from dsl.train.optimizer import Optimizer, _DedupedSlices
from dsl.variables import Variable

__all__ = ["FtrlOptimizer"]


def _check_number(value, what: str, test, words: str):
    if isinstance(value, (int, float)) and not test(value):
        raise ValueError(f"{what} ({value}) must be {words}.")


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal with L1, L2 and L2-shrinkage regularization."""

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking: bool = False, name: str = "Ftrl", accum_name=None,
                 linear_name=None, l2_shrinkage_regularization_strength=0.0, beta=None):
        super().__init__(use_locking, name)
        if not isinstance(initial_accumulator_value, (int, float)) or \
                initial_accumulator_value < 0.0:
            raise ValueError(f"initial_accumulator_value {initial_accumulator_value} needs to "
                             "be positive or zero")
        _check_number(learning_rate_power, "learning_rate_power", lambda v: v <= 0.0,
                      "a non-positive number")
        _check_number(l1_regularization_strength, "l1_regularization_strength",
                      lambda v: v >= 0.0, "positive or zero")
        _check_number(l2_regularization_strength, "l2_regularization_strength",
                      lambda v: v >= 0.0, "positive or zero")
        _check_number(l2_shrinkage_regularization_strength,
                      "l2_shrinkage_regularization_strength", lambda v: v >= 0.0,
                      "positive or zero")
        self._set_hyper("learning_rate", learning_rate)
        self._set_hyper("learning_rate_power", learning_rate_power)
        self._set_hyper("l1", l1_regularization_strength)
        beta = 0.0 if beta is None else beta
        if isinstance(beta, (int, float)) and beta == 0.0:
            self._set_hyper("l2", l2_regularization_strength)
        else:
            self._set_hyper("l2", lambda: l2_regularization_strength + beta / (
                2.0 * learning_rate))
        self._set_hyper("l2_shrinkage", l2_shrinkage_regularization_strength)
        self._shrinkage = not (isinstance(l2_shrinkage_regularization_strength, (int, float))
                               and l2_shrinkage_regularization_strength <= 0.0)
        self._sqrt_power = isinstance(learning_rate_power, (int, float)) and \
            learning_rate_power == -0.5
        self._initial_accumulator_value = float(initial_accumulator_value)
        self._accum_name, self._linear_name = accum_name, linear_name

    def _create_slots(self, var_list):
        for v in var_list:
            self._get_or_make_slot_with_initializer(
                v, constant_initializer(self._initial_accumulator_value), "accum",
                self._accum_name or self._name)
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _power(self, x: Tensor, dtype) -> Tensor:
        """``x ** -learning_rate_power`` (a square root for -0.5, as TF's kernels take)."""
        if self._sqrt_power:
            return sqrt(x)
        return _pow(x, -self._get_hyper("learning_rate_power", dtype))

    def _update(self, grad: Tensor, var: Tensor, accum: Tensor, linear: Tensor, dtype):
        lr = self._get_hyper("learning_rate", dtype)
        l1, l2 = self._get_hyper("l1", dtype), self._get_hyper("l2", dtype)
        shrunk = grad
        if self._shrinkage:
            shrunk = grad + 2.0 * self._get_hyper("l2_shrinkage", dtype) * var
        new_accum = accum + grad * grad
        new_power = self._power(new_accum, dtype)
        linear_t = linear + shrunk - (new_power - self._power(accum, dtype)) / lr * var
        x = minimum(maximum(linear_t, -l1), l1) - linear_t
        y = new_power / lr + 2.0 * l2
        var_t = where(_abs(linear_t) > l1, x / y, zeros_like(linear_t))
        return var_t, new_accum, linear_t

    def _apply_dense(self, grad: Tensor, var: Variable):
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        var_t, accum_t, linear_t = self._update(grad, var.value(), accum.value(),
                                                linear.value(), var.dtype)
        return group(accum.assign(accum_t, read_value=False),
                     linear.assign(linear_t, read_value=False),
                     var.assign(var_t, read_value=False))

    def _apply_sparse(self, grad: _DedupedSlices, var: Variable):
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        ids = grad.indices
        var_rows, accum_rows, linear_rows = self._update(
            grad.values, var.sparse_read(ids), accum.sparse_read(ids), linear.sparse_read(ids),
            var.dtype)
        return group(self._write_rows(accum, grad, accum_rows),
                     self._write_rows(linear, grad, linear_rows),
                     self._write_rows(var, grad, var_rows))
