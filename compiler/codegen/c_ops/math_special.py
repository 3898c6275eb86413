"""The C lowering of ``compiler/ops/math_special.py``: each op is one libm call (in the input's
precision: ``sinf`` for f32) or C99 classification macro, rendered into the shared elementwise
kernel and kept as ``c_expr`` for fused kernels and the CUDA backend."""
from __future__ import annotations

from compiler.codegen.c_ops.math import _libm, lower_binary, lower_unary

for _name, _fn in (("Sin", "sin"), ("Cos", "cos"), ("Tan", "tan"), ("Asin", "asin"),
                   ("Acos", "acos"), ("Atan", "atan"), ("Sinh", "sinh"), ("Cosh", "cosh"),
                   ("Asinh", "asinh"), ("Acosh", "acosh"), ("Atanh", "atanh"), ("Erf", "erf"),
                   ("Erfc", "erfc"), ("Expm1", "expm1")):
    lower_unary(_name, _libm(_fn))

lower_unary("IsNan", "isnan(a0)")
lower_unary("IsInf", "isinf(a0)")
lower_unary("IsFinite", "isfinite(a0)")
lower_binary("Atan2", _libm("atan2", "{f}(a0, a1)"))
