"""Code generation targets: what differs between C and CUDA, in one small class each.

Templates ask the target for type names, qualifiers and math function names; they never spell
those themselves.
"""
from __future__ import annotations

import math
from typing import List

import numpy as np

from runtime.dtypes import DType

_MATH_F32 = {"exp", "log", "log1p", "sqrt", "tanh", "floor", "ceil", "fabs", "pow", "expm1",
             "fmax", "fmin", "fmod", "rint", "round", "sin", "cos", "tan", "atan", "asin", "acos",
             "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "atan2", "lgamma", "trunc", "copysign", "nearbyint"}


class CTarget:
    name = "c"
    restrict = "restrict"
    function_qualifier = "static"
    file_suffix = ".c"

    def c_type(self, dtype: DType) -> str:
        return dtype.c_type

    def math(self, fn: str, dtype: DType) -> str:
        """Name of a libm function for a floating dtype (``expf`` for f32, ``exp`` for f64)."""
        if fn not in _MATH_F32:
            raise KeyError(f"unknown math function {fn}")
        if dtype is DType.f32:
            return fn + "f"
        return fn

    def literal(self, value, dtype: DType) -> str:
        """An exact C literal of ``value`` in ``dtype``."""
        if dtype is DType.bool:
            return "true" if bool(value) else "false"
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
        if dtype.is_floating:
            return "(-INFINITY)"
        if dtype is DType.bool:
            return "false"
        info = np.iinfo(dtype.np)
        return self.literal(info.min, dtype)

    def max_value(self, dtype: DType) -> str:
        if dtype.is_floating:
            return "INFINITY"
        if dtype is DType.bool:
            return "true"
        info = np.iinfo(dtype.np)
        return self.literal(info.max, dtype)


C = CTarget()
