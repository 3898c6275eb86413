"""SpaceToBatchND and BatchToSpaceND, as TensorFlow defines them (``tf.nn.convolution`` and
Keras' dilated Conv1D/Conv2D wrap an undilated convolution between them).

SpaceToBatchND(input, block_shape [M], paddings [M, 2]): the M spatial dims after the batch
are zero-padded, cut into blocks of ``block_shape``, and each offset inside a block becomes a
new batch entry: output[(o * batch + b), i_1, ..., i_M, ...] = padded[b, i_1 * s_1 + o_1, ...,
i_M * s_M + o_M, ...] where o is the row-major index of (o_1, ..., o_M).

BatchToSpaceND(input, block_shape [M], crops [M, 2]) is its inverse, then ``crops`` are cut
from the start and end of each spatial dim.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import _check_fits, _reference


def _block_and_pairs(ctx, what: str):
    """(block_shape, [(start, end)] per spatial dim) when both are constants, else None;
    checks the shapes of the two inputs against each other."""
    bs, ps = ctx.input_shape(1), ctx.input_shape(2)
    if bs is not None and len(bs) != 1:
        raise ctx.error(f"block_shape must be one-dimensional, got shape {shape_str(bs)}")
    if ps is not None and (len(ps) != 2 or ps[1] not in (None, 2)):
        raise ctx.error(f"{what} must be of shape [M, 2], got shape {shape_str(ps)}")
    if bs is not None and ps is not None and None not in (bs[0], ps[0]) and bs[0] != ps[0]:
        raise ctx.error(f"block_shape of shape {shape_str(bs)} and {what} of shape "
                        f"{shape_str(ps)} must agree on M")
    block, pairs = ctx.input_value(1), ctx.input_value(2)
    m = bs[0] if bs is not None else ps[0] if ps is not None else None
    if block is None or pairs is None:
        return m, None, None
    block = [int(v) for v in np.reshape(block, -1)]
    flat = [int(v) for v in np.reshape(pairs, -1)]
    pairs = list(zip(flat[0::2], flat[1::2]))
    _validate(block, pairs, what, ctx.error)
    return len(block), block, pairs


def _validate(block: Sequence[int], pairs: Sequence, what: str, error) -> None:
    for s in block:
        if s < 1:
            raise error(f"All values in block_shape must be positive, got value, {s} instead.")
    for a, b in pairs:
        if a < 0 or b < 0:
            raise error(f"All values in {what} must be non-negative")


def _s2b_shape(ctx):
    s = ctx.input_shape(0)
    m, block, pairs = _block_and_pairs(ctx, "paddings")
    if s is None:
        return [None]
    if m is not None and len(s) < m + 1:
        raise ctx.error(f"input rank should be >= {m + 1} instead of {len(s)}")
    if block is None:
        return [(None,) * len(s) if m is None else (None,) * (m + 1) + tuple(s[m + 1:])]
    dims: List[Optional[int]] = [None if s[0] is None else s[0] * int(np.prod(block))]
    for k, (step, (a, b)) in enumerate(zip(block, pairs)):
        d = s[k + 1]
        if d is not None:
            if (d + a + b) % step:
                raise ctx.error(f"padded_shape[{k}]={d + a + b} is not divisible by "
                                f"block_shape[{k}]={step}")
            d = (d + a + b) // step
        dims.append(d)
    return [tuple(dims) + tuple(s[m + 1:])]


def _b2s_shape(ctx):
    s = ctx.input_shape(0)
    m, block, pairs = _block_and_pairs(ctx, "crops")
    if s is None:
        return [None]
    if m is not None and len(s) < m + 1:
        raise ctx.error(f"input rank should be >= {m + 1} instead of {len(s)}")
    if block is None:
        return [(None,) * len(s) if m is None else (None,) * (m + 1) + tuple(s[m + 1:])]
    n = int(np.prod(block))
    if s[0] is not None and s[0] % n:
        raise ctx.error(f"Input batch dimension ({s[0]}) is not divisible by product of block "
                        f"sizes ({n})")
    dims: List[Optional[int]] = [None if s[0] is None else s[0] // n]
    for k, (step, (a, b)) in enumerate(zip(block, pairs)):
        d = s[k + 1]
        if d is not None:
            if d * step - a - b < 0:
                raise ctx.error(f"Negative output dimension size caused by overly large crop "
                                f"values: cropped size {d * step - a - b}")
            d = d * step - a - b
        dims.append(d)
    return [tuple(dims) + tuple(s[m + 1:])]


def _arrays(x: np.ndarray, block: np.ndarray, pairs: np.ndarray, what: str):
    if block.ndim != 1:
        raise ValueError(f"block_shape must be one-dimensional, got shape {list(block.shape)}")
    m = block.shape[0]
    if pairs.shape != (m, 2):
        raise ValueError(f"{what} should have shape [{m}, 2] instead of {list(pairs.shape)}")
    if x.ndim < m + 1:
        raise ValueError(f"input rank should be >= {m + 1} instead of {x.ndim}")
    steps = [int(v) for v in block]
    pairs_ = [(int(a), int(b)) for a, b in pairs]
    _validate(steps, pairs_, what, ValueError)
    return m, steps, pairs_


@_reference
def _s2b_kernel(ctx, x, block, paddings):
    m, steps, pairs = _arrays(x, block, paddings, "paddings")
    padded = np.pad(x, [(0, 0)] + pairs + [(0, 0)] * (x.ndim - m - 1))
    batch, rest = x.shape[0], x.shape[m + 1:]
    shape = [batch]
    for k, step in enumerate(steps):
        d = padded.shape[k + 1]
        if d % step:
            raise ValueError(f"padded_shape[{k}]={d} is not divisible by block_shape[{k}]={step}")
        shape += [d // step, step]
    _check_fits([batch * int(np.prod(steps))] + shape[1::2] + list(rest), x.dtype.itemsize)
    y = padded.reshape(shape + list(rest))
    perm = [2 + 2 * k for k in range(m)] + [0] + [1 + 2 * k for k in range(m)] + \
        list(range(1 + 2 * m, y.ndim))
    return np.ascontiguousarray(y.transpose(perm)).reshape(
        [batch * int(np.prod(steps))] + shape[1::2] + list(rest))


@_reference
def _b2s_kernel(ctx, x, block, crops):
    m, steps, pairs = _arrays(x, block, crops, "crops")
    n = int(np.prod(steps))
    if x.shape[0] % n:
        raise ValueError(f"Input batch dimension ({x.shape[0]}) is not divisible by product "
                         f"of block sizes ({n})")
    batch, spatial, rest = x.shape[0] // n, list(x.shape[1:m + 1]), list(x.shape[m + 1:])
    for k, (step, (a, b)) in enumerate(zip(steps, pairs)):
        if spatial[k] * step - a - b < 0:
            raise ValueError(f"Negative output dimension size caused by overly large crop "
                             f"values: cropped size {spatial[k] * step - a - b}")
    y = x.reshape(steps + [batch] + spatial + rest)
    perm = [m] + [i for k in range(m) for i in (m + 1 + k, k)] + list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm).reshape([batch] + [d * s for d, s in zip(spatial, steps)] + rest)
    index = tuple([slice(None)] + [slice(a, d * s - b) for d, s, (a, b)
                                   in zip(spatial, steps, pairs)])
    return np.ascontiguousarray(y[index])


_ATTRS = ["T: {all}", "Tblock_shape: {i32, i64} = i32"]

register_op("SpaceToBatchND", inputs=["input: T", "block_shape: Tblock_shape",
                                      "paddings: Tpaddings"],
            outputs=["output: T"], attrs=_ATTRS + ["Tpaddings: {i32, i64} = i32"],
            shape=_s2b_shape, kernel=_s2b_kernel, group="movement", half_native=True,
            doc="Zero-pads the spatial dims and moves blocks of them into the batch.")

register_op("BatchToSpaceND", inputs=["input: T", "block_shape: Tblock_shape",
                                      "crops: Tcrops"],
            outputs=["output: T"], attrs=_ATTRS + ["Tcrops: {i32, i64} = i32"],
            shape=_b2s_shape, kernel=_b2s_kernel, group="movement", half_native=True,
            doc="Moves batch entries back into blocks of the spatial dims, then crops them.")
