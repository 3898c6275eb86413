"""GatherV2: slices of params along an axis at the given indices."""
from __future__ import annotations

import math
from typing import Sequence, Tuple

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ops.array.common import (_check_scalar_input, _contiguous, _merged_shape,
                                       _normalize_axis, _reference, _scalar_value)


def _gather_dims(params_rank: int, indices_rank: int, axis: int,
                 batch_dims: int) -> Tuple[int, int]:
    """Normalized (axis, batch_dims) for GatherV2, with TensorFlow's range checks."""
    bd = batch_dims + indices_rank if batch_dims < 0 else batch_dims
    if not 0 <= bd <= indices_rank:
        raise ValueError(f"Expected batch_dims in the range [{-indices_rank}, {indices_rank}], "
                         f"but got {batch_dims}")
    a = _normalize_axis(axis, params_rank)
    if a < bd:
        raise ValueError(f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis})")
    return a, bd


def _gather_shape(ctx):
    _check_scalar_input(ctx, 2)
    p, ind = ctx.input_shape(0), ctx.input_shape(1)
    axis = _scalar_value(ctx, 2)
    if p is None or ind is None:
        return [None]
    if axis is None:
        return [(None,) * max(len(p) + len(ind) - 1 - max(ctx.attr("batch_dims"), 0), 0)]
    a, bd = _gather_dims(len(p), len(ind), axis, ctx.attr("batch_dims"))
    batch = _merged_shape(ctx, [p[:bd], ind[:bd]], "params and indices batch dims must match")
    return [batch + p[bd:a] + ind[bd:] + p[a + 1:]]


def _index_text(flat: int, shape: Sequence[int]) -> str:
    return "indices[" + ",".join(str(int(i)) for i in np.unravel_index(flat, shape)) + "]"


@_reference
def _gather_kernel(ctx, params, indices, axis):
    if axis.size != 1:
        raise ValueError(f"axis must be a scalar, got shape {list(axis.shape)}")
    a, bd = _gather_dims(params.ndim, indices.ndim, int(axis.reshape(-1)[0]),
                         ctx.attrs["batch_dims"])
    if params.shape[:bd] != indices.shape[:bd]:
        raise ValueError(f"params.shape[:{bd}] {list(params.shape[:bd])} should equal "
                         f"indices.shape[:{bd}] {list(indices.shape[:bd])}")
    limit = params.shape[a]
    flat = indices.reshape(-1).astype(np.int64)
    bad = np.nonzero((flat < 0) | (flat >= limit))[0]
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"{_index_text(k, indices.shape)} = {flat[k]} is not in [0, {limit})")
    batch = math.prod(params.shape[:bd])
    outer = math.prod(params.shape[bd:a])
    inner = math.prod(params.shape[a + 1:])
    p = params.reshape(batch, outer, limit, inner)
    ids = flat.reshape(batch, -1) if batch else flat.reshape(0, 0)
    rows = p[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], ids[:, None, :]]
    out_shape = params.shape[:a] + indices.shape[bd:] + params.shape[a + 1:]
    return _contiguous(rows).reshape(out_shape)


register_op("GatherV2", inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
            outputs=["output: Tparams"],
            attrs=["batch_dims: int = 0", "Tparams: {all}", "Tindices: {i32, i64}",
                   "Taxis: {i32, i64}"],
            shape=_gather_shape, kernel=_gather_kernel, group="movement", half_native=True,
            doc="Slices of ``params`` along ``axis`` at ``indices`` (out of range: an error).")
