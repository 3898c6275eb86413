"""Bitcast, as TensorFlow defines it: the bytes of a tensor read as another element type.

- Types of one size: the shape stays.
- To a smaller type (``sizeof(T) = k * sizeof(type)``): a last dim of ``k`` is added.
- To a larger type (``k * sizeof(T) = sizeof(type)``): the last dim must be ``k``, and goes.

bool is refused, as TensorFlow does (its bytes are not a number's). The C lowering copies the
bytes (``compiler/codegen/c_ops/bitcast.py``); f16/bf16 are taken as stored (``half_native``:
computed in f32 they would not be their bits).
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from runtime.dtypes import DType


def bitcast_dims(shape, src: DType, dst: DType, fail):
    """The output shape (dims may be None) of bitcasting ``shape`` from ``src`` to ``dst``;
    ``fail(message)`` returns the exception to raise."""
    a, b = src.itemsize, dst.itemsize
    if a == b or shape is None:
        return shape
    if a > b:
        return tuple(shape) + (a // b,)
    if len(shape) == 0:
        raise fail(f"Cannot bitcast from {src} to {dst}: a scalar has no last dim of "
                   f"{b // a} elements")
    if shape[-1] is not None and shape[-1] != b // a:
        raise fail(f"Cannot bitcast from {src} to {dst}: the last dim of {shape_str(shape)} "
                   f"must be {b // a}")
    return tuple(shape[:-1])


def _bitcast_shape(ctx) -> list:
    src, dst = ctx.attr("T"), ctx.attr("type")
    return [bitcast_dims(ctx.input_shape(0), src, dst, ctx.error)]


def _view_type(dtype: DType) -> np.dtype:
    """The numpy type whose bytes are ``dtype``'s (bfloat16: uint16)."""
    try:
        return dtype.np
    except TypeError:
        return np.dtype(f"u{dtype.itemsize}")


def _bitcast_ref(ctx, x: np.ndarray) -> np.ndarray:
    src, dst = ctx.attrs["T"], ctx.attrs["type"]
    shape = bitcast_dims(x.shape, src, dst, lambda m: ExecutionError(m, ctx.node))
    raw = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    return raw.view(_view_type(dst)).reshape(shape)


register_op("Bitcast", inputs=["input: T"], outputs=["output: type"],
            attrs=["T: {numeric}", "type: {numeric}"], shape=_bitcast_shape,
            kernel=_bitcast_ref, group="movement", half_native=True,
            doc="The input's bytes as elements of ``type`` (a last dim added or removed when "
                "the sizes differ).")
