"""``fl.train.AdamOptimizer`` (TF1 ``tf.train.AdamOptimizer``; Kingma and Ba, section 2).

Slots ``"m"`` and ``"v"`` (the variables ``<var>/Adam`` and ``<var>/Adam_1``, zeros) and two
non-slot variables per graph, ``beta1_power`` and ``beta2_power`` (initialised to ``beta1``
and ``beta2``, on the device of the first variable by name, multiplied by ``beta1`` and
``beta2`` after every step's updates, in ``_finish``). Defaults: ``learning_rate=0.001,
beta1=0.9, beta2=0.999, epsilon=1e-08``.

Each step ``t`` (1, 2, ...) first computes, in the variable's dtype,
``lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)`` (= lr * sqrt(1 - beta2^t) /
(1 - beta1^t)), then:

Dense, as TF1's ``ApplyAdam`` kernel::

    m   += (grad - m) * (1 - beta1)                # = beta1 * m + (1 - beta1) * grad
    v   += (grad * grad - v) * (1 - beta2)         # = beta2 * v + (1 - beta2) * grad^2
    var -= (m * lr_t) / (sqrt(v) + epsilon)

Sparse, exactly as TF1's ``AdamOptimizer._apply_sparse_shared`` (there is no sparse Adam
kernel in TF1), after TF1's deduplication of repeated indices::

    m = m * beta1;  m[indices] += g * (1 - beta1)          (ResourceScatterAdd)
    v = v * beta2;  v[indices] += (g * g) * (1 - beta2)
    var -= lr_t * m / (sqrt(v) + epsilon)

so, as in TF1, the moments decay and the variable moves in EVERY row, not only in the rows of
``indices`` (TF1's "lazy" Adam, which would not, lives in contrib and is not built here).

The beta powers get the widest floating dtype of the variables of the first
``apply_gradients`` (float64 if any variable is float64; TF1 always makes them float32) and
are cast to each variable's dtype when they differ.
"""
from __future__ import annotations

from dsl.context import control_dependencies
from dsl.control_ops import group
from dsl.indexed_slices import IndexedSlices
from dsl.math_ops import cast, sqrt
from dsl.ops import constant, convert_to_tensor
from dsl.tensor import Tensor
from dsl.train.optimizer import Optimizer, _DedupedSlices, _colocated
from dsl.variables import Variable
from runtime.dtypes import DType

__all__ = ["AdamOptimizer"]

_FLOAT_ORDER = (DType.f16, DType.bf16, DType.f32, DType.f64)


class AdamOptimizer(Optimizer):
    """Adam: bias-corrected first and second moment estimates."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08,
                 use_locking: bool = False, name: str = "Adam"):
        super().__init__(use_locking, name)
        self._set_hyper("learning_rate", learning_rate)
        self._set_hyper("beta1", beta1)
        self._set_hyper("beta2", beta2)
        self._set_hyper("epsilon", epsilon)

    # --- state -----------------------------------------------------------------------------
    def _get_beta_accumulators(self):
        """``(beta1_power, beta2_power)`` of the default graph."""
        return (self._get_non_slot_variable("beta1_power"),
                self._get_non_slot_variable("beta2_power"))

    def _create_slots(self, var_list):
        first_var = min(var_list, key=lambda v: v.name)
        dtype = max((v.dtype for v in var_list),
                    key=lambda d: _FLOAT_ORDER.index(d) if d in _FLOAT_ORDER else -1)
        for name in ("beta1", "beta2"):
            self._create_non_slot_variable(self._initial_power(name, dtype), f"{name}_power",
                                           first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _initial_power(self, name: str, dtype: DType):
        value = self._hyper[name]
        if callable(value) and not isinstance(value, (Tensor, Variable)):
            value = value()
        if isinstance(value, (Tensor, Variable)):
            return lambda: cast(convert_to_tensor(value), dtype)
        return lambda: constant(value, dtype=dtype)

    def _prepare(self, dtype: DType):
        beta1_power, beta2_power = self._get_beta_accumulators()
        b1p = cast(beta1_power.value(), dtype)
        b2p = cast(beta2_power.value(), dtype)
        one = constant(1, dtype=dtype, name="one")
        lr = self._get_hyper("learning_rate", dtype)
        self._hyper_cache[("lr_t", dtype)] = lr * sqrt(one - b2p) / (one - b1p)
        self._get_one_minus("beta1", dtype)
        self._get_one_minus("beta2", dtype)

    # --- updates ---------------------------------------------------------------------------
    def _apply_dense(self, grad: Tensor, var: Variable):
        dt = var.dtype
        lr_t, eps = self._hyper_cache[("lr_t", dt)], self._get_hyper("epsilon", dt)
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_old, v_old = m.value(), v.value()
        m_t = m_old + (grad - m_old) * self._get_one_minus("beta1", dt)
        v_t = v_old + (grad * grad - v_old) * self._get_one_minus("beta2", dt)
        m_update = m.assign(m_t, read_value=False)
        v_update = v.assign(v_t, read_value=False)
        var_update = var.assign_sub((m_t * lr_t) / (sqrt(v_t) + eps), read_value=False)
        return group(m_update, v_update, var_update)

    def _apply_sparse(self, grad: _DedupedSlices, var: Variable):
        dt = var.dtype
        lr_t, eps = self._hyper_cache[("lr_t", dt)], self._get_hyper("epsilon", dt)
        beta1, beta2 = self._get_hyper("beta1", dt), self._get_hyper("beta2", dt)
        g = grad.unique_values                     # zero at repeated occurrences
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_decay = m.assign(m.value() * beta1, read_value=False)
        with control_dependencies([m_decay]):
            m_add = m.scatter_add(IndexedSlices(g * self._get_one_minus("beta1", dt),
                                                grad.indices))
        with control_dependencies([m_add]):
            m_t = m.read_value()
        v_decay = v.assign(v.value() * beta2, read_value=False)
        with control_dependencies([v_decay]):
            v_add = v.scatter_add(IndexedSlices((g * g) * self._get_one_minus("beta2", dt),
                                                grad.indices))
        with control_dependencies([v_add]):
            v_t = v.read_value()
        var_update = var.assign_sub(lr_t * m_t / (sqrt(v_t) + eps), read_value=False)
        return group(var_update, m_add, v_add)

    def _finish(self, update_ops, name_scope_):
        with control_dependencies(update_ops):
            beta1_power, beta2_power = self._get_beta_accumulators()
            with _colocated(beta1_power):
                update_beta1 = beta1_power.assign(
                    beta1_power.value() * self._get_hyper("beta1", beta1_power.dtype),
                    read_value=False)
                update_beta2 = beta2_power.assign(
                    beta2_power.value() * self._get_hyper("beta2", beta2_power.dtype),
                    read_value=False)
        return group(*update_ops, update_beta1, update_beta2, name=name_scope_)
