"""Ops over vectors of indices and values: InvertPermutation, ListDiff (``tf.setdiff1d``),
Bincount and DenseBincount. Their C lowering is ``compiler/codegen/c_ops/index_sets.py``.

Semantics follow TensorFlow's CPU kernels:
- InvertPermutation: ``y[x[i]] = i`` for a 1-D permutation ``x`` of ``0..n-1``; a value outside
  ``[0, n)`` ("is not between 0 and n") or a repeated one ("is duplicated in the input") is an
  error.
- ListDiff: the elements of ``x`` that are not in ``y``, in ``x``'s order, and their positions
  in ``x``; both 1-D. Values compare with ``==`` (so -0.0 is 0.0 and a NaN equals nothing).
- Bincount (and DenseBincount, the op TF 2's ``tf.compat.v1.bincount`` emits; it counts each
  row of a 2-D input apart, and with ``binary_output`` gives 1 for each value present):
  ``bins[v] = sum of weights[i] where arr[i] == v`` (or the count of ``v`` when
  weights is empty) for ``v`` in ``[0, size)``; values ``>= size`` are ignored, a negative value
  is an error ("Input arr must be non-negative!"), as is a negative size or weights of another
  shape than arr. f32 weights sum in double, rounded once.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import merge_shapes, shape_str


# --- InvertPermutation ---------------------------------------------------------------------
def _invert_shape(ctx) -> list:
    s = ctx.input_shape(0)
    if s is not None and len(s) != 1:
        raise ctx.error(f"invert_permutation expects a 1D vector, got shape {shape_str(s)}")
    return [s if s is not None else (None,)]


def invert_permutation_check(x: np.ndarray):
    """(position, message) of the first bad value of ``x``, or None when it is a permutation."""
    n = x.size
    seen = np.zeros(n, bool)
    for i, v in enumerate(x.tolist()):
        if not 0 <= v < n:
            return i, f"{v} is not between 0 and {n}"
        if seen[v]:
            return i, f"{v} is duplicated in the input."
        seen[v] = True
    return None


def _invert_ref(ctx, x: np.ndarray) -> np.ndarray:
    if x.ndim != 1:
        raise ExecutionError(f"invert_permutation expects a 1D vector, got shape "
                             f"{list(x.shape)}", ctx.node)
    bad = invert_permutation_check(x)
    if bad is not None:
        raise ExecutionError(bad[1], ctx.node)
    y = np.empty_like(x)
    y[x] = np.arange(x.size, dtype=x.dtype)
    return y


register_op("InvertPermutation", inputs=["x: T"], outputs=["y: T"], attrs=["T: {i32, i64} = i32"],
            shape=_invert_shape, kernel=_invert_ref, group="other",
            doc="The inverse permutation of x: y[x[i]] = i.")


# --- ListDiff ------------------------------------------------------------------------------
def _list_diff_shape(ctx) -> list:
    for i, what in ((0, "x"), (1, "y")):
        s = ctx.input_shape(i)
        if s is not None and len(s) != 1:
            raise ctx.error(f"{what} should be a 1D vector, got shape {shape_str(s)}")
    return [(None,), (None,)]


def _list_diff_ref(ctx, x: np.ndarray, y: np.ndarray) -> list:
    for v, what in ((x, "x"), (y, "y")):
        if v.ndim != 1:
            raise ExecutionError(f"{what} should be a 1D vector, got shape {list(v.shape)}",
                                 ctx.node)
    keep = ~np.isin(x, y)
    return [x[keep], np.nonzero(keep)[0].astype(ctx.out_dtype(1))]


register_op("ListDiff", inputs=["x: T", "y: T"], outputs=["out: T", "idx: out_idx"],
            attrs=["T: {all}", "out_idx: {i32, i64} = i32"],
            shape=_list_diff_shape, kernel=_list_diff_ref, group="other",
            doc="The elements of x not in y, in order, and their positions in x.")


# --- Bincount ------------------------------------------------------------------------------
def _bincount_shape(ctx) -> list:
    s = ctx.input_shape(1)
    if s is not None and len(s) != 0:
        raise ctx.error(f"size must be a scalar, got shape {shape_str(s)}")
    arr, w = ctx.input_shape(0), ctx.input_shape(2)
    if arr is not None and w is not None and tuple(w) not in ((0,), (None,)):
        try:
            merge_shapes(tuple(arr), tuple(w))
        except ValueError:
            raise ctx.error(f"weights {shape_str(w)} should be empty or have the shape of "
                            f"arr {shape_str(arr)}") from None
    v = ctx.input_value(1)
    if v is not None and int(v) < 0:
        raise ctx.error(f"size ({int(v)}) must be non-negative")
    return [(None if v is None else int(v),)]


def bincount_values(ctx, arr: np.ndarray, size, weights: np.ndarray, by_row: bool = False,
                    binary: bool = False) -> np.ndarray:
    """Bincount's bins of all of arr, or (``by_row``, DenseBincount) one row of ``size`` bins
    per row of a 2-D arr."""
    n = int(size)
    if np.ndim(size) != 0:
        raise ExecutionError(f"size must be a scalar, got shape {list(np.shape(size))}", ctx.node)
    if n < 0:
        raise ExecutionError(f"size ({n}) must be non-negative", ctx.node)
    if weights.size and weights.shape != arr.shape:
        raise ExecutionError(f"weights {list(weights.shape)} should be empty or have the shape "
                             f"of arr {list(arr.shape)}", ctx.node)
    if arr.size and arr.min() < 0:
        raise ExecutionError("Input arr must be non-negative!", ctx.node)
    dtype = weights.dtype
    acc = np.float64 if np.issubdtype(dtype, np.floating) else dtype
    by_row = by_row and arr.ndim == 2
    rows = arr.reshape(arr.shape[0] if by_row else 1, -1).astype(np.int64)
    w = weights.reshape(rows.shape) if weights.size else None
    out = np.zeros((rows.shape[0], n), acc)
    for r in range(rows.shape[0]):
        keep = rows[r] < n
        if binary:
            out[r, rows[r][keep]] = 1
        else:
            np.add.at(out[r], rows[r][keep],
                      w[r][keep].astype(acc) if w is not None else np.ones(1, acc))
    out = out.astype(dtype)
    return out if by_row else out.reshape(n)


def _bincount_ref(ctx, arr: np.ndarray, size, weights: np.ndarray) -> np.ndarray:
    return bincount_values(ctx, arr, size, weights)


def _dense_bincount_shape(ctx) -> list:
    arr = ctx.input_shape(0)
    if arr is not None and len(arr) not in (1, 2):
        raise ctx.error(f"input must be a 1-D or 2-D tensor, got shape {shape_str(arr)}")
    (bins,) = _bincount_shape(ctx)
    return [bins if arr is None or len(arr) == 1 else (arr[0],) + bins]


def _dense_bincount_ref(ctx, arr: np.ndarray, size, weights: np.ndarray) -> np.ndarray:
    if arr.ndim not in (1, 2):
        raise ExecutionError(f"input must be a 1-D or 2-D tensor, got shape {list(arr.shape)}",
                             ctx.node)
    return bincount_values(ctx, arr, size, weights, True, ctx.attrs["binary_output"])


register_op("Bincount", inputs=["arr: i32", "size: i32", "weights: T"], outputs=["bins: T"],
            attrs=["T: {i32, i64, f32, f64}"],
            shape=_bincount_shape, kernel=_bincount_ref, group="other",
            doc="Counts (or summed weights) of each value of arr in [0, size).")

register_op("DenseBincount", inputs=["input: Tidx", "size: Tidx", "weights: T"],
            outputs=["output: T"],
            attrs=["Tidx: {i32, i64}", "T: {i32, i64, f32, f64}", "binary_output: bool = false"],
            shape=_dense_bincount_shape, kernel=_dense_bincount_ref, group="other",
            doc="Bincount of a 1-D input, or of each row of a 2-D one; binary_output gives 1 "
                "for each value present.")
