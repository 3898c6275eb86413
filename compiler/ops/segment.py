"""Segment reductions: the sorted ``Segment{Sum,Mean,Max,Min,Prod}``, the unsorted
``UnsortedSegment{Max,Min,Prod}`` (``UnsortedSegmentSum`` is in ``nn_grad.py``) and the sparse
``SparseSegment{Sum,Mean,SqrtN}`` with their ``WithNumSegments`` forms. Their C lowering is
``compiler/codegen/c_ops/segment.py``.

Semantics follow TensorFlow's CPU kernels:
- The data is seen as rows (dim 0, or the dims segment_ids covers for the unsorted ops); each
  row goes to the segment its id names. The sorted and sparse ops take 1-D ids that must be
  >= 0 and not decreasing ("segment ids are not increasing"); they have ``last id + 1``
  segments, or ``num_segments`` for the ``WithNumSegments`` forms (ids must then be below it).
- The unsorted ops drop negative ids and fail on ids ``>= num_segments``.
- The sparse ops read row ``indices[i]`` of data for entry ``i``; an index outside
  ``[0, rows of data)`` is an error.
- A segment no row goes to gives 0, except: Prod gives 1, UnsortedSegmentMax the lowest value
  of the type and UnsortedSegmentMin the highest (the sorted Max and Min give 0, as TF does).
- Mean is sum / count (integers divide truncating toward zero), SqrtN is sum / sqrt(count).
- f32 sums, products, means accumulate in double and are rounded once; integers wrap.
  Max and Min propagate NaN.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import merge_shapes, shape_str

# op name -> (reduction, layout): layout is "sorted", "unsorted", "sparse" or "sparse_n"
# (sparse with num_segments).
SEGMENT_OPS = {
    "SegmentSum": ("sum", "sorted"), "SegmentMean": ("mean", "sorted"),
    "SegmentMax": ("max", "sorted"), "SegmentMin": ("min", "sorted"),
    "SegmentProd": ("prod", "sorted"),
    "UnsortedSegmentMax": ("max", "unsorted"), "UnsortedSegmentMin": ("min", "unsorted"),
    "UnsortedSegmentProd": ("prod", "unsorted"),
    "SparseSegmentSum": ("sum", "sparse"), "SparseSegmentMean": ("mean", "sparse"),
    "SparseSegmentSqrtN": ("sqrtn", "sparse"),
    "SparseSegmentSumWithNumSegments": ("sum", "sparse_n"),
    "SparseSegmentMeanWithNumSegments": ("mean", "sparse_n"),
    "SparseSegmentSqrtNWithNumSegments": ("sqrtn", "sparse_n"),
}


def empty_value(reduction: str, layout: str, dtype: np.dtype):
    """What a segment that gets no row holds."""
    if reduction == "prod":
        return 1
    if layout == "unsorted" and reduction in ("max", "min"):
        info = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
        return info.min if reduction == "max" else info.max
    return 0


def _num_segments_input(layout: str) -> Optional[int]:
    return {"unsorted": 2, "sparse_n": 3}.get(layout)


# --- shape functions ----------------------------------------------------------------------
def _vector(ctx, i: int, what: str):
    s = ctx.input_shape(i)
    if s is not None and len(s) != 1:
        raise ctx.error(f"{what} must be a vector, got shape {shape_str(s)}")
    return s


def _num_segments(ctx, i: int) -> Optional[int]:
    s = ctx.input_shape(i)
    if s is not None and len(s) != 0:
        raise ctx.error(f"num_segments must be a scalar, got shape {shape_str(s)}")
    v = ctx.input_value(i)
    if v is None:
        return None
    n = int(v)
    if n < 0:
        raise ctx.error(f"num_segments must be >= 0, got {n}")
    return n


def _sorted_count(ctx, i: int) -> Optional[int]:
    """The segment count of constant sorted ids (last + 1), None when they are not known."""
    v = ctx.input_value(i)
    if v is None:
        return None
    v = np.asarray(v).reshape(-1)
    return int(v[-1]) + 1 if v.size else 0


def _prefix(ctx, a, b, what_a: str, what_b: str) -> None:
    if a is None or b is None:
        return
    bad = len(a) > len(b)
    if not bad:
        try:
            merge_shapes(tuple(a), tuple(b[:len(a)]))
        except ValueError:
            bad = True
    if bad:
        raise ctx.error(f"{what_a} {shape_str(a)} must be a prefix of {what_b}'s shape "
                        f"{shape_str(b)}")


def _indices_and_ids(ctx) -> None:
    """A sparse segment op's indices (input 1) and segment_ids (input 2): vectors of one
    length."""
    idx = _vector(ctx, 1, "indices")
    ids = _vector(ctx, 2, "segment_ids")
    if idx is not None and ids is not None:
        try:
            merge_shapes(tuple(idx), tuple(ids))
        except ValueError:
            raise ctx.error(f"segment_ids {shape_str(ids)} and indices {shape_str(idx)} must "
                            "have one length") from None


def _segment_shape(ctx) -> list:
    reduction, layout = SEGMENT_OPS[ctx.node.op]
    data = ctx.input_shape(0)
    if layout == "sorted":
        ids = _vector(ctx, 1, "segment_ids")
        _prefix(ctx, ids, data, "segment_ids", "data")
        n = _sorted_count(ctx, 1)
        return [None] if data is None else [(n,) + tuple(data[1:])]
    if layout == "unsorted":
        ids = ctx.input_shape(1)
        n = _num_segments(ctx, 2)
        _prefix(ctx, ids, data, "segment_ids", "data")
        if data is None or ids is None:
            return [None]
        return [(n,) + tuple(data[len(ids):])]
    _indices_and_ids(ctx)
    if data is not None and len(data) == 0:
        raise ctx.error("data must have at least one dimension, got a scalar")
    n = _num_segments(ctx, 3) if layout == "sparse_n" else _sorted_count(ctx, 2)
    return [None] if data is None else [(n,) + tuple(data[1:])]


# --- reference kernels --------------------------------------------------------------------
def _check_sorted(ctx, ids: np.ndarray, n: Optional[int]) -> None:
    if ids.size and ids.min() < 0:
        k = int(np.argmax(ids < 0))
        raise ExecutionError(f"segment ids must be >= 0, got segment_ids[{k}] = {ids[k]}",
                             ctx.node)
    down = np.nonzero(ids[1:] < ids[:-1])[0]
    if down.size:
        k = int(down[0]) + 1
        raise ExecutionError(f"segment ids are not increasing: segment_ids[{k}] = {ids[k]} "
                             f"< segment_ids[{k - 1}] = {ids[k - 1]}", ctx.node)
    if n is not None and ids.size and ids[-1] >= n:
        raise ExecutionError(f"segment ids must be < num_segments: segment_ids[{ids.size - 1}] "
                             f"= {ids[-1]} is out of range [0, {n})", ctx.node)


def _num(ctx, value) -> int:
    n = int(value)
    if n < 0:
        raise ExecutionError(f"num_segments must be >= 0, got {n}", ctx.node)
    return n


def _reduce_rows(rows: np.ndarray, ids: np.ndarray, n: int, reduction: str, layout: str,
                 dtype: np.dtype) -> np.ndarray:
    """Rows ``[r, inner...]`` reduced into ``n`` segments by ``ids`` (negative ids dropped)."""
    keep = ids >= 0
    ids, rows = ids[keep], rows[keep]
    inner = rows.shape[1:]
    floating = np.issubdtype(dtype, np.floating)
    acc = np.float64 if floating else dtype
    count = np.bincount(ids, minlength=n)[:n] if ids.size else np.zeros(n, np.int64)
    if reduction in ("sum", "mean", "sqrtn"):
        out = np.zeros((n,) + inner, acc)
        np.add.at(out, ids, rows.astype(acc))
    elif reduction == "prod":
        out = np.ones((n,) + inner, acc)
        np.multiply.at(out, ids, rows.astype(acc))
    else:
        low = -np.inf if floating else np.iinfo(dtype).min
        high = np.inf if floating else np.iinfo(dtype).max
        out = np.full((n,) + inner, low if reduction == "max" else high, acc)
        (np.maximum if reduction == "max" else np.minimum).at(out, ids, rows.astype(acc))
    c = count.reshape((n,) + (1,) * len(inner))
    with np.errstate(divide="ignore", invalid="ignore"):
        if reduction == "mean" and floating:
            out = out / np.maximum(c, 1)
        elif reduction == "mean":
            q = out // np.maximum(c, 1).astype(dtype)
            out = np.where((out % np.maximum(c, 1).astype(dtype) != 0) & (out < 0), q + 1, q)
        elif reduction == "sqrtn":
            out = out / np.sqrt(np.maximum(c, 1))
    out = np.where(c > 0, out, np.asarray(empty_value(reduction, layout, dtype)).astype(acc))
    return out.astype(dtype)


def _segment_ref(ctx, data: np.ndarray, *rest) -> np.ndarray:
    reduction, layout = SEGMENT_OPS[ctx.node.op]
    if layout == "sorted":
        ids = rest[0].astype(np.int64)
        if ids.ndim != 1 or data.ndim == 0 or ids.shape[0] != data.shape[0]:
            raise ExecutionError(f"segment_ids {list(ids.shape)} must be a vector as long as "
                                 f"data's dim 0 (data {list(data.shape)})", ctx.node)
        _check_sorted(ctx, ids, None)
        n = int(ids[-1]) + 1 if ids.size else 0
        return _reduce_rows(data, ids, n, reduction, layout, data.dtype)
    if layout == "unsorted":
        ids, n = rest[0].astype(np.int64), _num(ctx, rest[1])
        if data.shape[:ids.ndim] != ids.shape:
            raise ExecutionError(f"segment_ids {list(ids.shape)} must be a prefix of data's "
                                 f"shape {list(data.shape)}", ctx.node)
        flat = ids.reshape(-1)
        big = flat >= n
        if np.any(big):
            k = int(np.argmax(big))
            raise ExecutionError(f"segment_ids[{k}] = {flat[k]} is out of range [0, {n})",
                                 ctx.node)
        rows = data.reshape((flat.size,) + data.shape[ids.ndim:])
        return _reduce_rows(rows, flat, n, reduction, layout, data.dtype)
    idx, ids = rest[0].astype(np.int64), rest[1].astype(np.int64)
    if idx.shape != ids.shape:
        raise ExecutionError(f"segment_ids {list(ids.shape)} and indices {list(idx.shape)} "
                             "must have one length", ctx.node)
    n = _num(ctx, rest[2]) if layout == "sparse_n" else None
    _check_sorted(ctx, ids, n)
    bad = (idx < 0) | (idx >= data.shape[0])
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ExecutionError(f"indices[{k}] = {idx[k]} is out of range [0, {data.shape[0]})",
                             ctx.node)
    if n is None:
        n = int(ids[-1]) + 1 if ids.size else 0
    return _reduce_rows(data[idx], ids, n, reduction, layout, data.dtype)


_DOCS = {"sum": "sums", "mean": "means", "max": "maxima", "min": "minima", "prod": "products",
         "sqrtn": "sums divided by sqrt(count)"}

for _name, (_reduction, _layout) in SEGMENT_OPS.items():
    _types = "{float}" if _reduction in ("mean", "sqrtn") and _layout.startswith("sparse") \
        else "{float, i32, i64}"
    if _layout == "sorted":
        _inputs = ["data: T", "segment_ids: Tindices"]
        _attrs = [f"T: {_types}", "Tindices: {i32, i64}"]
    elif _layout == "unsorted":
        _inputs = ["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"]
        _attrs = [f"T: {_types}", "Tindices: {i32, i64}", "Tnumsegments: {i32, i64} = i32"]
    else:
        _inputs = ["data: T", "indices: Tidx", "segment_ids: Tsegmentids"]
        _attrs = [f"T: {_types}", "Tidx: {i32, i64} = i32", "Tsegmentids: {i32, i64} = i32",
                  "sparse_gradient: bool = false"]
        if _layout == "sparse_n":
            _inputs.append("num_segments: Tnumsegments")
            _attrs.append("Tnumsegments: {i32, i64} = i32")
    register_op(_name, inputs=_inputs, outputs=["output: T"], attrs=_attrs,
                shape=_segment_shape, kernel=_segment_ref, group="other",
                doc=f"Segment {_DOCS[_reduction]} of data's rows ({_layout} segment ids).")


# --- SparseSegment{Sum,Mean,SqrtN}Grad: the gradient ops TF's graphs hold -----------------
SPARSE_GRAD_OPS = {"SparseSegmentSumGrad": "sum", "SparseSegmentMeanGrad": "mean",
                   "SparseSegmentSqrtNGrad": "sqrtn"}


def _sparse_grad_shape(ctx) -> list:
    grad = ctx.input_shape(0)
    _indices_and_ids(ctx)
    s = ctx.input_shape(3)
    if s is not None and len(s) != 0:
        raise ctx.error(f"output_dim0 must be a scalar, got shape {shape_str(s)}")
    if grad is not None and len(grad) == 0:
        raise ctx.error("grad must have at least one dimension, got a scalar")
    v = ctx.input_value(3)
    n = None if v is None else int(v)
    if n is not None and n < 0:
        raise ctx.error(f"output_dim0 must be >= 0, got {n}")
    return [None] if grad is None else [(n,) + tuple(grad[1:])]


def _sparse_grad_ref(ctx, grad: np.ndarray, idx: np.ndarray, ids: np.ndarray, dim0) -> np.ndarray:
    """``out[indices[i]] += grad[segment_ids[i]] * scale``: scale 1, 1/count or 1/sqrt(count)
    of entry i's segment."""
    n = int(dim0)
    if n < 0:
        raise ExecutionError(f"output_dim0 must be >= 0, got {n}", ctx.node)
    idx, ids = idx.astype(np.int64), ids.astype(np.int64)
    if idx.shape != ids.shape:
        raise ExecutionError(f"segment_ids {list(ids.shape)} and indices {list(idx.shape)} "
                             "must have one length", ctx.node)
    bad = (ids < 0) | (ids >= grad.shape[0])
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ExecutionError(f"segment_ids[{k}] = {ids[k]} is out of range [0, {grad.shape[0]})",
                             ctx.node)
    bad = (idx < 0) | (idx >= n)
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ExecutionError(f"indices[{k}] = {idx[k]} is out of range [0, {n})", ctx.node)
    kind = SPARSE_GRAD_OPS[ctx.node.op]
    count = np.bincount(ids, minlength=grad.shape[0]).astype(np.float64)
    scale = {"sum": np.ones_like(count), "mean": 1.0 / np.maximum(count, 1),
             "sqrtn": 1.0 / np.sqrt(np.maximum(count, 1))}[kind]
    rows = grad[ids].astype(np.float64) * scale[ids].reshape((-1,) + (1,) * (grad.ndim - 1))
    out = np.zeros((n,) + grad.shape[1:], np.float64)
    np.add.at(out, idx, rows)
    return out.astype(grad.dtype)


for _name in SPARSE_GRAD_OPS:
    register_op(_name, inputs=["grad: T", "indices: Tidx", "segment_ids: Tsegmentids",
                               "output_dim0: i32"],
                outputs=["output: T"],
                attrs=["T: {float}", "Tidx: {i32, i64} = i32", "Tsegmentids: {i32, i64} = i32"],
                shape=_sparse_grad_shape, kernel=_sparse_grad_ref, group="other",
                doc=f"The gradient of {_name[:-4]} with respect to data: each entry's segment "
                    "gradient (scaled) added into row indices[i] of an output_dim0-row tensor.")
