"""Elementwise math: unary and binary ops with numpy broadcasting, Cast, SelectV2, AddN.

Each op is one registration: signature, shape function, numpy reference kernel and the C
scalar expression rendered into the shared elementwise kernel (``codegen/elementwise.py``).
C expressions read their inputs as ``a0``, ``a1``, ... and are stored in ``op.extra["c_expr"]``
(with ``op.extra["data_error"]``) so fused kernels can reuse them.

Semantics follow TensorFlow, with every result defined on every input:
- Integer Add/Sub/Mul/Neg/Abs/Square/SquaredDifference/AddN/Pow wrap (two's complement); C
  computes them in unsigned arithmetic so nothing overflows a signed type.
- Integer FloorDiv/FloorMod by zero (and Reciprocal of 0) fail with "Integer division by
  zero"; integer Pow with a negative exponent fails with "Integers to negative integer powers
  are not allowed". ``MIN // -1`` wraps to ``MIN`` and ``MIN % -1`` is 0.
- Cast from a float to an integer truncates toward zero, maps NaN to 0 and saturates values
  out of range (including +-inf) to the integer's min/max; any type to bool is ``x != 0``.
  ``Truncate=true`` from f64 to f32 truncates the mantissa instead of rounding (as TF does).
- Maximum/Minimum/Relu/Relu6/Sign propagate NaN; Round rounds half to even.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, List, Optional, Union

import numpy as np

from compiler.codegen.elementwise import broadcast_output_dims, emit_elementwise
from compiler.codegen.kernel_context import KernelContext
from compiler.errors import ExecutionError
from compiler.ir.types import broadcast_shapes, merge_shapes
from compiler.ir.op_registry import OpDef, register_op
from runtime.dtypes import DType

CExpr = Union[str, Callable[[KernelContext], str]]

INT_DIV_ZERO = "Integer division by zero"
NEGATIVE_POWER = "Integers to negative integer powers are not allowed"


@dataclass(frozen=True)
class DataError:
    """A data-dependent run-time error of an elementwise op, as one condition in C and numpy.

    ``c_cond(kc)`` is a C condition over ``a0``, ``a1``, ... (None: impossible for these
    dtypes); ``np_cond(*arrays)`` is the same condition in numpy (None likewise).
    """
    message: str
    c_cond: Callable[[KernelContext], Optional[str]]
    np_cond: Callable[..., Optional[np.ndarray]]


def _is_int(x: np.ndarray) -> bool:
    return x.dtype.kind in "iu"


def _signed_int(x: np.ndarray) -> bool:
    return x.dtype.kind == "i"


INT_DIVISOR_ZERO = DataError(
    INT_DIV_ZERO,
    c_cond=lambda kc: "a1 == 0" if kc.inputs[1].dtype.is_integer else None,
    np_cond=lambda x, y: (y == 0) if _is_int(y) else None)

INT_NEGATIVE_EXPONENT = DataError(
    NEGATIVE_POWER,
    c_cond=lambda kc: "a1 < 0" if kc.inputs[1].dtype.is_integer else None,
    np_cond=lambda x, y: (y < 0) if _is_int(y) else None)

INT_RECIPROCAL_ZERO = DataError(
    INT_DIV_ZERO,
    c_cond=lambda kc: "a0 == 0" if kc.inputs[0].dtype.is_integer else None,
    np_cond=lambda x: (x == 0) if _is_int(x) else None)


# --- shapes --------------------------------------------------------------------------------
def _same_shape(ctx):
    return [ctx.input_shape(0)]


def _same_dims(kc: KernelContext) -> List[List[str]]:
    return [kc.inputs[0].dims]


def _broadcast_shape(ctx):
    return [broadcast_shapes([t.shape for t in ctx.input_types])]


# --- building blocks for C expressions -----------------------------------------------------
def unsigned_ctype(dtype: DType) -> str:
    """The unsigned C type integer arithmetic on ``dtype`` wraps in (no int promotion traps)."""
    return "uint64_t" if dtype.itemsize == 8 else "uint32_t"


def _in_dtype(kc: KernelContext, i: int = 0) -> DType:
    return kc.inputs[i].dtype


def _wrapping_binary(op: str) -> Callable[[KernelContext], str]:
    """``a0 op a1``; for integers computed in unsigned arithmetic so it wraps without UB."""
    def expr(kc: KernelContext) -> str:
        dt = _in_dtype(kc)
        if dt.is_integer:
            u = unsigned_ctype(dt)
            return f"({kc.out.ctype})(({u})a0 {op} ({u})a1)"
        return f"a0 {op} a1"
    return expr


def _libm(fn: str, fmt: str = "{f}(a0)") -> Callable[[KernelContext], str]:
    """A libm call in the input's precision (``expf`` for f32)."""
    return lambda kc: fmt.format(f=kc.math(fn, _in_dtype(kc)))


def _helper(kc: KernelContext, fn: str, dtype: DType) -> str:
    """Define the scalar helper ``fn`` for ``dtype`` once per module; returns its C name."""
    name = f"flowc_math_{fn}_{dtype.ir_name}"
    fmod = kc.math("fmod", dtype) if dtype.is_floating else ""
    code = kc.render("math_helpers.c.j2", fn=fn, name=name, T=kc.target.c_type(dtype),
                     U=unsigned_ctype(dtype), is_signed=dtype.is_signed, fmod=fmod)
    kc.module.add_global(code)
    return name


def _c_kernel(c_expr: CExpr, error: Optional[DataError] = None) -> Callable[[KernelContext], str]:
    def emit(kc: KernelContext) -> str:
        expr = c_expr(kc) if callable(c_expr) else c_expr
        cond = error.c_cond(kc) if error is not None else None
        if cond is None:
            return emit_elementwise(kc, expr)
        return emit_elementwise(kc, expr, fail_if=cond, fail_message=error.message)
    return emit


def _reference(np_fn: Callable, error: Optional[DataError] = None) -> Callable:
    """The numpy kernel: checks ``error`` on the elements the output uses, then ``np_fn``."""
    def kernel(ctx, *xs):
        if error is not None and np.broadcast(*xs).size > 0:
            bad = error.np_cond(*xs)
            if bad is not None and np.any(bad):
                raise ExecutionError(error.message, ctx.node)
        return np_fn(*xs)
    return kernel


def unary(name: str, np_fn: Callable, c_expr: CExpr, types: str = "numeric",
          out: Optional[str] = None, doc: str = "", arg: str = "x", result: str = "y",
          error: Optional[DataError] = None) -> OpDef:
    """Register an elementwise unary op. ``c_expr(kc)`` returns the C expression over ``a0``."""
    return register_op(
        name, inputs=[f"{arg}: T"], outputs=[f"{result}: {out or 'T'}"],
        attrs=[f"T: {{{types}}}"], shape=_same_shape, kernel=_reference(np_fn, error),
        c_kernel=_c_kernel(c_expr, error), c_output_dims=_same_dims, group="elementwise",
        doc=doc, c_expr=c_expr, data_error=error)


def binary(name: str, np_fn: Callable, c_expr: CExpr, types: str = "numeric",
           out: Optional[str] = None, commutative: bool = False, doc: str = "",
           error: Optional[DataError] = None) -> OpDef:
    """Register an elementwise binary op with broadcasting. C expression over ``a0``, ``a1``."""
    return register_op(
        name, inputs=["x: T", "y: T"], outputs=[f"z: {out or 'T'}"], attrs=[f"T: {{{types}}}"],
        shape=_broadcast_shape, kernel=_reference(np_fn, error),
        c_kernel=_c_kernel(c_expr, error), c_output_dims=broadcast_output_dims,
        group="elementwise", commutative=commutative, doc=doc, c_expr=c_expr, data_error=error)


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


# --- unary: C expressions ------------------------------------------------------------------
def _c_neg(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt.is_integer:
        u = unsigned_ctype(dt)
        return f"({kc.out.ctype})(({u})0 - ({u})a0)"
    return "-a0"


def _c_abs(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt.is_integer:
        return f"a0 < 0 ? {_c_neg(kc)} : a0"
    return f"{kc.math('fabs', dt)}(a0)"


def _c_sign(kc: KernelContext) -> str:
    sign = f"({kc.out.ctype})((a0 > 0) - (a0 < 0))"
    return f"isnan(a0) ? a0 : {sign}" if _in_dtype(kc).is_floating else sign


def _c_square(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt.is_integer:
        u = unsigned_ctype(dt)
        return f"({kc.out.ctype})(({u})a0 * ({u})a0)"
    return "a0 * a0"


def _c_reciprocal(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt.is_integer:
        return "(a0 == 1 || a0 == -1) ? a0 : 0"
    return f"{kc.literal(1, dt)} / a0"


def _c_rsqrt(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    return f"{kc.literal(1, dt)} / {kc.math('sqrt', dt)}(a0)"


def _c_sigmoid(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt is DType.f32:             # the target's helper (vectorizable on the CPU)
        return f"{_helper(kc, 'sigmoid', dt)}(a0)"
    one = kc.literal(1, dt)
    return f"{one} / ({one} + {kc.math('exp', dt)}(-a0))"


def _c_softplus(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    t = _softplus_threshold(dt.np)
    exp = kc.math("exp", dt)
    return (f"a0 > {kc.literal(-t, dt)} ? a0 : (a0 < {kc.literal(t, dt)} ? {exp}(a0) : "
            f"{kc.math('log1p', dt)}({exp}(a0)))")


def _c_round(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    return f"{kc.math('rint', dt)}(a0)" if dt.is_floating else "a0"


unary("Neg", np.negative, _c_neg, types="signed", doc="-x; integers wrap (-MIN == MIN).")
unary("Abs", np.abs, _c_abs, types="signed", doc="|x|; integers wrap (|MIN| == MIN).")
unary("Sign", np.sign, _c_sign, types="signed", doc="-1, 0 or 1; NaN stays NaN.")
unary("Exp", np.exp, _libm("exp"), types="float")
unary("Log", np.log, _libm("log"), types="float")
unary("Log1p", np.log1p, _libm("log1p"), types="float")
unary("Sqrt", np.sqrt, _libm("sqrt"), types="float")
unary("Rsqrt", lambda x: 1 / np.sqrt(x), _c_rsqrt, types="float")
unary("Square", np.square, _c_square, types="numeric", doc="x * x; integers wrap.")
unary("Reciprocal", _np_reciprocal, _c_reciprocal, types="signed", error=INT_RECIPROCAL_ZERO,
      doc="1 / x; for integers 1 / 0 is an error and |x| > 1 gives 0.")
unary("Tanh", np.tanh, _libm("tanh"), types="float")
unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x)), _c_sigmoid, types="float")
unary("Relu", lambda x: np.where(x < 0, 0, x), "a0 < 0 ? 0 : a0", types="numeric",
      arg="features", result="activations", doc="max(features, 0); NaN stays NaN.")
unary("Relu6", lambda x: np.where(x < 0, 0, np.where(x > 6, 6, x)),
      "a0 < 0 ? 0 : (a0 > 6 ? 6 : a0)", types="numeric", arg="features", result="activations",
      doc="min(max(features, 0), 6); NaN stays NaN.")
unary("Elu", lambda x: np.where(x < 0, np.expm1(x), x),
      _libm("expm1", "a0 < 0 ? {f}(a0) : a0"), types="float", arg="features",
      result="activations")
unary("Softplus", _np_softplus, _c_softplus, types="float", arg="features", result="activations",
      doc="log(1 + exp(features)), with TF's cut-overs to features and exp(features).")
unary("Floor", np.floor, _libm("floor"), types="float")
unary("Ceil", np.ceil, _libm("ceil"), types="float")
unary("Round", _np_round, _c_round, types="signed", doc="Round half to even; integers unchanged.")
unary("LogicalNot", np.logical_not, "!a0", types="bool")


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
    if ctx.attrs["Truncate"] and src is DType.f64 and dst is DType.f32:
        x = _truncate_f64_mantissa(x)
    if dst is DType.bool:
        return x != 0
    if src.is_floating and dst.is_integer:
        return _float_to_int(x, dst.np)
    return x.astype(dst.np)


def _cast_expr(kc: KernelContext) -> str:
    src, dst = kc.attr("SrcT"), kc.attr("DstT")
    a = "a0"
    if kc.attr("Truncate") and src is DType.f64 and dst is DType.f32:
        a = f"{_helper(kc, 'truncate_f64_mantissa', DType.f64)}(a0)"
    if dst is DType.bool:
        return f"{a} != 0"
    if src.is_floating and dst.is_integer:
        info = np.iinfo(dst.np)
        lo = kc.literal(float(info.min), DType.f64)
        hi = kc.literal(float(info.max + 1), DType.f64)
        return (f"isnan(a0) ? 0 : (a0 <= {lo} ? {kc.target.min_value(dst)} : "
                f"(a0 >= {hi} ? {kc.target.max_value(dst)} : ({kc.out.ctype})a0))")
    return f"({kc.out.ctype}){a}"


register_op("Cast", inputs=["x: SrcT"], outputs=["y: DstT"],
            attrs=["SrcT: {all}", "DstT: {all}", "Truncate: bool = false"],
            shape=_same_shape, kernel=_cast_kernel, c_kernel=_c_kernel(_cast_expr),
            c_output_dims=_same_dims, group="elementwise", c_expr=_cast_expr, data_error=None,
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


# --- binary: C expressions -----------------------------------------------------------------
def _c_extremum(op: str) -> Callable[[KernelContext], str]:
    """Maximum (``>``) or Minimum (``<``); a NaN on either side gives NaN."""
    def expr(kc: KernelContext) -> str:
        if _in_dtype(kc).is_floating:
            return f"(a0 {op} a1 || isnan(a0)) ? a0 : a1"
        return f"a0 {op} a1 ? a0 : a1"
    return expr


def _c_pow(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt.is_floating:
        return f"{kc.math('pow', dt)}(a0, a1)"
    return f"{_helper(kc, 'pow', dt)}(a0, a1)"


def _c_floordiv(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt.is_floating:
        return f"{kc.math('floor', dt)}(a0 / a1)"
    return f"{_helper(kc, 'floordiv', dt)}(a0, a1)"


def _c_floormod(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    fn = "fmod_floor" if dt.is_floating else "floormod"
    return f"{_helper(kc, fn, dt)}(a0, a1)"


def _c_squared_difference(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    if dt.is_integer:
        u = unsigned_ctype(dt)
        d = f"(({u})a0 - ({u})a1)"
        return f"({kc.out.ctype})({d} * {d})"
    return "(a0 - a1) * (a0 - a1)"


for _name in ("Add", "AddV2"):
    binary(_name, np.add, _wrapping_binary("+"), commutative=True, doc="x + y; integers wrap.")
binary("Sub", np.subtract, _wrapping_binary("-"), doc="x - y; integers wrap.")
binary("Mul", np.multiply, _wrapping_binary("*"), commutative=True, doc="x * y; integers wrap.")
binary("RealDiv", np.divide, "a0 / a1", types="float")
binary("Maximum", np.maximum, _c_extremum(">"), commutative=True,
       doc="NaN on either side gives NaN.")
binary("Minimum", np.minimum, _c_extremum("<"), commutative=True,
       doc="NaN on either side gives NaN.")
binary("Pow", _np_pow, _c_pow, types="signed", error=INT_NEGATIVE_EXPONENT,
       doc="x ** y; integers by squaring (wrapping), negative integer exponents are an error.")
binary("FloorDiv", _np_floordiv, _c_floordiv, error=INT_DIVISOR_ZERO,
       doc="floor(x / y); integer division by zero is an error, MIN // -1 wraps to MIN.")
binary("FloorMod", _np_floormod, _c_floormod, error=INT_DIVISOR_ZERO,
       doc="x - floor(x / y) * y, with the sign of y; integer division by zero is an error.")
binary("SquaredDifference", lambda x, y: np.square(x - y), _c_squared_difference,
       types="float, i32, i64", commutative=True, doc="(x - y) ** 2; integers wrap.")

for _name, _np_fn, _c_op in (("Less", np.less, "<"), ("LessEqual", np.less_equal, "<="),
                             ("Greater", np.greater, ">"),
                             ("GreaterEqual", np.greater_equal, ">=")):
    binary(_name, _np_fn, f"a0 {_c_op} a1", types="numeric", out="bool")

binary("LogicalAnd", np.logical_and, "a0 && a1", types="bool", commutative=True)
binary("LogicalOr", np.logical_or, "a0 || a1", types="bool", commutative=True)


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


def _statically_incompatible(kc: KernelContext) -> bool:
    try:
        broadcast_shapes([x.shape for x in kc.inputs])
    except ValueError:
        return True
    return False


def _equality_c_kernel(c_op: str, mismatch: bool) -> Callable[[KernelContext], str]:
    def emit(kc: KernelContext) -> str:
        if not kc.attr("incompatible_shape_error") and _statically_incompatible(kc):
            return f"{kc.out.data}[0] = {kc.literal(mismatch, DType.bool)};"
        return emit_elementwise(kc, f"a0 {c_op} a1")
    return emit


for _name, _np_fn, _c_op, _mismatch in (("Equal", np.equal, "==", False),
                                        ("NotEqual", np.not_equal, "!=", True)):
    register_op(_name, inputs=["x: T", "y: T"], outputs=["z: bool"],
                attrs=["T: {all}", "incompatible_shape_error: bool = true"],
                shape=_equality_shape, kernel=_equality_kernel(_np_fn, _mismatch),
                c_kernel=_equality_c_kernel(_c_op, _mismatch),
                c_output_dims=broadcast_output_dims, group="elementwise", commutative=True,
                c_expr=f"a0 {_c_op} a1", data_error=None,
                doc="Elementwise comparison with broadcasting; with incompatible_shape_error="
                    "false, shapes that cannot broadcast give a scalar "
                    f"{str(_mismatch).lower()}.")


# --- SelectV2 ------------------------------------------------------------------------------
register_op("SelectV2", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
            attrs=["T: {all}"], shape=_broadcast_shape,
            kernel=lambda ctx, c, t, e: np.where(c, t, e),
            c_kernel=_c_kernel("a0 ? a1 : a2"), c_output_dims=broadcast_output_dims,
            group="elementwise", c_expr="a0 ? a1 : a2", data_error=None,
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


def _addn_expr(kc: KernelContext) -> str:
    dt = _in_dtype(kc)
    names = [f"a{j}" for j in range(len(kc.inputs))]
    if dt.is_integer:
        u = unsigned_ctype(dt)
        return f"({kc.out.ctype})(" + " + ".join(f"({u}){a}" for a in names) + ")"
    return " + ".join(names)


def _addn_output_dims(kc: KernelContext) -> List[List[str]]:
    """The shared dims, with run-time checks that dynamic dims agree (shapes were merged)."""
    first = kc.inputs[0]
    for j, x in enumerate(kc.inputs[1:], start=1):
        for k in range(first.rank):
            kc.check_dims_equal(x.dim(k), first.dim(k),
                                f"AddN input {j} dim {k} differs from input 0")
    return [[kc.out.dim(k) if kc.out.shape[k] is not None else first.dim(k)
             for k in range(first.rank)]]


register_op("AddN", inputs=["inputs: N * T"], outputs=["sum: T"],
            attrs=["N: int >= 1", "T: {numeric}"], shape=_addn_shape, kernel=_addn_kernel,
            c_kernel=_c_kernel(_addn_expr), c_output_dims=_addn_output_dims, group="elementwise",
            commutative=True, c_expr=_addn_expr, data_error=None,
            doc="The sum of N tensors of one shape; integers wrap.")
