"""Selection ops, as TensorFlow defines them: Where (the coordinates of true / nonzero
elements), TopKV2 (the k largest entries of each last-axis row) and the Unique family
(Unique, UniqueV2, UniqueWithCounts, UniqueWithCountsV2: distinct elements, or slices along
an axis, in the order they first occur).

- Where and the Unique ops have output sizes known only at run time: their C kernels count
  first, then allocate (``compiler/codegen/c_ops/selection.py``).
- TopKV2 orders by value, larger first; equal values keep their index order (lower index
  first), and a NaN counts as larger than every number (numpy's sort order, reversed). ``k``
  outside [0, last dim] is an error.
- Unique compares elements with ``==`` (so 0.0 and -0.0 are one value and every NaN is a
  value of its own, as TensorFlow's hash map does).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType, shape_str


# --- Where -------------------------------------------------------------------------------------
def _where_shape(ctx) -> List[TensorType]:
    s = ctx.input_shape(0)
    return [TensorType(ctx.output_dtype(0), (None, None if s is None else len(s)))]


def _where_ref(ctx, x: np.ndarray) -> np.ndarray:
    if x.ndim == 0:                          # one row with no coordinates, or none
        return np.zeros((1 if x else 0, 0), np.int64)
    coords = np.nonzero(x)
    return np.stack(coords, axis=1).astype(np.int64).reshape(-1, x.ndim)


register_op("Where", inputs=["input: T"], outputs=["index: i64"], attrs=["T: {all} = bool"],
            shape=_where_shape, kernel=_where_ref, group="other",
            doc="Coordinates of the true (nonzero) elements, one row each, in row-major order.")


# --- TopKV2 ------------------------------------------------------------------------------------
def _topk_shape(ctx) -> list:
    s, ks = ctx.input_shape(0), ctx.input_shape(1)
    if ks is not None and len(ks) != 0:
        raise ctx.error(f"k must be a scalar, got shape {shape_str(ks)}")
    if s is not None and len(s) < 1:
        raise ctx.error("input must have rank >= 1, got a scalar")
    value = ctx.input_value(1)
    k = None if value is None else int(np.reshape(value, -1)[0])
    if k is not None:
        if k < 0:
            raise ctx.error(f"Need k >= 0, got {k}")
        if s is not None and s[-1] is not None and s[-1] < k:
            raise ctx.error(f"input must have at least k={k} columns, got {s[-1]}")
    out = None if s is None else tuple(s[:-1]) + (k,)
    return [out, out]


def top_k_order(x: np.ndarray) -> np.ndarray:
    """Per last-axis row, the indices from the largest value to the smallest, equal values in
    index order, NaN first (a stable ascending sort of the reversed row, read backwards)."""
    n = x.shape[-1]
    ascending = np.argsort(x[..., ::-1], axis=-1, kind="stable")
    return (n - 1 - ascending[..., ::-1]).astype(np.int64)


def _topk_ref(ctx, x: np.ndarray, k: np.ndarray):
    if np.ndim(k) != 0:
        raise ExecutionError(f"k must be a scalar, got shape {list(np.shape(k))}", ctx.node)
    k = int(k)
    if k < 0:
        raise ExecutionError(f"Need k >= 0, got {k}", ctx.node)
    if x.ndim < 1:
        raise ExecutionError("input must have rank >= 1, got a scalar", ctx.node)
    if x.shape[-1] < k:
        raise ExecutionError(f"input must have at least k={k} columns, got {x.shape[-1]}",
                             ctx.node)
    order = top_k_order(x)[..., :k]
    values = np.take_along_axis(x, order, axis=-1)
    return [values, order.astype(ctx.out_dtype(1))]


register_op("TopKV2", inputs=["input: T", "k: Tk"], outputs=["values: T", "indices: index_type"],
            attrs=["sorted: bool = true", "T: {numeric}", "Tk: {i16, i32, i64} = i32",
                   "index_type: {i16, i32, i64} = i32"],
            shape=_topk_shape, kernel=_topk_ref, group="other",
            doc="The k largest entries of each last-axis row, largest first (ties: lower index "
                "first; NaN largest), and their indices.")


# --- Unique, UniqueV2, UniqueWithCounts, UniqueWithCountsV2 ---------------------------------------
def _unique_axis(ctx, rank: Optional[int]) -> Optional[int]:
    """The axis of a UniqueV2: None for the plain ops or an empty axis (x must be a vector),
    else the normalized axis; raises on a bad one (``ctx.error``)."""
    if ctx.node.op in ("Unique", "UniqueWithCounts"):
        return None
    value = ctx.input_value(1)
    if value is None:
        return -1                                         # unknown
    value = np.reshape(value, -1)
    if value.size > 1:
        raise ctx.error("axis does not support input tensors larger than 1 elements")
    if value.size == 0:
        return None
    axis = int(value[0])
    if rank is not None:
        if not -rank <= axis < rank:
            raise ctx.error(f"axis has to be between [0, {rank})")
        axis = axis + rank if axis < 0 else axis
    return axis


def _unique_shape(ctx) -> list:
    s = ctx.input_shape(0)
    rank = None if s is None else len(s)
    axis = _unique_axis(ctx, rank)
    counts = ctx.node.op.startswith("UniqueWithCounts")
    if axis is None:
        if s is not None and len(s) != 1:
            raise ctx.error(f"unique expects a 1D vector, got shape {shape_str(s)}")
        y, n = (None,), None if s is None else s[0]
    elif axis < 0 or s is None:
        y, n = (None if s is None else (None,) * len(s)), None
    else:
        y, n = tuple(None if k == axis else d for k, d in enumerate(s)), s[axis]
    return [y, (n,)] + ([(None,)] if counts else [])


def _unique_ref(ctx, x: np.ndarray, *axis_value) -> list:
    axis = None
    if axis_value:
        a = np.reshape(axis_value[0], -1)
        if a.size > 1:
            raise ExecutionError("axis does not support input tensors larger than 1 elements",
                                 ctx.node)
        if a.size == 1:
            axis = int(a[0])
            if not -x.ndim <= axis < x.ndim:
                raise ExecutionError(f"axis has to be between [0, {x.ndim})", ctx.node)
            axis = axis + x.ndim if axis < 0 else axis
    if axis is None:
        if x.ndim != 1:
            raise ExecutionError(f"unique expects a 1D vector, got shape {list(x.shape)}",
                                 ctx.node)
        axis = 0
    inner = int(np.prod([d for k, d in enumerate(x.shape) if k != axis], dtype=np.int64))
    rows = np.ascontiguousarray(np.moveaxis(x, axis, 0).reshape(x.shape[axis], inner))
    if rows.dtype.kind == "f":
        rows = rows + rows.dtype.type(0)               # -0.0 + 0.0 is 0.0: one key for both
    seen: dict = {}
    firsts: List[int] = []
    idx = np.zeros(len(rows), np.int64)
    for i, row in enumerate(rows):
        key = None if row.dtype.kind == "f" and np.isnan(row).any() else row.tobytes()
        j = seen.get(key) if key is not None else None   # a NaN equals nothing
        if j is None:
            j = len(firsts)
            firsts.append(i)
            if key is not None:
                seen[key] = j
        idx[i] = j
    y = np.take(x, np.asarray(firsts, np.int64), axis=axis)
    out = [y, idx.astype(ctx.out_dtype(1))]
    if ctx.node.op.startswith("UniqueWithCounts"):
        out.append(np.bincount(idx, minlength=len(firsts)).astype(ctx.out_dtype(2)))
    return out


_UNIQUE_DOC = ("Distinct {what} of x in the order they first occur, and for each {item} of "
               "x the index of its value in y{counts}.")
for _name, _axis, _counts in (("Unique", False, False), ("UniqueV2", True, False),
                              ("UniqueWithCounts", False, True),
                              ("UniqueWithCountsV2", True, True)):
    register_op(_name, inputs=["x: T"] + (["axis: Taxis"] if _axis else []),
                outputs=["y: T", "idx: out_idx"] + (["count: out_idx"] if _counts else []),
                attrs=["T: {all}", "out_idx: {i32, i64} = i32"]
                + (["Taxis: {i32, i64} = i64"] if _axis else []),
                shape=_unique_shape, kernel=_unique_ref, group="other",
                doc=_UNIQUE_DOC.format(what="slices along axis" if _axis else "elements",
                                       item="slice" if _axis else "element",
                                       counts=" (and how often each occurs)" if _counts else ""))
