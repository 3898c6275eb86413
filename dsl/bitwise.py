"""``fl.bitwise``: the bitwise ops on integer tensors, named as in ``tf.bitwise``
(``bitwise_and``, ``bitwise_or``, ``bitwise_xor``, ``invert``, ``left_shift``,
``right_shift``). Shift amounts outside ``[0, bits)`` are clamped into it, as in TensorFlow;
right shifts of signed types are arithmetic."""
from __future__ import annotations

from typing import Optional

from dsl.math_ops import _binary, _unary
from dsl.tensor import Tensor

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"]


def bitwise_and(x, y, name: Optional[str] = None) -> Tensor:
    """x & y elementwise, with broadcasting (BitwiseAnd)."""
    return _binary("BitwiseAnd", x, y, name)


def bitwise_or(x, y, name: Optional[str] = None) -> Tensor:
    """x | y elementwise, with broadcasting (BitwiseOr)."""
    return _binary("BitwiseOr", x, y, name)


def bitwise_xor(x, y, name: Optional[str] = None) -> Tensor:
    """x ^ y elementwise, with broadcasting (BitwiseXor)."""
    return _binary("BitwiseXor", x, y, name)


def invert(x, name: Optional[str] = None) -> Tensor:
    """~x: every bit flipped (Invert)."""
    return _unary("Invert", x, name)


def left_shift(x, y, name: Optional[str] = None) -> Tensor:
    """x << y (LeftShift); y is clamped to [0, bits - 1]."""
    return _binary("LeftShift", x, y, name)


def right_shift(x, y, name: Optional[str] = None) -> Tensor:
    """x >> y (RightShift), arithmetic for signed types; y is clamped to [0, bits - 1]."""
    return _binary("RightShift", x, y, name)
