"""Learning-rate schedules of the global step, as TensorFlow 1.x's ``tf.train.*_decay`` and
``tf.train.piecewise_constant``: ordinary ops of the step (a variable), so the rate an
optimizer reads changes as training goes. ``piecewise_constant`` selects with ``where`` (no
``cond``)."""
from __future__ import annotations

import math
from typing import Optional, Sequence

from dsl.context import name_scope
from dsl.math_ops import (cast, ceil, equal, exp, floor, less_equal, minimum, multiply,
                          pow as _pow, where)
from dsl.ops import convert_to_tensor
from dsl.tensor import Tensor

__all__ = ["exponential_decay", "piecewise_constant", "polynomial_decay",
           "natural_exp_decay", "inverse_time_decay", "cosine_decay"]


def _step(global_step, what: str) -> Tensor:
    if global_step is None:
        raise ValueError(f"global_step is required for {what}.")
    return convert_to_tensor(global_step)


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate,
                      staircase: bool = False, name: Optional[str] = None) -> Tensor:
    """``learning_rate * decay_rate ^ (global_step / decay_steps)`` (the exponent floored when
    ``staircase``)."""
    step = _step(global_step, "exponential_decay")
    with name_scope(name or "ExponentialDecay") as scope:
        lr = convert_to_tensor(learning_rate)
        dtype = lr.dtype
        p = cast(step, dtype) / cast(convert_to_tensor(decay_steps), dtype)
        if staircase:
            p = floor(p)
        return multiply(lr, _pow(cast(convert_to_tensor(decay_rate), dtype), p),
                        name=scope)


def piecewise_constant(x, boundaries: Sequence, values: Sequence,
                       name: Optional[str] = None) -> Tensor:
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while ``boundaries[i-1] < x
    <= boundaries[i]``, ``values[-1]`` after the last boundary."""
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of "
                         f"values. Received: boundaries={boundaries} of length "
                         f"{len(boundaries)}, and values={values} of length {len(values)}.")
    with name_scope(name or "PiecewiseConstant"):
        x = convert_to_tensor(x)
        vals = [convert_to_tensor(v) for v in values]
        if any(v.dtype is not vals[0].dtype for v in vals):
            raise ValueError(f"Values must have elements all with the same dtype "
                             f"({[v.dtype.ir_name for v in vals]}).")
        bounds = []
        for b in boundaries:
            b = convert_to_tensor(b)
            bounds.append(b if b.dtype is x.dtype else cast(b, x.dtype))
        result = vals[-1]
        for b, v in zip(reversed(bounds), reversed(vals[:-1])):
            result = where(less_equal(x, b), v, result)
        return result


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001,
                     power=1.0, cycle: bool = False, name: Optional[str] = None) -> Tensor:
    """``(lr - end) * (1 - step / decay_steps) ^ power + end``, the step held at
    ``decay_steps`` (or, with ``cycle``, ``decay_steps`` stretched to the next multiple)."""
    step = _step(global_step, "polynomial_decay")
    with name_scope(name or "PolynomialDecay"):
        lr = convert_to_tensor(learning_rate)
        dtype = lr.dtype
        end = cast(convert_to_tensor(end_learning_rate), dtype)
        power_t = cast(convert_to_tensor(power), dtype)
        step_f = cast(step, dtype)
        steps_f = cast(convert_to_tensor(decay_steps), dtype)
        if cycle:
            one = convert_to_tensor(1.0, dtype=dtype)
            multiplier = where(equal(step_f, convert_to_tensor(0, dtype=dtype)), one,
                               ceil(step_f / steps_f))
            steps_f = steps_f * multiplier
        else:
            step_f = minimum(step_f, steps_f)
        frac = step_f / steps_f
        return (lr - end) * _pow(1 - frac, power_t) + end


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate,
                      staircase: bool = False, name: Optional[str] = None) -> Tensor:
    """``learning_rate * exp(-decay_rate * global_step / decay_steps)``."""
    step = _step(global_step, "natural_exp_decay")
    with name_scope(name or "NaturalExpDecay"):
        lr = convert_to_tensor(learning_rate)
        dtype = lr.dtype
        p = cast(step, dtype) / cast(convert_to_tensor(decay_steps), dtype)
        if staircase:
            p = floor(p)
        return lr * exp(-cast(convert_to_tensor(decay_rate), dtype) * p)


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate,
                       staircase: bool = False, name: Optional[str] = None) -> Tensor:
    """``learning_rate / (1 + decay_rate * global_step / decay_steps)``."""
    step = _step(global_step, "inverse_time_decay")
    with name_scope(name or "InverseTimeDecay"):
        lr = convert_to_tensor(learning_rate)
        dtype = lr.dtype
        p = cast(step, dtype) / cast(convert_to_tensor(decay_steps), dtype)
        if staircase:
            p = floor(p)
        return lr / (1 + cast(convert_to_tensor(decay_rate), dtype) * p)


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0,
                 name: Optional[str] = None) -> Tensor:
    """``learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) /
    decay_steps)) + alpha)``."""
    from dsl.math_special import cos
    step = _step(global_step, "cosine_decay")
    with name_scope(name or "CosineDecay"):
        lr = convert_to_tensor(learning_rate)
        dtype = lr.dtype
        steps_f = cast(convert_to_tensor(decay_steps), dtype)
        frac = minimum(cast(step, dtype), steps_f) / steps_f
        cosine = 0.5 * (1 + cos(math.pi * frac))
        return lr * ((1 - alpha) * cosine + alpha)
