"""TensorFlow's special functions: Lgamma, Digamma, Polygamma, Zeta, Igamma, Igammac, Betainc,
Erfinv, Ndtri, BesselI0e and BesselI1e, as elementwise ops.

Each reference kernel evaluates, per element in double, the same algorithm as the C helpers of
``codegen_templates/c/special_functions.c.j2`` (``compiler/codegen/c_ops/
math_special_functions.py``) and rounds once to the input's precision; numpy only.

Semantics are TensorFlow's (Cephes'), and every result is defined: outside a function's domain
the result is NaN, at its poles +inf (Lgamma at 0, -1, ..; Zeta(1, q)), NaN propagates.
- Digamma is NaN at 0 and the negative integers; Polygamma(n, x) needs a whole n >= 0.
- Zeta(x, q) is the Hurwitz zeta: NaN for x < 1, +inf for x == 1; for q <= 0 it is NaN unless
  x is whole, then +inf where q is whole too (far below 0 it is summed in closed form, so no
  input makes a loop of -q terms).
- Igamma/Igammac(a, x) are the regularized lower/upper incomplete gamma: NaN for a <= 0 or
  x < 0; Igamma(a, 0) = 0, Igamma(a, inf) = 1.
- Betainc(a, b, x) is the regularized incomplete beta: NaN for a <= 0, b <= 0 or x outside
  [0, 1]. Its inputs are each of the output's shape or scalars (TensorFlow broadcasts no
  further).
- Erfinv is NaN outside [-1, 1] and +-inf at +-1; Ndtri (the standard normal quantile) is NaN
  outside [0, 1] and +-inf at 1 and 0.
- BesselI0e/BesselI1e are exp(-|x|) I0(x) and exp(-|x|) I1(x).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import broadcast_shapes
from compiler.ops.math import _broadcast_shape, _reference, _same_shape

INF = math.inf
NAN = math.nan
MACHEP = 1.11022302462515654042e-16
MAXLOG = 7.09782712893383996843e2
_BIG = 4.503599627370496e15
_SQRT2 = math.sqrt(2.0)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# The Euler-Maclaurin tail of the Hurwitz zeta: (2k)! / B_2k for k = 1..12.
ZETA_EM = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)


def lgamma(x: float) -> float:
    """log|Gamma(x)|; +inf at the poles and at +-inf."""
    if math.isinf(x):
        return INF
    try:
        return math.lgamma(x)
    except ValueError:
        return INF


def digamma(x: float) -> float:
    """psi(x) = d/dx log Gamma(x): reflection below 0, recurrence up to 10, then the
    asymptotic series in 1/x^2."""
    if math.isnan(x) or x == -INF:
        return NAN
    if x == INF:
        return INF
    result = 0.0
    if x <= 0.0:
        if x == math.floor(x):
            return NAN
        r = x - round(x)              # exact; tan(pi x) = tan(pi r)
        result = -math.pi / math.tan(math.pi * r)
        x = 1.0 - x
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    z = 1.0 / (x * x)
    tail = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (
        1.0 / 132 - z * (691.0 / 32760 - z / 12.0))))))
    return result + math.log(x) - 0.5 / x - tail


def zeta(x: float, q: float) -> float:
    """The Hurwitz zeta sum_k (k + q)^-x: nine terms and on to q + k > 9, then the
    Euler-Maclaurin remainder."""
    if math.isnan(x) or math.isnan(q):
        return NAN
    if x == 1.0:
        return INF
    if x < 1.0:
        return NAN
    if q <= 0.0:
        if x != math.floor(x):
            return NAN
        if q == math.floor(q):
            return INF
    if q == INF:
        return 0.0
    if q < -64.0:
        # x whole, q not: the terms of negative base, |q + k| = 1 - r, 2 - r, .., -q with
        # r = q - floor(q), summed as a difference of two zetas (no loop of -q terms)
        r = q - math.floor(q)
        sign = 1.0 if math.fmod(x, 2.0) == 0.0 else -1.0
        return sign * (zeta(x, 1.0 - r) - zeta(x, 1.0 - q)) + zeta(x, r)
    s = math.pow(q, -x)
    a = q
    b = 0.0
    i = 0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = math.pow(a, -x)
        s += b
        if abs(b / s) < MACHEP:
            return s
    w = a
    s += b * w / (x - 1.0)
    s -= 0.5 * b
    fact = 1.0
    k = 0.0
    for coef in ZETA_EM:
        fact *= x + k
        b /= w
        t = fact * b / coef
        s += t
        if abs(t / s) < MACHEP:
            return s
        k += 1.0
        fact *= x + k
        b /= w
        k += 1.0
    return s


def polygamma(n: float, x: float) -> float:
    """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x); digamma for n = 0."""
    if math.isnan(n) or math.isnan(x) or n != math.floor(n) or n < 0.0:
        return NAN
    if n == 0.0:
        return digamma(x)
    sign = 1.0 if math.fmod(n, 2.0) == 1.0 else -1.0
    return sign * math.exp(lgamma(n + 1.0)) * zeta(n + 1.0, x)


def _igam_series(a: float, x: float) -> float:
    ax = a * math.log(x) - x - lgamma(a)
    if ax < -MAXLOG:
        return 0.0
    ax = math.exp(ax)
    r, c, ans = a, 1.0, 1.0
    for _ in range(2000):
        r += 1.0
        c *= x / r
        ans += c
        if c <= ans * MACHEP:
            break
    return ans * ax / a


def _igamc_fraction(a: float, x: float) -> float:
    ax = a * math.log(x) - x - lgamma(a)
    if ax < -MAXLOG:
        return 0.0
    ax = math.exp(ax)
    y = 1.0 - a
    z = x + y + 1.0
    c = 0.0
    pkm2, qkm2 = 1.0, x
    pkm1, qkm1 = x + 1.0, z * x
    ans = pkm1 / qkm1
    for _ in range(2000):
        c += 1.0
        y += 1.0
        z += 2.0
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        if qk != 0.0:
            r = pk / qk
            t = abs((ans - r) / r)
            ans = r
        else:
            t = 1.0
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        if abs(pk) > _BIG:
            pkm2 /= _BIG
            pkm1 /= _BIG
            qkm2 /= _BIG
            qkm1 /= _BIG
        if t <= MACHEP:
            break
    return ans * ax


def igamma(a: float, x: float) -> float:
    """The regularized lower incomplete gamma P(a, x)."""
    if math.isnan(a) or math.isnan(x) or a <= 0.0 or x < 0.0:
        return NAN
    if x == 0.0:
        return 0.0
    if x == INF:
        return 1.0
    if x > 1.0 and x > a:
        return 1.0 - _igamc_fraction(a, x)
    return _igam_series(a, x)


def igammac(a: float, x: float) -> float:
    """The regularized upper incomplete gamma Q(a, x) = 1 - P(a, x)."""
    if math.isnan(a) or math.isnan(x) or a <= 0.0 or x < 0.0:
        return NAN
    if x == 0.0:
        return 1.0
    if x == INF:
        return 0.0
    if x < 1.0 or x < a:
        return 1.0 - _igam_series(a, x)
    return _igamc_fraction(a, x)


def _betainc_fraction(a: float, b: float, x: float) -> float:
    """x^a (1-x)^b / (a B(a, b)) times the continued fraction of I_x(a, b) (modified Lentz)."""
    lbeta = lgamma(a) + lgamma(b) - lgamma(a + b)
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - lbeta) / a
    tiny = 1e-300
    f, c, d = 1.0, 1.0, 0.0
    for i in range(600):
        m = float(i // 2)
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
        else:
            num = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
        d = 1.0 + num * d
        if abs(d) < tiny:
            d = tiny
        d = 1.0 / d
        c = 1.0 + num / c
        if abs(c) < tiny:
            c = tiny
        cd = c * d
        f *= cd
        if abs(1.0 - cd) < MACHEP:
            break
    return front * (f - 1.0)


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta I_x(a, b)."""
    if math.isnan(a) or math.isnan(b) or math.isnan(x):
        return NAN
    if a <= 0.0 or b <= 0.0 or x < 0.0 or x > 1.0 or math.isinf(a) or math.isinf(b):
        return NAN
    if x == 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc_fraction(b, a, 1.0 - x)
    return _betainc_fraction(a, b, x)


def _erfinv_central(x: float) -> float:
    """erf(y) = x for |x| <= 1/2: the series guess, then Halley steps on erf."""
    y = x * _SQRT_PI_OVER_2 * (1.0 + math.pi * x * x / 12.0)
    for _ in range(4):
        r = (math.erf(y) - x) / (_TWO_OVER_SQRT_PI * math.exp(-y * y))
        y -= r / (1.0 + y * r)
    return y


def _erfcinv_tail(q: float) -> float:
    """erfc(y) = q for 0 < q < 1/2 (y > 0.47): Abramowitz-Stegun 26.2.23's guess, then Halley
    steps on erfc (relative accuracy in the far tail)."""
    t = math.sqrt(-2.0 * math.log(0.5 * q))
    z = t - (2.515517 + t * (0.802853 + t * 0.010328)) / (
        1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308)))
    y = z / _SQRT2
    for _ in range(5):
        r = (math.erfc(y) - q) / (-_TWO_OVER_SQRT_PI * math.exp(-y * y))
        y -= r / (1.0 + y * r)
    return y


def erfinv(x: float) -> float:
    """The inverse error function."""
    if math.isnan(x) or abs(x) > 1.0:
        return NAN
    if abs(x) == 1.0:
        return math.copysign(INF, x)
    if abs(x) <= 0.5:
        return _erfinv_central(x)
    return math.copysign(_erfcinv_tail(1.0 - abs(x)), x)


def ndtri(p: float) -> float:
    """The standard normal quantile: -sqrt(2) erfcinv(2p)."""
    if math.isnan(p) or p < 0.0 or p > 1.0:
        return NAN
    if p == 0.0:
        return -INF
    if p == 1.0:
        return INF
    q = 2.0 * p
    if 0.5 <= q <= 1.5:
        y = _erfinv_central(1.0 - q)
    elif q < 0.5:
        y = _erfcinv_tail(q)
    else:
        y = -_erfcinv_tail(2.0 - q)
    return -_SQRT2 * y


def _bessel_ie(nu: int, x: float) -> float:
    """exp(-|x|) I_nu(|x|) for nu in (0, 1): the power series up to 20, the asymptotic
    series in 1/x beyond."""
    ax = abs(x)
    if ax == INF:
        return 0.0
    if ax <= 20.0:
        q = 0.25 * ax * ax
        term, s = 1.0, 1.0
        for k in range(1, 500):
            term *= q / (k * (k + nu))
            s += term
            if term < s * 1e-17:
                break
        if nu == 1:
            s *= 0.5 * ax
        return s * math.exp(-ax)
    mu = 4.0 * nu * nu
    term, s = 1.0, 1.0
    for k in range(1, 60):
        term *= -(mu - (2.0 * k - 1.0) ** 2) / (8.0 * k * ax)
        s += term
        if abs(term) < 1e-17 * abs(s):
            break
    return s / math.sqrt(2.0 * math.pi * ax)


def bessel_i0e(x: float) -> float:
    """exp(-|x|) I0(x)."""
    if math.isnan(x):
        return NAN
    return _bessel_ie(0, x)


def bessel_i1e(x: float) -> float:
    """exp(-|x|) I1(x) (odd)."""
    if math.isnan(x):
        return NAN
    return math.copysign(_bessel_ie(1, x), x)


def _elementwise(fn: Callable[..., float]) -> Callable[..., np.ndarray]:
    """A scalar double function as a numpy kernel: evaluated per element (broadcasting) in
    double and rounded once to the inputs' precision."""
    vectorized = np.frompyfunc(fn, fn.__code__.co_argcount, 1)

    def kernel(*xs: np.ndarray) -> np.ndarray:
        dtype = xs[0].dtype
        out = vectorized(*[x.astype(np.float64) for x in xs])
        return np.asarray(out, dtype=np.float64).astype(dtype)
    return kernel


def _unary(name: str, fn: Callable[[float], float], doc: str) -> None:
    register_op(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: {float}"],
                shape=_same_shape, kernel=_reference(_elementwise(fn)), group="elementwise",
                data_error=None, doc=doc)


def _binary(name: str, fn: Callable[[float, float], float], args, doc: str) -> None:
    register_op(name, inputs=[f"{args[0]}: T", f"{args[1]}: T"], outputs=["z: T"],
                attrs=["T: {f32, f64}"], shape=_broadcast_shape,
                kernel=_reference(_elementwise(fn)), group="elementwise", data_error=None,
                doc=doc)


def _betainc_shape(ctx):
    """TensorFlow's rule: a, b and x each have the output's shape or are scalars."""
    shapes = [t.shape for t in ctx.input_types]
    full = [s for s in shapes if s is None or len(s) != 0]
    out = broadcast_shapes(shapes)
    for s in full:
        if s is not None and out is not None and (
                len(s) != len(out) or any(d is not None and o is not None and d != o
                                          for d, o in zip(s, out))):
            raise ctx.error(f"shapes of a, b and x must be equal or scalars, got "
                            f"{[list(x) if x is not None else None for x in shapes]}")
    return [out]


_unary("Lgamma", lgamma, "log|Gamma(x)|; +inf at 0 and the negative integers.")
_unary("Digamma", digamma, "psi(x), the derivative of lgamma; NaN at 0 and the negative "
       "integers.")
_unary("Erfinv", erfinv, "The inverse error function; +-inf at +-1, NaN outside [-1, 1].")
_unary("Ndtri", ndtri, "The standard normal quantile; -inf at 0, +inf at 1, NaN outside.")
_unary("BesselI0e", bessel_i0e, "exp(-|x|) I0(x), the scaled modified Bessel function.")
_unary("BesselI1e", bessel_i1e, "exp(-|x|) I1(x), the scaled modified Bessel function.")
_binary("Zeta", zeta, ("x", "q"), "The Hurwitz zeta function sum_k (k + q)^-x (broadcasting).")
_binary("Polygamma", polygamma, ("a", "x"), "The a-th derivative of digamma at x; a whole and "
        ">= 0, else NaN (broadcasting).")
_binary("Igamma", igamma, ("a", "x"), "The regularized lower incomplete gamma P(a, x) "
        "(broadcasting).")
_binary("Igammac", igammac, ("a", "x"), "The regularized upper incomplete gamma Q(a, x) = "
        "1 - P(a, x) (broadcasting).")
register_op("Betainc", inputs=["a: T", "b: T", "x: T"], outputs=["z: T"],
            attrs=["T: {f32, f64}"], shape=_betainc_shape,
            kernel=_reference(_elementwise(betainc)), group="elementwise", data_error=None,
            doc="The regularized incomplete beta I_x(a, b); a, b, x of one shape or scalars.")
