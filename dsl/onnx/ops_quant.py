"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the
integer products QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

All are compositions of flowc ops the fuse pass joins into one kernel each:

- ``QuantizeLinear``: ``Cast(Round(x / scale) + zero_point, T)``. flowc's ``Round`` rounds half
  to even (ONNX's rule) and its float-to-integer ``Cast`` saturates to T's range, which is
  ONNX's saturation for every full-width integer type (a NaN becomes 0). The quotient is
  computed in x's float type (or ``precision``'s, opset 23), as the reference does.
- ``DequantizeLinear``: ``(Cast(x) - Cast(zero_point)) * scale`` in float32 (float64 for
  32-bit x, whose values float32 cannot hold), cast to the scale's type (or ``output_dtype``).
- Scales and zero points are per tensor (a scalar or one element), per axis (1-D, along
  ``axis``) or blocked (``block_size``: x's rank, each element covering ``block_size``
  consecutive entries along ``axis``, the last block possibly shorter; expanded with a
  ``GatherV2`` of ``i // block_size``, whose bounds check catches a scale with too few
  blocks).
- The integer products subtract the zero points in int32 and multiply exactly: MatMul in
  int32 (as the reference), convolution in float64 (every sum of 8-bit products is an exact
  float64 integer) cast back to int32. QLinear* then requantize in float64 by the float
  multiplier ``a_scale * b_scale / y_scale`` and round half to even, as the reference does.

The element type code is type-generic: zero points of any flowc integer type (the quantized
ranges are numpy's ranges of that type).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import dsl as fl
from dsl.onnx.dtypes import flowc_dtype
from dsl.onnx.ops_matmul import matmul
from dsl.onnx.ops_nn import conv
from dsl.onnx.values import (binary, index_const, index_scalar, normalize_axis, rank_of,
                             scalar, shape_i64, static_shape, unary)
from dsl.ops import apply_op


def _wider_float(*dtypes):
    """The float type numpy computes in: the operands' own when they share one (float16
    scales multiply in float16, as in the reference), else float64 if any is, else float32."""
    if all(d is dtypes[0] for d in dtypes) and dtypes[0].is_floating:
        return dtypes[0]
    return fl.float64 if any(d is fl.float64 for d in dtypes) else fl.float32


def _is_one_element(p) -> bool:
    s = static_shape(p)
    return s is not None and (len(s) == 0 or (len(s) == 1 and s[0] == 1))


def _reshape(x, dims):
    return apply_op("Reshape", [x, index_const(dims)])


def broadcast_param(ctx, p, x, axis: int, block_size: int = 0):
    """A scale or zero point ``p`` shaped to broadcast against ``x``: per tensor (a scalar or
    one element), per axis (1-D along ``axis``) or blocked (``block_size`` > 0)."""
    if _is_one_element(p):
        return _reshape(p, [])
    rank = rank_of(x, ctx)
    axis = normalize_axis(axis, rank, ctx)
    if block_size:
        if block_size < 0:
            raise ctx.error(f"block_size must be positive, got {block_size}")
        if rank_of(p, ctx) != rank:
            raise ctx.error(f"a blocked scale or zero point must have x's rank {rank}, got "
                            f"shape {static_shape(p)}")
        size = static_shape(x)[axis]
        blocks = static_shape(p)[axis]
        if size is not None and blocks is not None and blocks != -(-size // block_size):
            raise ctx.error(f"{size} entries along axis {axis} in blocks of {block_size} need "
                            f"{-(-size // block_size)} scales, got {blocks}")
        if size is not None:
            index = fl.constant(np.arange(size, dtype=np.int64) // block_size, dtype=fl.int64)
        else:
            n = apply_op("GatherV2", [shape_i64(x), index_scalar(axis), index_scalar(0)])
            index = binary("FloorDiv", apply_op("Range", [index_scalar(0), n, index_scalar(1)]),
                           index_scalar(block_size))
        return apply_op("GatherV2", [p, index, index_scalar(axis)])
    if rank_of(p, ctx) != 1:
        raise ctx.error(f"a per-axis scale or zero point must be 1-D, got shape "
                        f"{static_shape(p)} (set block_size for blocked quantization)")
    dims = [1] * rank
    dims[axis] = -1
    return _reshape(p, dims)


def _quantized_type(ctx, zero_point, attr_dtype: Optional[int]):
    """The output type: the zero point's, else ``output_dtype``, else uint8."""
    if zero_point is not None:
        dtype = zero_point.dtype
        if attr_dtype and flowc_dtype(attr_dtype) is not dtype:
            raise ctx.error(f"output_dtype {attr_dtype} does not match the zero point's type "
                            f"{dtype}")
    elif attr_dtype:
        dtype = flowc_dtype(attr_dtype)
        if dtype is None:
            raise ctx.error(f"output_dtype {attr_dtype} is not a flowc element type")
    else:
        dtype = fl.uint8
    if not dtype.is_integer:
        raise ctx.error(f"quantizing to {dtype} is not supported (integer types only)")
    return dtype


def quantize(x, scale, zero_point, dtype, compute=None):
    """``Cast(Round(x / scale) + zero_point, dtype)`` (saturating), computed in ``compute``
    (default: the wider of x's and the scale's float types)."""
    compute = compute or _wider_float(x.dtype, scale.dtype)
    q = unary("Round", binary("RealDiv", fl.cast(x, compute), fl.cast(scale, compute)))
    if zero_point is not None:
        q = binary("AddV2", q, fl.cast(zero_point, compute))
    return fl.cast(q, dtype)


def lower_quantize_linear(ctx):
    x, scale, zp = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    dtype = _quantized_type(ctx, zp, ctx.attr("output_dtype", 0))
    axis, block = int(ctx.attr("axis", 1)), int(ctx.attr("block_size", 0))
    scale = broadcast_param(ctx, scale, x, axis, block)
    if zp is not None:
        zp = broadcast_param(ctx, zp, x, axis, block)
    compute = None
    precision = ctx.attr("precision", 0)
    if precision:
        compute = flowc_dtype(precision)
        if compute is None or not compute.is_floating:
            raise ctx.error(f"precision {precision} is not a flowc float type")
    return quantize(x, scale, zp, dtype, compute)


def dequantize(x, scale, zero_point, dtype):
    """``(x - zero_point) * scale`` as ``dtype``, computed as the reference does."""
    compute = _wider_float(fl.float64 if x.dtype.itemsize >= 4 else fl.float32, scale.dtype)
    d = fl.cast(x, compute)
    if zero_point is not None:
        d = binary("Sub", d, fl.cast(zero_point, compute))
    return fl.cast(binary("Mul", d, fl.cast(scale, compute)), dtype)


def lower_dequantize_linear(ctx):
    x, scale, zp = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    if not x.dtype.is_integer:
        raise ctx.error(f"dequantizing {x.dtype} is not supported (integer types only)")
    if zp is not None and zp.dtype is not x.dtype:
        raise ctx.error(f"the zero point's type {zp.dtype} is not x's type {x.dtype}")
    out = ctx.attr("output_dtype", 0)
    dtype = scale.dtype if not out else flowc_dtype(out)
    if dtype is None:
        raise ctx.error(f"output_dtype {out} is not a flowc element type")
    axis, block = int(ctx.attr("axis", 1)), int(ctx.attr("block_size", 0))
    scale = broadcast_param(ctx, scale, x, axis, block)
    if zp is not None:
        zp = broadcast_param(ctx, zp, x, axis, block)
    return dequantize(x, scale, zp, dtype)


def lower_dynamic_quantize_linear(ctx):
    """uint8 quantization over [min(0, min x), max(0, max x)]: the scale, the zero point
    (rounded, within [0, 255]) and x quantized by them."""
    x = ctx.input(0)
    f = fl.float32
    xf = fl.cast(x, f)
    flat = _reshape(xf, [-1])
    hi = binary("Maximum", apply_op("Max", [flat, index_scalar(0)]), scalar(0, xf))
    lo = binary("Minimum", apply_op("Min", [flat, index_scalar(0)]), scalar(0, xf))
    span = fl.where(binary("Equal", hi, lo), scalar(1, xf), binary("Sub", hi, lo))
    y_scale = binary("RealDiv", span, scalar(255, xf))
    zp = binary("Sub", scalar(0, xf), binary("RealDiv", lo, y_scale))
    zp = unary("Round", binary("Minimum", binary("Maximum", zp, scalar(0, xf)), scalar(255, xf)))
    y = fl.cast(binary("AddV2", unary("Round", binary("RealDiv", xf, y_scale)), zp), fl.uint8)
    return [y, fl.cast(y_scale, x.dtype), fl.cast(zp, fl.uint8)]


# --- integer products --------------------------------------------------------------------------
def _minus_zero_point(x, zp, zp_shaped=None):
    """``x - zp`` in int32 (zp already shaped for broadcasting as ``zp_shaped``)."""
    x32 = fl.cast(x, fl.int32)
    if zp is None:
        return x32
    return binary("Sub", x32, fl.cast(zp_shaped if zp_shaped is not None else zp, fl.int32))


def _row_param(ctx, p, a):
    """A per-tensor or per-row ([M]) parameter of matmul operand ``a`` ([..., M, K])."""
    if _is_one_element(p):
        return _reshape(p, [])
    if rank_of(p, ctx) != 1:
        raise ctx.error(f"a per-row parameter must be 1-D, got shape {static_shape(p)}")
    return _reshape(p, [-1, 1])


def _column_param(ctx, p):
    """A per-tensor or per-column ([N]) parameter of matmul operand ``b`` ([..., K, N])."""
    if _is_one_element(p):
        return _reshape(p, [])
    if rank_of(p, ctx) != 1:
        raise ctx.error(f"a per-column parameter must be 1-D, got shape {static_shape(p)}")
    return p


def _integer_matmul(ctx, a, b, a_zp, b_zp):
    if rank_of(a, ctx) < 2 or rank_of(b, ctx) < 2:
        a_zp = None if a_zp is None else _reshape(a_zp, [])
        b_zp = None if b_zp is None else _reshape(b_zp, [])
    else:
        a_zp = None if a_zp is None else _row_param(ctx, a_zp, a)
        b_zp = None if b_zp is None else _column_param(ctx, b_zp)
    return matmul(_minus_zero_point(a, a_zp), _minus_zero_point(b, b_zp), ctx)


def lower_matmul_integer(ctx):
    return _integer_matmul(ctx, ctx.input(0), ctx.input(1), ctx.optional_input(2),
                           ctx.optional_input(3))


def _requantize(acc, multiplier, y_zp, dtype):
    """``Cast(Round(acc * multiplier + y_zp), dtype)`` in float64 (saturating)."""
    r = binary("Mul", fl.cast(acc, fl.float64), fl.cast(multiplier, fl.float64))
    if y_zp is not None:
        r = binary("AddV2", r, fl.cast(y_zp, fl.float64))
    return fl.cast(unary("Round", r), dtype)


def lower_qlinear_matmul(ctx):
    a, a_scale, a_zp = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    b, b_scale, b_zp = ctx.input(3), ctx.input(4), ctx.optional_input(5)
    y_scale, y_zp = ctx.input(6), ctx.optional_input(7)
    acc = _integer_matmul(ctx, a, b, a_zp, b_zp)
    matrices = rank_of(a, ctx) >= 2 and rank_of(b, ctx) >= 2
    a_scale = _row_param(ctx, a_scale, a) if matrices else _reshape(a_scale, [])
    b_scale = _column_param(ctx, b_scale) if matrices else _reshape(b_scale, [])
    y_scale = _column_param(ctx, y_scale) if matrices else _reshape(y_scale, [])
    f = _wider_float(a_scale.dtype, b_scale.dtype, y_scale.dtype)
    multiplier = binary("RealDiv", binary("Mul", fl.cast(a_scale, f), fl.cast(b_scale, f)),
                        fl.cast(y_scale, f))
    if y_zp is not None:
        y_zp = _column_param(ctx, y_zp) if matrices else _reshape(y_zp, [])
    return _requantize(acc, multiplier, y_zp, y_zp.dtype if y_zp is not None else a.dtype)


def _channel_param(ctx, p, rank: int, channel_dim: int):
    """A per-tensor or per-output-channel ([M]) parameter broadcast along ``channel_dim``."""
    if _is_one_element(p):
        return _reshape(p, [])
    if rank_of(p, ctx) != 1:
        raise ctx.error(f"a per-channel parameter must be 1-D, got shape {static_shape(p)}")
    dims = [1] * rank
    dims[channel_dim] = -1
    return _reshape(p, dims)


def _integer_conv(ctx, x, w, x_zp, w_zp, bias=None):
    """``conv(x - x_zp, w - w_zp) + bias`` exactly, as int32."""
    rank = rank_of(x, ctx)
    if x_zp is not None:
        if not _is_one_element(x_zp):
            raise ctx.error("x_zero_point must be a scalar (per-tensor)")
        x_zp = _reshape(x_zp, [])
    xs = fl.cast(_minus_zero_point(x, x_zp), fl.float64)
    w_zp = None if w_zp is None else _channel_param(ctx, w_zp, rank, 0)
    ws = fl.cast(_minus_zero_point(w, w_zp), fl.float64)
    bias = None if bias is None else fl.cast(bias, fl.float64)
    return fl.cast(conv(ctx, xs, ws, bias), fl.int32)


def lower_conv_integer(ctx):
    return _integer_conv(ctx, ctx.input(0), ctx.input(1), ctx.optional_input(2),
                         ctx.optional_input(3))


def lower_qlinear_conv(ctx):
    x, x_scale, x_zp = ctx.input(0), ctx.input(1), ctx.optional_input(2)
    w, w_scale, w_zp = ctx.input(3), ctx.input(4), ctx.optional_input(5)
    y_scale, y_zp = ctx.input(6), ctx.optional_input(7)
    acc = _integer_conv(ctx, x, w, x_zp, w_zp, ctx.optional_input(8))
    rank = rank_of(x, ctx)
    w_scale = _channel_param(ctx, w_scale, rank, 1)
    f = _wider_float(x_scale.dtype, w_scale.dtype, y_scale.dtype)
    multiplier = binary("RealDiv", binary("Mul", fl.cast(_reshape(x_scale, []), f),
                                          fl.cast(w_scale, f)),
                        fl.cast(_reshape(y_scale, []), f))
    if y_zp is not None:
        y_zp = _reshape(y_zp, [])
    return _requantize(acc, multiplier, y_zp, y_zp.dtype if y_zp is not None else x.dtype)


LOWERINGS = {
    "QuantizeLinear": [(10, None, lower_quantize_linear)],
    "DequantizeLinear": [(10, None, lower_dequantize_linear)],
    "DynamicQuantizeLinear": [(11, None, lower_dynamic_quantize_linear)],
    "MatMulInteger": [(10, None, lower_matmul_integer)],
    "ConvInteger": [(10, None, lower_conv_integer)],
    "QLinearMatMul": [(10, None, lower_qlinear_matmul)],
    "QLinearConv": [(10, None, lower_qlinear_conv)],
}
