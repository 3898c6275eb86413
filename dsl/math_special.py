"""TensorFlow-named elementwise math beyond ``dsl.math_ops``: the trigonometric and
hyperbolic functions and their inverses (``fl.sin``, ``fl.atanh``, ``fl.atan2``), the error
functions (``fl.erf``, ``fl.erfc``), ``fl.expm1`` and float classification (``fl.is_nan``,
``fl.is_inf``, ``fl.is_finite``), and the running sum and product (``fl.cumsum``,
``fl.cumprod``), as in ``tf.math``."""
from __future__ import annotations

from typing import Optional

from dsl.math_ops import _binary, _unary
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor

__all__ = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
           "atanh", "atan2", "erf", "erfc", "expm1", "is_nan", "is_inf", "is_finite",
           "cumsum", "cumprod"]


def _unary_fn(op: str, doc: str):
    def fn(x, name: Optional[str] = None) -> Tensor:
        return _unary(op, x, name)
    fn.__doc__ = doc
    return fn


sin = _unary_fn("Sin", "sin(x) (Sin).")
cos = _unary_fn("Cos", "cos(x) (Cos).")
tan = _unary_fn("Tan", "tan(x) (Tan).")
asin = _unary_fn("Asin", "arcsin(x) in [-pi/2, pi/2]; NaN outside [-1, 1] (Asin).")
acos = _unary_fn("Acos", "arccos(x) in [0, pi]; NaN outside [-1, 1] (Acos).")
atan = _unary_fn("Atan", "arctan(x) in (-pi/2, pi/2) (Atan).")
sinh = _unary_fn("Sinh", "sinh(x) (Sinh).")
cosh = _unary_fn("Cosh", "cosh(x) (Cosh).")
asinh = _unary_fn("Asinh", "arsinh(x) (Asinh).")
acosh = _unary_fn("Acosh", "arcosh(x); NaN below 1 (Acosh).")
atanh = _unary_fn("Atanh", "artanh(x); +-inf at +-1, NaN outside [-1, 1] (Atanh).")
erf = _unary_fn("Erf", "The Gauss error function (Erf).")
erfc = _unary_fn("Erfc", "1 - erf(x), without the cancellation for large x (Erfc).")
expm1 = _unary_fn("Expm1", "exp(x) - 1, accurate near 0 (Expm1).")
is_nan = _unary_fn("IsNan", "Whether each element is NaN (bool; IsNan).")
is_inf = _unary_fn("IsInf", "Whether each element is +inf or -inf (bool; IsInf).")
is_finite = _unary_fn("IsFinite", "Whether each element is neither inf nor NaN (bool).")


def atan2(y, x, name: Optional[str] = None) -> Tensor:
    """The angle of the point (x, y) in [-pi, pi], elementwise with broadcasting (Atan2);
    note the argument order, y first, as in ``tf.atan2``."""
    return _binary("Atan2", y, x, name)


def _scan(op: str, x, axis, exclusive: bool, reverse: bool, name: Optional[str]) -> Tensor:
    x = convert_to_tensor(x)
    axis = convert_to_tensor(axis)
    return apply_op(op, [x, axis], {"exclusive": bool(exclusive), "reverse": bool(reverse)},
                    name=name)


def cumsum(x, axis=0, exclusive: bool = False, reverse: bool = False,
           name: Optional[str] = None) -> Tensor:
    """The running sum of ``x`` along ``axis`` (Cumsum): ``exclusive`` leaves each element out
    of its own sum (the first is 0), ``reverse`` sums from the end. Integers wrap."""
    return _scan("Cumsum", x, axis, exclusive, reverse, name)


def cumprod(x, axis=0, exclusive: bool = False, reverse: bool = False,
            name: Optional[str] = None) -> Tensor:
    """The running product of ``x`` along ``axis`` (Cumprod); ``exclusive`` starts at 1."""
    return _scan("Cumprod", x, axis, exclusive, reverse, name)
