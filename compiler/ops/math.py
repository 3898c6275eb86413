"""Elementwise math: unary and binary ops with numpy broadcasting, Cast, SelectV2, AddN.

Each op is one registration: signature, shape function and numpy reference kernel; a data
error an op can raise is stored in ``op.extra["data_error"]`` (a ``DataError``). Their C scalar
expressions are ``compiler/codegen/c_ops/math.py``'s.

Semantics follow TensorFlow, with every result defined on every input:
- Integer Add/Sub/Mul/Neg/Abs/Square/SquaredDifference/AddN/Pow wrap (two's complement).
- Integer FloorDiv/FloorMod by zero (and Reciprocal of 0) fail with "Integer division by
  zero"; integer Pow with a negative exponent fails with "Integers to negative integer powers
  are not allowed". ``MIN // -1`` wraps to ``MIN`` and ``MIN % -1`` is 0.
- Cast from a float to an integer truncates toward zero, maps NaN to 0 and saturates values
  out of range (including +-inf) to the integer's min/max; any type to bool is ``x != 0``.
  To f16/bf16 it rounds once to nearest even (from f64 and i64 too), overflowing to +-inf; a
  NaN stays a NaN (bf16: the quiet NaN with its sign, as ml_dtypes).
  ``Truncate=true`` from f64 to f32 truncates the mantissa instead of rounding (as TF does).
- Maximum/Minimum/Relu/Relu6/Sign propagate NaN; Round rounds half to even.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import broadcast_shapes, merge_shapes
from compiler.ir.op_registry import OpDef, register_op
from runtime.dtypes import DType, bf16_numpy_is_raw, f32_to_half, half_to_f32

INT_DIV_ZERO = "Integer division by zero"
NEGATIVE_POWER = "Integers to negative integer powers are not allowed"


@dataclass(frozen=True)
class DataError:
    """A data-dependent run-time error of an elementwise op, as one condition in numpy.

    ``np_cond(*arrays)`` is the condition (None: impossible for these dtypes); each target's
    lowering states it in its own language (C: ``op.extra["c_data_error"]``).
    """
    message: str
    np_cond: Callable[..., Optional[np.ndarray]]


def _is_int(x: np.ndarray) -> bool:
    return x.dtype.kind in "iu"


def _signed_int(x: np.ndarray) -> bool:
    return x.dtype.kind == "i"


INT_DIVISOR_ZERO = DataError(
    INT_DIV_ZERO,
    np_cond=lambda x, y: (y == 0) if _is_int(y) else None)

INT_NEGATIVE_EXPONENT = DataError(
    NEGATIVE_POWER,
    np_cond=lambda x, y: (y < 0) if _is_int(y) else None)

INT_RECIPROCAL_ZERO = DataError(
    INT_DIV_ZERO,
    np_cond=lambda x: (x == 0) if _is_int(x) else None)


# --- shapes --------------------------------------------------------------------------------
def _same_shape(ctx):
    return [ctx.input_shape(0)]


def _broadcast_shape(ctx):
    return [broadcast_shapes([t.shape for t in ctx.input_types])]


def _reference(np_fn: Callable, error: Optional[DataError] = None) -> Callable:
    """The numpy kernel: checks ``error`` on the elements the output uses, then ``np_fn``."""
    def kernel(ctx, *xs):
        if error is not None and np.broadcast(*xs).size > 0:
            bad = error.np_cond(*xs)
            if bad is not None and np.any(bad):
                raise ExecutionError(error.message, ctx.node)
        return np_fn(*xs)
    return kernel


def unary(name: str, np_fn: Callable, types: str = "numeric",
          out: Optional[str] = None, doc: str = "", arg: str = "x", result: str = "y",
          error: Optional[DataError] = None) -> OpDef:
    """Register an elementwise unary op."""
    return register_op(
        name, inputs=[f"{arg}: T"], outputs=[f"{result}: {out or 'T'}"],
        attrs=[f"T: {{{types}}}"], shape=_same_shape, kernel=_reference(np_fn, error),
        group="elementwise", doc=doc, data_error=error)


def binary(name: str, np_fn: Callable, types: str = "numeric",
           out: Optional[str] = None, commutative: bool = False, doc: str = "",
           error: Optional[DataError] = None) -> OpDef:
    """Register an elementwise binary op with broadcasting."""
    return register_op(
        name, inputs=["x: T", "y: T"], outputs=[f"z: {out or 'T'}"], attrs=[f"T: {{{types}}}"],
        shape=_broadcast_shape, kernel=_reference(np_fn, error),
        group="elementwise", commutative=commutative, doc=doc, data_error=error)


# --- unary: numpy references ---------------------------------------------------------------
def _np_reciprocal(x: np.ndarray) -> np.ndarray:
    if _is_int(x):
        return np.where((x == 1) | (x == -1), x, 0).astype(x.dtype)
    return np.reciprocal(x)


def _softplus_threshold(dtype: np.dtype) -> np.generic:
    """TF's cut-over points: log(epsilon) + 2 in the input's precision."""
    return np.log(np.finfo(dtype).eps) + dtype.type(2)


def _np_softplus(x: np.ndarray) -> np.ndarray:
    t = _softplus_threshold(x.dtype)
    return np.where(x > -t, x, np.where(x < t, np.exp(x), np.log1p(np.exp(x))))


def _np_round(x: np.ndarray) -> np.ndarray:
    return np.rint(x) if x.dtype.kind == "f" else x.copy()


unary("Neg", np.negative, types="signed", doc="-x; integers wrap (-MIN == MIN).")
unary("Abs", np.abs, types="signed", doc="|x|; integers wrap (|MIN| == MIN).")
unary("Sign", np.sign, types="signed", doc="-1, 0 or 1; NaN stays NaN.")
unary("Exp", np.exp, types="float")
unary("Log", np.log, types="float")
unary("Log1p", np.log1p, types="float")
unary("Sqrt", np.sqrt, types="float")
unary("Rsqrt", lambda x: 1 / np.sqrt(x), types="float")
unary("Square", np.square, types="numeric", doc="x * x; integers wrap.")
unary("Reciprocal", _np_reciprocal, types="signed", error=INT_RECIPROCAL_ZERO,
      doc="1 / x; for integers 1 / 0 is an error and |x| > 1 gives 0.")
unary("Tanh", np.tanh, types="float")
unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x)), types="float")
unary("Relu", lambda x: np.where(x < 0, 0, x), types="numeric",
      arg="features", result="activations", doc="max(features, 0); NaN stays NaN.")
unary("Relu6", lambda x: np.where(x < 0, 0, np.where(x > 6, 6, x)), types="numeric",
      arg="features", result="activations", doc="min(max(features, 0), 6); NaN stays NaN.")
unary("Elu", lambda x: np.where(x < 0, np.expm1(x), x), types="float", arg="features",
      result="activations")
unary("Softplus", _np_softplus, types="float", arg="features", result="activations",
      doc="log(1 + exp(features)), with TF's cut-overs to features and exp(features).")
unary("Floor", np.floor, types="float")
unary("Ceil", np.ceil, types="float")
unary("Round", _np_round, types="signed", doc="Round half to even; integers unchanged.")
unary("LogicalNot", np.logical_not, types="bool")


# --- Cast ----------------------------------------------------------------------------------
def _truncate_f64_mantissa(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x).view(np.uint64) & ~np.uint64((1 << 29) - 1)
    return np.where(np.isnan(x), x, bits.view(np.float64))


def _float_to_int(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Truncate toward zero; NaN -> 0; out of range (and +-inf) saturates."""
    info = np.iinfo(dtype)
    x = x.astype(np.float64)
    low = x <= float(info.min)
    high = x >= float(info.max + 1)
    mid = ~(low | high | np.isnan(x))
    out = np.zeros(x.shape, dtype)
    out[low] = info.min
    out[high] = info.max
    out[mid] = x[mid].astype(dtype)
    return out


def _cast_kernel(ctx, x: np.ndarray) -> np.ndarray:
    src, dst = ctx.attrs["SrcT"], ctx.attrs["DstT"]
    if src is dst:
        return x.copy()
    if src.is_half:                           # exact in f32
        x, src = half_to_f32(x, src), DType.f32
    if ctx.attrs["Truncate"] and src is DType.f64 and dst is DType.f32:
        x = _truncate_f64_mantissa(x)
    if dst is DType.bool:
        return x != 0
    if src.is_floating and dst.is_integer:
        return _float_to_int(x, dst.np)
    if dst is DType.bf16 and bf16_numpy_is_raw():        # pragma: no cover
        return f32_to_half(x.astype(np.float32), dst)
    return x.astype(dst.np)                   # f16/bf16: rounded once, to nearest even


register_op("Cast", inputs=["x: SrcT"], outputs=["y: DstT"],
            attrs=["SrcT: {all}", "DstT: {all}", "Truncate: bool = false"],
            shape=_same_shape, kernel=_cast_kernel, group="elementwise", data_error=None,
            half_native=True,
            doc="Convert to DstT. Float to integer truncates toward zero, NaN gives 0 and "
                "out-of-range values saturate; anything to bool is x != 0.")


# --- binary: numpy references --------------------------------------------------------------
def _unsigned_np(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def _np_floordiv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return np.floor(x / y)
    if not _signed_int(x):
        return np.floor_divide(x, np.where(y == 0, 1, y).astype(y.dtype))
    minus_one = y == -1
    safe = np.where((y == 0) | minus_one, 1, y).astype(y.dtype)
    return np.where(minus_one, np.negative(x), np.floor_divide(x, safe))


def _np_floormod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        r = np.fmod(x, y)
        return np.where((r != 0) & ((y < 0) != (r < 0)), r + y, r)
    unused = (y == 0) | (y == -1) if _signed_int(x) else (y == 0)
    safe = np.where(unused, 1, y).astype(y.dtype)
    return np.where(unused, 0, np.remainder(x, safe))


def _np_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return np.power(x, y)
    base, exp = np.broadcast_arrays(x.astype(np.uint64), np.maximum(y, 0).astype(np.uint64))
    result = np.ones(base.shape, np.uint64)
    exp = exp.copy()
    while np.any(exp):
        odd = (exp & np.uint64(1)) == 1
        result = np.where(odd, result * base, result)
        base = base * base
        exp >>= np.uint64(1)
    return result.astype(_unsigned_np(x.dtype)).view(x.dtype)


for _name in ("Add", "AddV2"):
    binary(_name, np.add, commutative=True, doc="x + y; integers wrap.")
binary("Sub", np.subtract, doc="x - y; integers wrap.")
binary("Mul", np.multiply, commutative=True, doc="x * y; integers wrap.")
binary("RealDiv", np.divide, types="float")
binary("Maximum", np.maximum, commutative=True, doc="NaN on either side gives NaN.")
binary("Minimum", np.minimum, commutative=True, doc="NaN on either side gives NaN.")
binary("Pow", _np_pow, types="signed", error=INT_NEGATIVE_EXPONENT,
       doc="x ** y; integers by squaring (wrapping), negative integer exponents are an error.")
binary("FloorDiv", _np_floordiv, error=INT_DIVISOR_ZERO,
       doc="floor(x / y); integer division by zero is an error, MIN // -1 wraps to MIN.")
binary("FloorMod", _np_floormod, error=INT_DIVISOR_ZERO,
       doc="x - floor(x / y) * y, with the sign of y; integer division by zero is an error.")
binary("SquaredDifference", lambda x, y: np.square(x - y), types="float, i32, i64",
       commutative=True, doc="(x - y) ** 2; integers wrap.")

for _name, _np_fn in (("Less", np.less), ("LessEqual", np.less_equal),
                      ("Greater", np.greater), ("GreaterEqual", np.greater_equal)):
    binary(_name, _np_fn, types="numeric", out="bool")

binary("LogicalAnd", np.logical_and, types="bool", commutative=True)
binary("LogicalOr", np.logical_or, types="bool", commutative=True)


# --- Equal / NotEqual (attr incompatible_shape_error) ---------------------------------------
def _equality_shape(ctx):
    shapes = [t.shape for t in ctx.input_types]
    if ctx.attr("incompatible_shape_error"):
        return [broadcast_shapes(shapes)]
    try:
        out = broadcast_shapes(shapes)
    except ValueError:
        return [()]                          # statically incompatible: a scalar answer
    known = all(s is not None and None not in s for s in shapes)
    return [out if known else None]          # could still turn out incompatible at run time


def _equality_kernel(np_fn: Callable, mismatch: bool) -> Callable:
    def kernel(ctx, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not ctx.attrs["incompatible_shape_error"]:
            try:
                np.broadcast_shapes(x.shape, y.shape)
            except ValueError:
                return np.array(mismatch)
        return np_fn(x, y)
    return kernel


for _name, _np_fn, _mismatch in (("Equal", np.equal, False),
                                 ("NotEqual", np.not_equal, True)):
    register_op(_name, inputs=["x: T", "y: T"], outputs=["z: bool"],
                attrs=["T: {all}", "incompatible_shape_error: bool = true"],
                shape=_equality_shape, kernel=_equality_kernel(_np_fn, _mismatch),
                group="elementwise", commutative=True, data_error=None,
                doc="Elementwise comparison with broadcasting; with incompatible_shape_error="
                    "false, shapes that cannot broadcast give a scalar "
                    f"{str(_mismatch).lower()}.")


# --- SelectV2 ------------------------------------------------------------------------------
register_op("SelectV2", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
            attrs=["T: {all}"], shape=_broadcast_shape,
            kernel=lambda ctx, c, t, e: np.where(c, t, e),
            group="elementwise", data_error=None,
            doc="t where condition else e, broadcasting all three.")


# --- AddN ----------------------------------------------------------------------------------
def _addn_shape(ctx):
    shape = ctx.input_shape(0)
    for t in ctx.input_types[1:]:
        try:
            shape = merge_shapes(shape, t.shape)
        except ValueError as e:
            raise ctx.error(f"AddN inputs must all have the same shape: {e}") from None
    return [shape]


def _addn_kernel(ctx, *xs: np.ndarray) -> np.ndarray:
    for x in xs[1:]:
        if x.shape != xs[0].shape:
            raise ExecutionError(f"AddN inputs must all have the same shape: {xs[0].shape} "
                                 f"vs {x.shape}", ctx.node)
    return functools.reduce(np.add, xs[1:], xs[0].copy())


register_op("AddN", inputs=["inputs: N * T"], outputs=["sum: T"],
            attrs=["N: int >= 1", "T: {numeric}"], shape=_addn_shape, kernel=_addn_kernel,
            group="elementwise", commutative=True, data_error=None,
            doc="The sum of N tensors of one shape; integers wrap.")
