"""The C lowering of ``compiler/ops/bitwise.py``. Every result is cast back to the operands'
type (C promotes small integers to int); shifts run in the unsigned type of the operands'
width with the amount clamped to ``[0, bits - 1]`` first, so no shift is undefined
behaviour (a signed right shift is arithmetic on every compiler flowc targets)."""
from __future__ import annotations

from compiler.codegen.c_ops.math import lower_binary, lower_unary, unsigned_ctype
from compiler.codegen.kernel_context import KernelContext


def _bitwise(op: str):
    return lambda kc: f"({kc.out.ctype})(a0 {op} a1)"


def _clamped_amount(kc: KernelContext) -> str:
    dt = kc.inputs[1].dtype
    top = 8 * dt.itemsize - 1
    if dt.is_signed:
        return f"(a1 < 0 ? 0 : (a1 > {top} ? {top} : a1))"
    return f"(a1 > {top} ? {top} : a1)"


def _c_left_shift(kc: KernelContext) -> str:
    u = unsigned_ctype(kc.inputs[0].dtype)
    return f"({kc.out.ctype})(({u})a0 << {_clamped_amount(kc)})"


def _c_right_shift(kc: KernelContext) -> str:
    return f"({kc.out.ctype})(a0 >> {_clamped_amount(kc)})"


lower_binary("BitwiseAnd", _bitwise("&"))
lower_binary("BitwiseOr", _bitwise("|"))
lower_binary("BitwiseXor", _bitwise("^"))
lower_unary("Invert", lambda kc: f"({kc.out.ctype})~a0")
lower_binary("LeftShift", _c_left_shift)
lower_binary("RightShift", _c_right_shift)
