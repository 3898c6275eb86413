"""The C lowering of elementwise math (``compiler/ops/math.py``): unary and binary ops, Cast,
SelectV2, AddN, Equal/NotEqual.

Each op's C scalar expression is rendered into the shared elementwise kernel
(``codegen/elementwise.py``). C expressions read their inputs as ``a0``, ``a1``, ... and are
stored in ``op.extra["c_expr"]`` (with ``op.extra["c_data_error"]``, the C condition of the
op's ``data_error``) so fused kernels and the CUDA backend can reuse them. Integer
Add/Sub/Mul/Neg/Abs/Square/SquaredDifference/AddN/Pow are computed in unsigned arithmetic so
nothing overflows a signed type.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Union

import numpy as np

from compiler.codegen.elementwise import broadcast_output_dims, emit_elementwise
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import OpDef, get_op, set_c_kernel
from compiler.ir.types import broadcast_shapes
from compiler.ops.math import (INT_DIVISOR_ZERO, INT_NEGATIVE_EXPONENT, INT_RECIPROCAL_ZERO,
                               DataError, _softplus_threshold)
from runtime.dtypes import DType

CExpr = Union[str, Callable[[KernelContext], str]]
CCond = Callable[[KernelContext], Optional[str]]

# Each data error of ``compiler/ops/math.py`` as a C condition over ``a0``, ``a1``, ...
# (None: impossible for these dtypes).
C_CONDITIONS: Dict[DataError, CCond] = {
    INT_DIVISOR_ZERO: lambda kc: "a1 == 0" if kc.inputs[1].dtype.is_integer else None,
    INT_NEGATIVE_EXPONENT: lambda kc: "a1 < 0" if kc.inputs[1].dtype.is_integer else None,
    INT_RECIPROCAL_ZERO: lambda kc: "a0 == 0" if kc.inputs[0].dtype.is_integer else None,
}


# --- shapes --------------------------------------------------------------------------------
def _same_dims(kc: KernelContext) -> List[List[str]]:
    return [kc.inputs[0].dims]


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


def _helper(kc: KernelContext, fn: str, dtype: DType, **variables) -> str:
    """Define the scalar helper ``fn`` for ``dtype`` once per module; returns its C name."""
    name = f"flowc_math_{fn}_{dtype.ir_name}"
    fmod = kc.math("fmod", dtype) if dtype.is_floating else ""
    code = kc.render("math_helpers.c.j2", fn=fn, name=name, T=kc.target.c_type(dtype),
                     U=unsigned_ctype(dtype), is_signed=dtype.is_signed, fmod=fmod, **variables)
    kc.module.add_global(code)
    return name


def _c_kernel(c_expr: CExpr, error: Optional[DataError] = None) -> Callable[[KernelContext], str]:
    c_cond = C_CONDITIONS[error] if error is not None else None

    def emit(kc: KernelContext) -> str:
        expr = c_expr(kc) if callable(c_expr) else c_expr
        cond = c_cond(kc) if c_cond is not None else None
        if cond is None:
            return emit_elementwise(kc, expr)
        return emit_elementwise(kc, expr, fail_if=cond, fail_message=error.message)
    return emit


def _lower(name: str, c_expr: CExpr, c_output_dims: Callable) -> OpDef:
    """Attach the C kernel of elementwise op ``name`` made from its scalar ``c_expr`` (and the
    C condition of its ``data_error``)."""
    error = get_op(name).extra.get("data_error")
    return set_c_kernel(name, _c_kernel(c_expr, error), c_output_dims, c_expr=c_expr,
                        c_data_error=C_CONDITIONS[error] if error is not None else None)


def lower_unary(name: str, c_expr: CExpr) -> OpDef:
    """The C lowering of a unary op. ``c_expr(kc)`` returns the C expression over ``a0``."""
    return _lower(name, c_expr, _same_dims)


def lower_binary(name: str, c_expr: CExpr) -> OpDef:
    """The C lowering of a broadcasting binary op. C expression over ``a0``, ``a1``."""
    return _lower(name, c_expr, broadcast_output_dims)


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


lower_unary("Neg", _c_neg)
lower_unary("Abs", _c_abs)
lower_unary("Sign", _c_sign)
lower_unary("Exp", _libm("exp"))
lower_unary("Log", _libm("log"))
lower_unary("Log1p", _libm("log1p"))
lower_unary("Sqrt", _libm("sqrt"))
lower_unary("Rsqrt", _c_rsqrt)
lower_unary("Square", _c_square)
lower_unary("Reciprocal", _c_reciprocal)
lower_unary("Tanh", _libm("tanh"))
lower_unary("Sigmoid", _c_sigmoid)
lower_unary("Relu", "a0 < 0 ? 0 : a0")
lower_unary("Relu6", "a0 < 0 ? 0 : (a0 > 6 ? 6 : a0)")
lower_unary("Elu", _libm("expm1", "a0 < 0 ? {f}(a0) : a0"))
lower_unary("Softplus", _c_softplus)
lower_unary("Floor", _libm("floor"))
lower_unary("Ceil", _libm("ceil"))
lower_unary("Round", _c_round)
lower_unary("LogicalNot", "!a0")


# --- Cast ----------------------------------------------------------------------------------
def half_to_float(kc: KernelContext, dtype: DType, a: str) -> str:
    """C of the f16/bf16 value ``a`` as a float (exact)."""
    if dtype is DType.f16 and kc.target.native_f16:
        return f"(float)({a})"
    return f"{_helper(kc, dtype.ir_name + '_to_f32', dtype)}({a})"


def float_to_half(kc: KernelContext, dtype: DType, a: str, src: DType) -> str:
    """C of the ``src`` value ``a`` rounded once to the nearest ``dtype`` (f16/bf16), ties to
    even, overflowing to inf, NaN kept (bf16: the quiet NaN with its sign). A target with a
    native f16 (C's _Float16) converts to f16 with a cast; otherwise, and for bf16, through
    the bit-exact helpers of ``math_helpers.c.j2``."""
    if dtype is DType.f16 and kc.target.native_f16:
        return f"({kc.target.c_type(DType.f16)})({a})"
    round_f32 = _helper(kc, f"f32_to_{dtype.ir_name}", dtype)
    if src in (DType.f32, DType.f16, DType.bf16, DType.bool) or (
            src.is_integer and src.itemsize <= 2):          # exact in f32
        return f"{round_f32}((float)({a}))"
    return f"{_helper(kc, f'f64_to_{dtype.ir_name}', dtype, round_f32=round_f32)}((double)({a}))"


def _cast_expr(kc: KernelContext) -> str:
    src, dst = kc.attr("SrcT"), kc.attr("DstT")
    a = "a0"
    if src is dst:
        return a
    if src.is_half:                          # exact in f32: convert from there
        a, src = half_to_float(kc, src, a), DType.f32
        if src is dst:
            return a
    if kc.attr("Truncate") and src is DType.f64 and dst is DType.f32:
        a = f"{_helper(kc, 'truncate_f64_mantissa', DType.f64)}({a})"
    if dst is DType.bool:
        return f"{a} != 0"
    if dst.is_half:
        return float_to_half(kc, dst, a, src)
    if src.is_floating and dst.is_integer:
        info = np.iinfo(dst.np)
        lo = kc.literal(float(info.min), DType.f64)
        hi = kc.literal(float(info.max + 1), DType.f64)
        v = "a0" if a == "a0" else "c0"
        expr = (f"isnan({v}) ? 0 : ({v} <= {lo} ? {kc.target.min_value(dst)} : "
                f"({v} >= {hi} ? {kc.target.max_value(dst)} : ({kc.out.ctype}){v}))")
        return expr if v == "a0" else f"({{ const float c0 = {a}; {expr}; }})"
    return f"({kc.out.ctype}){a}"


_lower("Cast", _cast_expr, _same_dims)


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
    lower_binary(_name, _wrapping_binary("+"))
lower_binary("Sub", _wrapping_binary("-"))
lower_binary("Mul", _wrapping_binary("*"))
lower_binary("RealDiv", "a0 / a1")
lower_binary("Maximum", _c_extremum(">"))
lower_binary("Minimum", _c_extremum("<"))
lower_binary("Pow", _c_pow)
lower_binary("FloorDiv", _c_floordiv)
lower_binary("FloorMod", _c_floormod)
lower_binary("SquaredDifference", _c_squared_difference)

for _name, _c_op in (("Less", "<"), ("LessEqual", "<="), ("Greater", ">"),
                     ("GreaterEqual", ">=")):
    lower_binary(_name, f"a0 {_c_op} a1")

lower_binary("LogicalAnd", "a0 && a1")
lower_binary("LogicalOr", "a0 || a1")


# --- Equal / NotEqual (attr incompatible_shape_error) ---------------------------------------
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


for _name, _c_op, _mismatch in (("Equal", "==", False), ("NotEqual", "!=", True)):
    set_c_kernel(_name, _equality_c_kernel(_c_op, _mismatch), broadcast_output_dims,
                 c_expr=f"a0 {_c_op} a1", c_data_error=None)


# --- SelectV2 ------------------------------------------------------------------------------
_lower("SelectV2", "a0 ? a1 : a2", broadcast_output_dims)


# --- AddN ----------------------------------------------------------------------------------
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


_lower("AddN", _addn_expr, _addn_output_dims)
