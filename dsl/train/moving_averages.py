"""``fl.train.ExponentialMovingAverage`` and ``fl.train.assign_moving_average``, as TensorFlow
1.x's ``training/moving_averages.py``.

An average is a non-trainable variable ``<var op name>/<ema name>`` (a slot of the averaged
variable, colocated with it) updated by ``avg -= (avg - value) * (1 - decay)``. With
``num_updates`` the decay is ``min(decay, (1 + num_updates) / (10 + num_updates))``. With zero
debiasing (tensors averaged with ``zero_debias=True``, and ``assign_moving_average``'s default),
``<avg>/biased`` and ``<avg>/local_step`` hold the biased average and the step count, and the
average is ``biased / (1 - decay ** local_step)`` (Adam's correction).
"""
from __future__ import annotations

from typing import Dict, Optional

from dsl.context import control_dependencies, name_scope
from dsl.control_ops import group
from dsl.init_ops import zeros_initializer
from dsl.math_ops import cast, minimum, pow as pow_
from dsl.ops import convert_to_tensor
from dsl.tensor import Operation, Tensor, static_shape
from dsl.train.optimizer import _colocated, _create_slot, _init_scope
from dsl.variable_scope import get_variable_scope
from dsl.variables import (GraphKeys, Variable, get_collection, global_variables,
                           trainable_variables)
from runtime.dtypes import DType

__all__ = ["ExponentialMovingAverage", "assign_moving_average"]

_FLOATS = (DType.f16, DType.f32, DType.f64)


def _op_name(value) -> str:
    return value.op.name


def _zero_debias(average: Variable, value: Tensor, one_minus_decay: Tensor) -> Tensor:
    """``average = biased / (1 - decay ** local_step)`` after updating ``biased`` and
    ``local_step`` (TF1's ``_zero_debias``): named, as TensorFlow names them, in the current
    variable scope (``BatchNorm/BatchNorm/moving_mean/biased`` under ``BatchNorm``)."""
    outer = get_variable_scope().name
    base = f"{outer}/{_op_name(average)}" if outer else _op_name(average)
    biased = _create_slot(average, zeros_initializer(), f"{base}/biased")
    with _init_scope(), _colocated(average, ignore_existing=True):
        local_step = Variable(convert_to_tensor(0.0, dtype=average.dtype), trainable=False,
                              name=f"{base}/local_step")
    update_biased = biased.assign_sub((biased.value() - value) * one_minus_decay)
    update_local_step = local_step.assign_add(convert_to_tensor(1.0, dtype=average.dtype))
    bias_factor = 1.0 - pow_(1.0 - one_minus_decay, update_local_step)
    return update_biased / bias_factor


def assign_moving_average(variable: Variable, value, decay, zero_debias: bool = True,
                          name: Optional[str] = None):
    """``variable -= (variable - value) * (1 - decay)`` (``tf.train.assign_moving_average``);
    returns the updated value. ``zero_debias`` corrects a zero-initialised ``variable``'s bias
    toward zero (then ``variable`` holds the debiased average)."""
    if not isinstance(variable, Variable):
        raise TypeError(f"assign_moving_average updates an fl.Variable, got "
                        f"{type(variable).__name__}")
    with name_scope(name or "AssignMovingAvg") as scope:
        with _colocated(variable):
            one_minus_decay = 1.0 - convert_to_tensor(decay, dtype=DType.f32)
            if variable.dtype is not DType.f32:
                one_minus_decay = cast(one_minus_decay, variable.dtype)
            value = convert_to_tensor(value, dtype=variable.dtype)
            if zero_debias:
                return variable.assign(_zero_debias(variable, value, one_minus_decay),
                                       name=scope)
            return variable.assign_sub((variable.value() - value) * one_minus_decay,
                                       name=scope)


class ExponentialMovingAverage:
    """Maintains moving averages of variables (or tensors) by exponential decay
    (``tf.train.ExponentialMovingAverage``).

    ``apply(var_list)`` creates the averages and returns the op that updates them; run it
    after each training step (typically under ``control_dependencies([train_op])``).
    ``average(var)`` is the average variable; ``variables_to_restore()`` maps checkpoint names
    to variables so that a ``Saver`` loads the averages into the model's variables.
    """

    def __init__(self, decay, num_updates=None, zero_debias: bool = False,
                 name: str = "ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = bool(zero_debias)
        self._name = name
        self._averages: Dict[object, Variable] = {}

    @property
    def name(self) -> str:
        return self._name

    @staticmethod
    def _key(value):
        if isinstance(value, Variable):
            return ("var", value.op.node)
        if isinstance(value, Tensor):
            return ("tensor", value.op.node, value.value_index)
        raise TypeError(f"ExponentialMovingAverage averages fl.Variable or fl.Tensor objects, "
                        f"got {type(value).__name__}")

    def apply(self, var_list=None) -> Operation:
        """Create (once per variable) the shadow averages of ``var_list`` (default: the
        trainable variables) and return an op updating all of them."""
        if var_list is None:
            var_list = trainable_variables()
        var_list = list(var_list)
        debiased = set()
        for var in var_list:
            if var.dtype not in _FLOATS:
                raise TypeError(f"The variables must be half, float, or double: {var.name}")
            key = self._key(var)
            if key in self._averages:
                continue
            if isinstance(var, Variable):
                # starts at the variable's own initial value (run in the same initializer
                # step, a random initial value is drawn once for both)
                avg = _create_slot(var, var.initial_value, f"{_op_name(var)}/{self._name}")
                if var not in get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES):
                    var.graph.add_to_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, var)
            else:
                shape = static_shape(var)
                if shape is None or any(d is None for d in shape):
                    raise ValueError(f"ExponentialMovingAverage of the tensor {var.name} needs "
                                     f"a fully defined shape, got {shape}")
                with _init_scope(), _colocated(var, ignore_existing=True):
                    avg = Variable(zeros_initializer(), trainable=False, dtype=var.dtype,
                                   shape=list(shape), name=f"{_op_name(var)}/{self._name}")
                if self._zero_debias:
                    debiased.add(key)
            self._averages[key] = avg
        with name_scope(self._name) as scope:
            decay = convert_to_tensor(self._decay, dtype=DType.f32, name="decay")
            if self._num_updates is not None:
                num_updates = cast(convert_to_tensor(self._num_updates), DType.f32,
                                   name="num_updates")
                decay = minimum(decay, (1.0 + num_updates) / (10.0 + num_updates))
            updates = [assign_moving_average(self._averages[self._key(v)], v, decay,
                                             zero_debias=self._key(v) in debiased)
                       for v in var_list]
            return group(*updates, name=scope)

    def average(self, var) -> Optional[Variable]:
        """The average variable of ``var``, or None if ``apply`` was not called for it."""
        return self._averages.get(self._key(var))

    def average_name(self, var) -> str:
        """The name under which ``var``'s average is saved: ``<var op name>/<ema name>``
        (usable before ``apply``, e.g. to restore averages into a new graph)."""
        avg = self._averages.get(self._key(var))
        if avg is not None:
            return _op_name(avg)
        return f"{_op_name(var)}/{self._name}"

    def variables_to_restore(self, moving_avg_variables=None) -> Dict[str, Variable]:
        """``{checkpoint name: variable}`` restoring each averaged variable from its average
        and every other global variable from itself (for ``fl.train.Saver(var_list=...)``)."""
        if moving_avg_variables is None:
            moving_avg_variables = (trainable_variables() +
                                    get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES))
        name_map: Dict[str, Variable] = {}
        averaged = []
        for v in moving_avg_variables:
            if v not in averaged:
                averaged.append(v)
        for v in averaged:
            name_map[self.average_name(v)] = v
        averaged_names = {v.name for v in averaged}
        for v in global_variables():
            if v.name not in averaged_names and _op_name(v) not in name_map:
                name_map[_op_name(v)] = v
        return name_map
