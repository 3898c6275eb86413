"""Bitwise ops on integers (TensorFlow's ``tf.bitwise``): BitwiseAnd, BitwiseOr, BitwiseXor,
Invert, LeftShift, RightShift. Elementwise with broadcasting, over every integer type flowc
has (the ``int`` type group); C lowering in ``compiler/codegen/c_ops/bitwise.py``.

Shifts are TensorFlow's (its CPU functors): the shift amount ``y`` is first clamped to
``[0, bits - 1]`` (a negative ``y`` shifts by 0, a ``y`` of the width or more by width - 1),
so every result is defined; LeftShift shifts the two's-complement bits (bits past the top are
lost, the sign bit included), RightShift of a signed type is arithmetic (sign-extending).
"""
from __future__ import annotations

import numpy as np

from compiler.ops.math import binary, unary


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def shift_amount(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``y`` clamped to ``[0, bits of x - 1]``, as an unsigned array of x's width."""
    bits = 8 * x.dtype.itemsize
    clamped = np.minimum(y, bits - 1) if y.dtype.kind == "u" else np.clip(y, 0, bits - 1)
    return clamped.astype(_unsigned(x.dtype))


def _np_left_shift(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    u = x.astype(_unsigned(x.dtype))
    return np.left_shift(u, shift_amount(x, y)).astype(x.dtype)


def _np_right_shift(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.right_shift(x, shift_amount(x, y).astype(x.dtype))


binary("BitwiseAnd", np.bitwise_and, types="int", commutative=True, doc="x & y.")
binary("BitwiseOr", np.bitwise_or, types="int", commutative=True, doc="x | y.")
binary("BitwiseXor", np.bitwise_xor, types="int", commutative=True, doc="x ^ y.")
unary("Invert", np.invert, types="int", doc="~x: every bit flipped.")
binary("LeftShift", _np_left_shift, types="int",
       doc="x << y with y clamped to [0, bits - 1]; bits shifted past the top are lost.")
binary("RightShift", _np_right_shift, types="int",
       doc="x >> y with y clamped to [0, bits - 1]; arithmetic for signed types.")
