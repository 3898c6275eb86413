"""BitCast (opset 26): the bytes of a tensor as another element type of the same width, as
flowc's (TensorFlow's) ``Bitcast``. bool, which TensorFlow's Bitcast refuses, is one byte
holding 0 or 1, so to and from bool it is a ``Cast`` (any nonzero byte reads as true)."""
from __future__ import annotations

import dsl as fl
from dsl.onnx.dtypes import flowc_dtype, onnx_type_name
from dsl.ops import apply_op


def lower_bitcast(ctx):
    x = ctx.input(0)
    to = ctx.attr("to")
    dtype = flowc_dtype(to)
    if dtype is None:
        raise ctx.error(f"'to' is {onnx_type_name(to)}, which flowc does not have")
    if dtype.itemsize != x.dtype.itemsize:
        raise ctx.error(f"BitCast needs types of one width: {x.dtype} has "
                        f"{8 * x.dtype.itemsize} bits, {dtype} {8 * dtype.itemsize}")
    if dtype is x.dtype:
        return apply_op("Identity", [x])
    if dtype.is_bool or x.dtype.is_bool:
        return fl.cast(x, dtype)
    return fl.bitcast(x, dtype)


LOWERINGS = {
    "BitCast": [(26, None, lower_bitcast)],
}
