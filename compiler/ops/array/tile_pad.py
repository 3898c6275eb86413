"""Tile, Pad: the input repeated, or surrounded by zeros."""
from __future__ import annotations

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import (_check_fits, _partial_vector, _reference, _vector_length,
                                       _vector_value)


def _tile_shape(ctx):
    s = ctx.input_shape(0)
    n = _vector_length(ctx, 1)
    if s is not None and n is not None and n != len(s):
        raise ctx.error(f"Expected multiples argument to be a vector of length {len(s)} but got "
                        f"length {n}")
    rank = len(s) if s is not None else n
    multiples = _partial_vector(ctx, 1)
    if rank is None:
        return [None]
    if multiples is None:
        return [(None,) * rank]
    for k, m in enumerate(multiples):
        if m is not None and m < 0:
            raise ctx.error(f"Expected multiples[{k}] >= 0, but got {m}")
    dims = (None,) * rank if s is None else s
    return [tuple(0 if m == 0 else None if d is None or m is None else d * m
                  for d, m in zip(dims, multiples))]


@_reference
def _tile_kernel(ctx, x, multiples):
    m = [int(v) for v in multiples.reshape(-1)]
    if multiples.ndim != 1 or len(m) != x.ndim:
        raise ValueError(f"Expected multiples argument to be a vector of length {x.ndim} but got "
                         f"shape {list(multiples.shape)}")
    for k, v in enumerate(m):
        if v < 0:
            raise ValueError(f"Expected multiples[{k}] >= 0, but got {v}")
    _check_fits([f for pair in zip(x.shape, m) for f in pair], x.dtype.itemsize)
    return np.tile(x, m) if x.ndim else x.copy()


register_op("Tile", inputs=["input: T", "multiples: Tmultiples"], outputs=["output: T"],
            attrs=["T: {all}", "Tmultiples: {i32, i64} = i32"], shape=_tile_shape,
            kernel=_tile_kernel, group="movement",
            doc="Repeats the input multiples[k] times along each dim k.", half_native=True)


def _pad_shape(ctx):
    s = ctx.input_shape(0)
    ps = ctx.input_shape(1)
    if ps is not None and (len(ps) != 2 or ps[1] not in (None, 2)):
        raise ctx.error(f"paddings must be a matrix with 2 columns, got shape {shape_str(ps)}")
    rows = None if ps is None else ps[0]
    if s is not None and rows is not None and rows != len(s):
        raise ctx.error(f"The first dimension of paddings must be the rank of inputs "
                        f"{shape_str(ps)}, input shape {shape_str(s)}")
    rank = len(s) if s is not None else rows
    paddings = _vector_value(ctx, 1)
    if rank is None:
        return [None]
    if paddings is None:
        return [(None,) * rank]
    pairs = list(zip(paddings[0::2], paddings[1::2]))
    for before, after in pairs:
        if before < 0 or after < 0:
            raise ctx.error(f"Paddings must be non-negative: {before} {after}")
    dims = (None,) * rank if s is None else s
    return [tuple(None if d is None else d + a + b for d, (a, b) in zip(dims, pairs))]


@_reference
def _pad_kernel(ctx, x, paddings):
    if paddings.shape != (x.ndim, 2):
        raise ValueError(f"paddings must be a matrix of shape [{x.ndim}, 2], got "
                         f"{list(paddings.shape)}")
    pairs = [(int(a), int(b)) for a, b in paddings]
    for before, after in pairs:
        if before < 0 or after < 0:
            raise ValueError(f"Paddings must be non-negative: {before} {after}")
    _check_fits([d + a + b for d, (a, b) in zip(x.shape, pairs)], x.dtype.itemsize)
    return np.pad(x, pairs) if x.ndim else x.copy()


register_op("Pad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: {all}", "Tpaddings: {i32, i64} = i32"], shape=_pad_shape,
            kernel=_pad_kernel, group="movement", half_native=True,
            doc="Pads with zeros: paddings[k] = [before, after] elements around dim k.")
