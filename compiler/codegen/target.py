"""Code generation targets: what differs between C and CUDA, in one small class each.

Templates ask the target for type names, qualifiers and math function names; they never spell
those themselves.
"""
from __future__ import annotations

import math
from typing import List

import numpy as np

from runtime.dtypes import DType, f32_to_half

_MATH_F32 = {"exp", "log", "log1p", "sqrt", "tanh", "floor", "ceil", "fabs", "pow", "expm1",
             "fmax", "fmin", "fmod", "rint", "round", "sin", "cos", "tan", "atan", "asin", "acos",
             "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "atan2", "lgamma", "trunc", "copysign", "nearbyint"}


class CTarget:
    name = "c"
    # f16 is C's _Float16 (GCC and Clang convert it in hardware or libgcc, rounding to nearest
    # even); a target without it stores f16 as its bits, like bf16 (see ``c_type``).
    native_f16 = True
    restrict = "restrict"
    function_qualifier = "static"
    file_suffix = ".c"

    def c_type(self, dtype: DType) -> str:
        if dtype is DType.f16 and not self.native_f16:
            return "uint16_t"
        return dtype.c_type

    def _half_bits(self, dtype: DType) -> bool:
        """Whether ``dtype``'s values are written as their bits on this target."""
        return dtype is DType.bf16 or (dtype is DType.f16 and not self.native_f16)

    def math(self, fn: str, dtype: DType) -> str:
        """Name of a libm function for a floating dtype (``expf`` for f32, ``exp`` for f64)."""
        if fn not in _MATH_F32:
            raise KeyError(f"unknown math function {fn}")
        if dtype is DType.f32:
            return fn + "f"
        return fn

    def literal(self, value, dtype: DType) -> str:
        """An exact C literal of ``value`` in ``dtype`` (f16: its value, rounded to f16 first;
        bf16, and f16 on a target without _Float16: its bits, as such values are stored)."""
        if dtype is DType.bool:
            return "true" if bool(value) else "false"
        if self._half_bits(dtype):
            bits = int(np.asarray(f32_to_half(np.float32(value), dtype)).view(np.uint16))
            return f"(uint16_t)0x{bits:04x}"
        if dtype is DType.f16:
            value = float(np.float16(value))
        if dtype.is_floating:
            v = float(value)
            if math.isnan(v):
                return "NAN"
            if math.isinf(v):
                return "INFINITY" if v > 0 else "(-INFINITY)"
            if dtype is DType.f32:
                text = f"{float(np.float32(v)):.9g}"
            else:
                text = f"{v:.17g}"
            if not any(c in text for c in ".e"):
                text += ".0"
            return text + ("f" if dtype is DType.f32 else "")
        v = int(value)
        if dtype is DType.i64:
            return f"INT64_C({v})" if v >= -(2**63) + 1 else "INT64_MIN"
        if dtype is DType.i32:
            return str(v) if v != -(2**31) else "INT32_MIN"
        if dtype is DType.u64:
            return f"UINT64_C({v})"
        if dtype is DType.u32:
            return f"{v}u"
        return str(v)

    def literals(self, values: np.ndarray, dtype: DType) -> List[str]:
        """``literal`` of every element of ``values`` (flattened): the same texts, a few times
        faster for float arrays (a MobileNet's constants took half its emission as one
        ``literal`` call each)."""
        flat = np.asarray(values).reshape(-1)
        if type(self).literal is not CTarget.literal or dtype not in (DType.f32, DType.f64):
            return [self.literal(v, dtype) for v in flat.tolist()]
        f32 = dtype is DType.f32
        exact = flat.astype(np.float32 if f32 else np.float64).astype(np.float64).tolist()
        fmt, suffix = ("%.9g", "f") if f32 else ("%.17g", "")
        out = []
        for x in exact:
            if x != x or x == math.inf or x == -math.inf:
                out.append(self.literal(x, dtype))
                continue
            text = fmt % x
            if "." not in text and "e" not in text:
                text += ".0"
            out.append(text + suffix)
        return out

    def min_value(self, dtype: DType) -> str:
        if self._half_bits(dtype):
            return "(uint16_t)0xff80" if dtype is DType.bf16 else "(uint16_t)0xfc00"
        if dtype.is_floating:
            return "(-INFINITY)"
        if dtype is DType.bool:
            return "false"
        info = np.iinfo(dtype.np)
        return self.literal(info.min, dtype)

    def max_value(self, dtype: DType) -> str:
        if self._half_bits(dtype):
            return "(uint16_t)0x7f80" if dtype is DType.bf16 else "(uint16_t)0x7c00"
        if dtype.is_floating:
            return "INFINITY"
        if dtype is DType.bool:
            return "true"
        info = np.iinfo(dtype.np)
        return self.literal(info.max, dtype)


C = CTarget()
