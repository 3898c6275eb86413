"""TensorFlow's legacy ops that TF1 programs and GraphDefs still name: ``Select`` (what
``tf.where`` v1 and ``tf.compat.v1.where`` make) and ``Gather`` (the gather before
``GatherV2``, always along axis 0).

``Select(condition, t, e)`` does not broadcast as ``SelectV2`` does: ``t`` and ``e`` have the
same shape, and ``condition`` is a scalar (picks all of ``t`` or all of ``e``), has their shape
(picks elements), or is a vector as long as their first dim (picks rows).
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import merge_shapes, shape_str
from compiler.ops.array.common import _contiguous


# --- Select ------------------------------------------------------------------------------------
def select_mode(cond_shape, t_shape) -> str:
    """How a condition of ``cond_shape`` picks from ``t``: ``scalar``, ``rows`` or
    ``elements`` (None where the ranks are not known yet); ValueError for a bad rank."""
    if cond_shape is None or t_shape is None:
        return None
    if len(cond_shape) == 0:
        return "scalar"
    if len(cond_shape) == 1 and len(t_shape) > 1:
        return "rows"
    if len(cond_shape) != len(t_shape):
        raise ValueError(f"condition of shape {shape_str(cond_shape)} must be a scalar, a "
                         f"vector, or have the shape of t and e {shape_str(t_shape)}")
    return "elements"


def _select_shape(ctx):
    c, t, e = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
    try:
        out = merge_shapes(t, e)
    except ValueError:
        raise ctx.error(f"t and e must have the same shape: {shape_str(t)} and "
                        f"{shape_str(e)}") from None
    try:
        mode = select_mode(c, out)
    except ValueError as err:
        raise ctx.error(str(err)) from None
    if mode == "rows":
        if c[0] is not None and out[0] is not None and c[0] != out[0]:
            raise ctx.error(f"a vector condition must have one element per row of t and e: "
                            f"{shape_str(c)} against {shape_str(out)}")
        if out[0] is None:
            out = (c[0],) + tuple(out[1:])
    elif mode == "elements":
        try:
            out = merge_shapes(out, c)
        except ValueError:
            raise ctx.error(f"condition, t and e must have the same shape: {shape_str(c)} "
                            f"against {shape_str(out)}") from None
    return [out]


def _select_kernel(ctx, c, t, e):
    if t.shape != e.shape:
        raise ExecutionError(f"t and e must have the same shape: {list(t.shape)} and "
                             f"{list(e.shape)}", ctx.node)
    try:
        mode = select_mode(c.shape, t.shape)
    except ValueError as err:
        raise ExecutionError(str(err), ctx.node) from None
    if mode == "scalar":
        return (t if bool(c) else e).copy()
    if mode == "rows":
        if c.shape[0] != t.shape[0]:
            raise ExecutionError(f"a vector condition must have one element per row of t and e: "
                                 f"{list(c.shape)} against {list(t.shape)}", ctx.node)
        return np.where(c.reshape((-1,) + (1,) * (t.ndim - 1)), t, e)
    if c.shape != t.shape:
        raise ExecutionError(f"condition, t and e must have the same shape: {list(c.shape)} "
                             f"against {list(t.shape)}", ctx.node)
    return np.where(c, t, e)


register_op("Select", inputs=["condition: bool", "t: T", "e: T"], outputs=["output: T"],
            attrs=["T: {all}"], shape=_select_shape, kernel=_select_kernel,
            doc="t where condition else e, with no broadcasting: a scalar condition picks all "
                "of t or e, a vector one rows, one of their shape elements.")


# --- Gather ------------------------------------------------------------------------------------
def _gather_shape(ctx):
    p, ind = ctx.input_shape(0), ctx.input_shape(1)
    if p is not None and len(p) == 0:
        raise ctx.error("params must be at least a vector")
    if p is None or ind is None:
        return [None]
    return [tuple(ind) + tuple(p[1:])]


def _gather_kernel(ctx, params, indices):
    if params.ndim == 0:
        raise ExecutionError("params must be at least a vector", ctx.node)
    limit = params.shape[0]
    flat = indices.reshape(-1).astype(np.int64)
    bad = np.nonzero((flat < 0) | (flat >= limit))[0]
    if bad.size:
        k = int(bad[0])
        where = ",".join(str(int(i)) for i in np.unravel_index(k, indices.shape))
        raise ExecutionError(f"indices[{where}] = {flat[k]} is not in [0, {limit})", ctx.node)
    return _contiguous(params[flat]).reshape(indices.shape + params.shape[1:])


register_op("Gather", inputs=["params: Tparams", "indices: Tindices"], outputs=["output: Tparams"],
            attrs=["validate_indices: bool = true", "Tparams: {all}", "Tindices: {i32, i64}"],
            shape=_gather_shape, kernel=_gather_kernel, group="movement",
            doc="Rows of params at indices (GatherV2 along axis 0; out of range: an error, "
                "whatever validate_indices says).")
