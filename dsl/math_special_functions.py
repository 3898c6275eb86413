"""TensorFlow 1.x's special functions (``tf.lgamma``, ``tf.digamma``, ``tf.polygamma``,
``tf.zeta``, ``tf.igamma``, ``tf.igammac``, ``tf.betainc``, ``tf.math.erfinv``,
``tf.math.ndtri``, ``tf.math.bessel_i0e``, ``tf.math.bessel_i1e``), each one raw op of
``compiler/ops/math_special_functions.py``, and those TensorFlow builds over them
(``tf.lbeta``, ``tf.math.bessel_i0``, ``tf.math.bessel_i1``)."""
from __future__ import annotations

from typing import Optional

from dsl.context import name_scope
from dsl.math_ops import _binary, _unary
from dsl.ops import apply_op, convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor

__all__ = ["lgamma", "digamma", "polygamma", "zeta", "igamma", "igammac", "betainc",
           "erfinv", "ndtri", "bessel_i0e", "bessel_i1e", "bessel_i0", "bessel_i1", "lbeta"]


def lgamma(x, name: Optional[str] = None) -> Tensor:
    """log|Gamma(x)| elementwise (Lgamma); +inf at 0 and the negative integers."""
    return _unary("Lgamma", x, name)


def digamma(x, name: Optional[str] = None) -> Tensor:
    """psi(x), the derivative of lgamma (Digamma); NaN at 0 and the negative integers."""
    return _unary("Digamma", x, name)


def erfinv(x, name: Optional[str] = None) -> Tensor:
    """The inverse of erf on [-1, 1] (Erfinv); +-inf at +-1, NaN outside."""
    return _unary("Erfinv", x, name)


def ndtri(x, name: Optional[str] = None) -> Tensor:
    """The standard normal quantile (Ndtri): the x with Phi(x) = p; NaN outside [0, 1]."""
    return _unary("Ndtri", x, name)


def bessel_i0e(x, name: Optional[str] = None) -> Tensor:
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function (BesselI0e)."""
    return _unary("BesselI0e", x, name)


def bessel_i1e(x, name: Optional[str] = None) -> Tensor:
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function (BesselI1e)."""
    return _unary("BesselI1e", x, name)


def polygamma(a, x, name: Optional[str] = None) -> Tensor:
    """The a-th derivative of digamma at x (Polygamma, broadcasting); a must be a whole
    number >= 0 (NaN otherwise)."""
    return _binary("Polygamma", a, x, name)


def zeta(x, q, name: Optional[str] = None) -> Tensor:
    """The Hurwitz zeta function sum_k (k + q)^-x (Zeta, broadcasting)."""
    return _binary("Zeta", x, q, name)


def igamma(a, x, name: Optional[str] = None) -> Tensor:
    """The regularized lower incomplete gamma P(a, x) (Igamma, broadcasting)."""
    return _binary("Igamma", a, x, name)


def igammac(a, x, name: Optional[str] = None) -> Tensor:
    """The regularized upper incomplete gamma Q(a, x) = 1 - P(a, x) (Igammac)."""
    return _binary("Igammac", a, x, name)


def betainc(a, b, x, name: Optional[str] = None) -> Tensor:
    """The regularized incomplete beta I_x(a, b) (Betainc); a, b and x have one shape or are
    scalars, of one float dtype."""
    first = next((t for t in (a, b, x) if isinstance(t, Tensor)), None)
    dtype = first.dtype if first is not None else None
    a, b, x = (convert_to_tensor(t, dtype=dtype) for t in (a, b, x))
    if dtype is None:
        dtype = a.dtype
        b, x = convert_to_tensor(b, dtype=dtype), convert_to_tensor(x, dtype=dtype)
    return apply_op("Betainc", [a, b, x], name=name)


def bessel_i0(x, name: Optional[str] = None) -> Tensor:
    """I0(x), the modified Bessel function of order 0: exp(|x|) * bessel_i0e(x), as TF
    builds it (overflows to inf for |x| above ~713)."""
    with name_scope(name or "bessel_i0"):
        x = convert_to_tensor(x)
        return _unary("Exp", _unary("Abs", x, None), None) * bessel_i0e(x)


def bessel_i1(x, name: Optional[str] = None) -> Tensor:
    """I1(x), the modified Bessel function of order 1: exp(|x|) * bessel_i1e(x), as TF."""
    with name_scope(name or "bessel_i1"):
        x = convert_to_tensor(x)
        return _unary("Exp", _unary("Abs", x, None), None) * bessel_i1e(x)


def lbeta(x, name: Optional[str] = None) -> Tensor:
    """log|B(x)| over the last dimension: sum(lgamma(x), -1) - lgamma(sum(x, -1)), as
    ``tf.lbeta`` (an empty last dimension gives -inf, as there)."""
    with name_scope(name or "lbeta"):
        x = convert_to_tensor(x)
        log_prod_gamma_x = reduce_sum(lgamma(x), axis=[-1])
        log_gamma_sum_x = lgamma(reduce_sum(x, axis=[-1]))
        return log_prod_gamma_x - log_gamma_sum_x
