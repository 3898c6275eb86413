"""Dense-layer ops: MatMul and BatchMatMulV2, BiasAdd, Softmax and LogSoftmax (over the last
axis, max-subtracted for stability). Their C lowering is ``compiler/codegen/c_ops/nn.py``.

Integer products and sums wrap around in two's complement (numpy wraps the same way; the C
code computes them in unsigned arithmetic).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import broadcast_shapes, shape_str
from compiler.ir.op_registry import register_op


# --- MatMul / BatchMatMulV2: shapes ---------------------------------------------------------
def _matrix_dims(shape: Optional[tuple], transpose: bool) -> Tuple[Optional[int], Optional[int]]:
    """(rows, cols) of the matrix as used in the product (after the optional transpose)."""
    if shape is None:
        return None, None
    r, c = shape[-2], shape[-1]
    return (c, r) if transpose else (r, c)


def _check_inner(ctx, k_a: Optional[int], k_b: Optional[int]) -> None:
    if k_a is not None and k_b is not None and k_a != k_b:
        raise ctx.error(f"matrix size-incompatible: inner dimensions {k_a} and {k_b} differ "
                        f"(shapes {shape_str(ctx.input_shape(0))} and {shape_str(ctx.input_shape(1))})")


def _matmul_shape(ctx) -> list:
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    for i, s in enumerate((a, b)):
        if s is not None and len(s) != 2:
            raise ctx.error(f"MatMul input {i} must be a matrix (rank 2), got shape {shape_str(s)}")
    m, k_a = _matrix_dims(a, ctx.attr("transpose_a"))
    k_b, n = _matrix_dims(b, ctx.attr("transpose_b"))
    _check_inner(ctx, k_a, k_b)
    return [(m, n)]


def _batch_matmul_shape(ctx) -> list:
    x, y = ctx.input_shape(0), ctx.input_shape(1)
    for i, s in enumerate((x, y)):
        if s is not None and len(s) < 2:
            raise ctx.error(f"BatchMatMulV2 input {i} must have rank >= 2, got shape {shape_str(s)}")
    m, k_x = _matrix_dims(x, ctx.attr("adj_x"))
    k_y, n = _matrix_dims(y, ctx.attr("adj_y"))
    _check_inner(ctx, k_x, k_y)
    if x is None or y is None:
        return [None]
    try:
        batch = broadcast_shapes([x[:-2], y[:-2]])
    except ValueError:
        raise ctx.error(f"batch dimensions of {shape_str(x)} and {shape_str(y)} cannot be "
                        "broadcast together") from None
    return [tuple(batch) + (m, n)]


def _matmul_ref(ctx, a, b):
    if ctx.attrs["transpose_a"]:
        a = a.T
    if ctx.attrs["transpose_b"]:
        b = b.T
    return np.matmul(a, b)


def _batch_matmul_ref(ctx, x, y):
    if ctx.attrs["adj_x"]:
        x = np.swapaxes(x, -1, -2)
    if ctx.attrs["adj_y"]:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


_MATMUL_TYPES = "T: {float, i32, i64}"

register_op("MatMul", inputs=["a: T", "b: T"], outputs=["product: T"],
            attrs=["transpose_a: bool = false", "transpose_b: bool = false", _MATMUL_TYPES],
            shape=_matmul_shape, kernel=_matmul_ref, group="matmul",
            doc="Matrix product of two matrices, either optionally transposed.")

register_op("BatchMatMulV2", inputs=["x: T", "y: T"], outputs=["output: T"],
            attrs=["adj_x: bool = false", "adj_y: bool = false", _MATMUL_TYPES],
            shape=_batch_matmul_shape, kernel=_batch_matmul_ref, group="matmul",
            doc="Matrix products over the last two dims, with broadcasting batch dims.")


# --- BiasAdd ---------------------------------------------------------------------------------
def _channel_axis(data_format: str, rank: int) -> int:
    return 1 if data_format == "NCHW" else rank - 1


def _check_format(ctx_or_kc, data_format: str) -> None:
    if data_format not in ("NHWC", "NCHW"):
        raise ctx_or_kc.error(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")


def _bias_add_shape(ctx) -> list:
    fmt = ctx.attr("data_format")
    _check_format(ctx, fmt)
    value, bias = ctx.input_shape(0), ctx.input_shape(1)
    if bias is not None and len(bias) != 1:
        raise ctx.error(f"bias must be a vector (rank 1), got shape {shape_str(bias)}")
    if value is None:
        return [None]
    least = 3 if fmt == "NCHW" else 2
    if len(value) < least:
        raise ctx.error(f"value must have rank >= {least} for data_format {fmt}, "
                        f"got shape {shape_str(value)}")
    axis = _channel_axis(fmt, len(value))
    c, bc = value[axis], (bias[0] if bias is not None else None)
    if c is not None and bc is not None and c != bc:
        raise ctx.error(f"bias has {bc} elements but value {shape_str(value)} has {c} channels")
    out = list(value)
    out[axis] = c if c is not None else bc
    return [tuple(out)]


def _bias_add_ref(ctx, value, bias):
    axis = _channel_axis(ctx.attrs["data_format"], value.ndim)
    if value.shape[axis] != bias.shape[0]:
        raise ExecutionError(f"bias has {bias.shape[0]} elements but value has "
                             f"{value.shape[axis]} channels", ctx.node)
    shape = [1] * value.ndim
    shape[axis] = bias.shape[0]
    return value + bias.reshape(shape)


register_op("BiasAdd", inputs=["value: T", "bias: T"], outputs=["output: T"],
            attrs=["T: {numeric}", 'data_format: string = "NHWC"'],
            shape=_bias_add_shape, kernel=_bias_add_ref, group="elementwise",
            doc="Adds a 1-D bias along the channel dim (last for NHWC, 1 for NCHW).")


# --- Softmax / LogSoftmax --------------------------------------------------------------------
def _softmax_shape(ctx) -> list:
    s = ctx.input_shape(0)
    if s is not None and len(s) < 1:
        raise ctx.error("logits must have rank >= 1, got a scalar")
    return [s]


def _softmax_parts(x: np.ndarray):
    """(x - max, sum of exp(x - max) in float64) over the last axis; NaN propagates."""
    m = np.max(x, axis=-1, keepdims=True, initial=-np.inf).astype(x.dtype)
    shifted = x - m
    e = np.exp(shifted)
    return shifted, e, np.sum(e, axis=-1, keepdims=True, dtype=np.float64)


def _softmax_ref(ctx, logits):
    _, e, s = _softmax_parts(logits)
    return e / s.astype(logits.dtype)


def _log_softmax_ref(ctx, logits):
    shifted, _, s = _softmax_parts(logits)
    return shifted - np.log(s).astype(logits.dtype)


for _name, _ref, _log in (("Softmax", _softmax_ref, False), ("LogSoftmax", _log_softmax_ref, True)):
    register_op(_name, inputs=["logits: T"], outputs=[("logsoftmax" if _log else "softmax") + ": T"],
                attrs=["T: {float}"], shape=_softmax_shape, kernel=_ref, group="other",
                doc="Softmax over the last axis, computed with the row max subtracted.")
