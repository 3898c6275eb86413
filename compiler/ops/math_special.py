"""Elementwise transcendental functions and float classification: the trigonometric and
hyperbolic functions and their inverses, Atan2, Erf, Erfc, Expm1, IsNan, IsInf, IsFinite.

Registered with ``compiler/ops/math.py``'s helpers, so they are elementwise ops like Tanh and
Exp (the fuse pass merges the float ones into ``Fused`` chains); their C scalar expressions
are ``compiler/codegen/c_ops/math_special.py``'s.

Semantics are TensorFlow's, which are libm's: every result is defined (no data errors).
Outside a function's domain the result is NaN (``Asin(2)``, ``Acosh(0.5)``, ``Sin(inf)``),
at its poles +-inf (``Atanh(1)``); NaN propagates. ``Atan2(y, x)`` is the angle of the point
``(x, y)`` in ``[-pi, pi]`` with libm's signed-zero and infinity cases. IsNan/IsInf/IsFinite
give bool.
"""
from __future__ import annotations

import math

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ops.math import _broadcast_shape, _reference, unary


def _via_f64(fn) -> np.ufunc:
    """A scalar float function (``math.erf``) as a numpy kernel: evaluated in double and
    rounded once to the input's precision (numpy has no erf)."""
    vectorized = np.frompyfunc(fn, 1, 1)

    def kernel(x: np.ndarray) -> np.ndarray:
        return np.asarray(vectorized(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)
    return kernel


for _name, _np_fn in (("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan),
                      ("Asin", np.arcsin), ("Acos", np.arccos), ("Atan", np.arctan),
                      ("Sinh", np.sinh), ("Cosh", np.cosh), ("Asinh", np.arcsinh),
                      ("Acosh", np.arccosh), ("Atanh", np.arctanh)):
    unary(_name, _np_fn, types="float")

unary("Erf", _via_f64(math.erf), types="float", doc="The error function 2/sqrt(pi) * "
      "integral(0, x, exp(-t^2) dt).")
unary("Erfc", _via_f64(math.erfc), types="float", doc="1 - erf(x), accurate for large x.")
unary("Expm1", np.expm1, types="float", doc="exp(x) - 1, accurate near 0.")
unary("IsNan", np.isnan, types="float", out="bool")
unary("IsInf", np.isinf, types="float", out="bool", doc="x is +inf or -inf.")
unary("IsFinite", np.isfinite, types="float", out="bool", doc="x is neither inf nor NaN.")

register_op("Atan2", inputs=["y: T", "x: T"], outputs=["z: T"], attrs=["T: {float}"],
            shape=_broadcast_shape, kernel=_reference(np.arctan2), group="elementwise",
            data_error=None,
            doc="The angle of the point (x, y) from the x axis, in [-pi, pi] (broadcasting).")
