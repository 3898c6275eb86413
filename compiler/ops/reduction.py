"""Reductions: Sum, Mean, Max, Min, Prod (numeric), All, Any (bool), and ArgMax / ArgMin.

Semantics follow TensorFlow's CPU kernels:

* Reducing over an empty set gives the reducer's identity: Sum 0, Prod 1, Max the lowest value
  (``-inf`` for floats), Min the highest, All true, Any false; Mean gives NaN for floats and 0
  for integers.
* Integer Sum and Prod wrap around in the input type (two's complement). Integer Mean sums
  8/16/32-bit integers in 64 bits and divides with truncation, as TensorFlow does.
* float32 Sum and Mean accumulate in float64 (rounded once at the end).
* A floating Prod is the exact product rounded once at the end (a float64 mantissa product
  with an unbounded exponent, ``_float_prod``): one whose exact value overflows is inf with
  its sign, as TensorFlow gives for a float32 product that overflows, whatever order the
  factors come in (a running product that underflowed to 0 first does not make it 0, nor
  an overflow in one part and an underflow in another NaN).
* Max and Min propagate NaN (as numpy does).
* ArgMax / ArgMin return the first index of the extreme value; a NaN counts as the extreme
  (first NaN wins, as in numpy); an empty reduced dimension is a run-time error.

The C kernels are ``compiler/codegen/c_ops/reduction.py``'s.
"""
from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op


# --- axes --------------------------------------------------------------------------------
def normalize_axes(values, rank: int, error: Callable[[str], Exception]) -> List[int]:
    """Sorted non-negative axes from a scalar or vector of axes; raises ``error(msg)`` if bad."""
    arr = np.asarray(values)
    if arr.ndim > 1:
        raise error(f"reduction axes must be a scalar or a vector, got shape {list(arr.shape)}")
    axes = []
    for a in arr.reshape(-1).tolist():
        if not -rank <= a < rank:
            raise error(f"invalid reduction axis {a} for input of rank {rank}")
        a = a + rank if a < 0 else a
        if a in axes:
            raise error(f"duplicate reduction axis {a} in {arr.reshape(-1).tolist()}")
        axes.append(a)
    return sorted(axes)


def reduced_shape(shape: tuple, axes: Sequence[int], keep_dims: bool) -> tuple:
    """The shape after reducing ``axes`` (kept as 1 with ``keep_dims``)."""
    if keep_dims:
        return tuple(1 if k in axes else d for k, d in enumerate(shape))
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def _axes_input_rank_ok(ctx, i: int, what: str) -> None:
    s = ctx.input_shape(i)
    if s is not None and len(s) > 1:
        raise ctx.error(f"{what} must be a scalar or a vector, got rank {len(s)}")


def _reduce_shape(ctx) -> list:
    """Output shape of a reduction; unknown where the axes or the input rank are unknown."""
    _axes_input_rank_ok(ctx, 1, "reduction_indices")
    shape = ctx.input_shape(0)
    keep = ctx.attr("keep_dims")
    values = ctx.input_value(1)
    if shape is None:
        return [None]
    if values is None:
        return [(None,) * len(shape) if keep else None]
    axes = normalize_axes(values, len(shape), ctx.error)
    return [reduced_shape(shape, axes, keep)]


def _run_time_axes(ctx, x: np.ndarray, values) -> Tuple[int, ...]:
    return tuple(normalize_axes(values, x.ndim, lambda m: ExecutionError(m, ctx.node)))


# --- numpy reference kernels ---------------------------------------------------------------
def _sum_ref(x: np.ndarray, axes, keep: bool) -> np.ndarray:
    acc = np.float64 if x.dtype == np.float32 else x.dtype
    return np.sum(x, axis=axes, dtype=acc, keepdims=keep).astype(x.dtype)


def _mean_ref(x: np.ndarray, axes, keep: bool) -> np.ndarray:
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if x.dtype.kind == "f":
        s = np.sum(x, axis=axes, dtype=np.float64, keepdims=keep)
        return (s / np.float64(count)).astype(x.dtype)
    wide = np.uint64 if x.dtype.kind == "u" else np.int64
    s = np.sum(x, axis=axes, dtype=wide, keepdims=keep)
    if count == 0:
        return np.zeros(s.shape, x.dtype)
    c = wide(count)
    q = s // c
    if wide is np.int64:                      # truncate toward zero, as C does
        q = q + ((s % c != 0) & (s < 0)).astype(np.int64)
    return q.astype(x.dtype)


def _extreme(dtype: np.dtype, highest: bool):
    if dtype.kind == "f":
        return np.inf if highest else -np.inf
    info = np.iinfo(dtype)
    return info.max if highest else info.min


def _max_ref(x, axes, keep):
    return np.max(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, False))


def _min_ref(x, axes, keep):
    return np.min(x, axis=axes, keepdims=keep, initial=_extreme(x.dtype, True))


# Mantissas multiplied at once by ``_float_prod``: each is in [0.5, 1), so a block's product
# stays above 2**-PROD_BLOCK, far from double's underflow (2**-1022).
PROD_BLOCK = 512


def _float_prod(x: np.ndarray, axes, keep: bool) -> np.ndarray:
    """The product of floats as if the exponent had no bounds, rounded to ``x``'s dtype at
    the end: each element is split into a mantissa in [0.5, 1) and a binary exponent
    (``frexp``); mantissas multiply in float64, a block at a time, renormalized after each
    block; exponents add up as integers; ``ldexp`` puts them together. An exact product that
    overflows is inf with its sign, one that underflows 0, however the running product
    would have gone; NaN, and inf times 0, give NaN. The C and CUDA kernels
    (``flowc_prod_acc``) compute the same."""
    kept = [k for k in range(x.ndim) if k not in axes]
    rows = int(np.prod([x.shape[k] for k in kept], dtype=np.int64))
    n = int(np.prod([x.shape[k] for k in axes], dtype=np.int64))
    moved = np.transpose(x, kept + list(axes)).reshape(rows, n).astype(np.float64)
    mant, exp = np.frexp(moved)
    acc = np.ones(rows)
    total = np.zeros(rows, np.int64)
    for j in range(0, n, PROD_BLOCK):
        block = np.multiply.reduce(mant[:, j:j + PROD_BLOCK], axis=1)
        acc, k = np.frexp(acc * block)
        total += k + exp[:, j:j + PROD_BLOCK].sum(axis=1, dtype=np.int64)
    limit = 1 << 20                       # beyond any float's range, within ldexp's int
    with np.errstate(over="ignore", under="ignore"):
        out = np.ldexp(acc, np.clip(total, -limit, limit).astype(np.int32)).astype(x.dtype)
    return out.reshape(reduced_shape(x.shape, axes, keep))


def _prod_ref(x, axes, keep):
    if x.dtype.kind == "f":
        return _float_prod(x, axes, keep)
    return np.prod(x, axis=axes, dtype=x.dtype, keepdims=keep)


def _all_ref(x, axes, keep):
    return np.all(x, axis=axes, keepdims=keep)


def _any_ref(x, axes, keep):
    return np.any(x, axis=axes, keepdims=keep)


def _reference(fn: Callable) -> Callable:
    def kernel(ctx, x, axes):
        return fn(x, _run_time_axes(ctx, x, axes), ctx.attrs["keep_dims"])
    return kernel


def _register_reduction(name: str, types: str, ref: Callable, doc: str) -> None:
    t_input = "input: T" if types != "bool" else "input: bool"
    t_output = "output: T" if types != "bool" else "output: bool"
    attrs = ["keep_dims: bool = false", "Tidx: {i32, i64} = i32"]
    if types != "bool":
        attrs.append(f"T: {{{types}}}")
    register_op(name, inputs=[t_input, "reduction_indices: Tidx"], outputs=[t_output],
                attrs=attrs, shape=_reduce_shape, kernel=_reference(ref), group="reduce", doc=doc)


_register_reduction("Sum", "numeric", _sum_ref, "Sum over the given axes (ints wrap around).")
_register_reduction("Mean", "numeric", _mean_ref, "Mean over the given axes.")
_register_reduction("Prod", "numeric", _prod_ref, "Product over the given axes.")
_register_reduction("Max", "numeric", _max_ref, "Maximum over the given axes (NaN propagates).")
_register_reduction("Min", "numeric", _min_ref, "Minimum over the given axes (NaN propagates).")
_register_reduction("All", "bool", _all_ref, "Logical and over the given axes.")
_register_reduction("Any", "bool", _any_ref, "Logical or over the given axes.")


# --- ArgMax / ArgMin -----------------------------------------------------------------------
def _arg_shape(ctx) -> list:
    s = ctx.input_shape(1)
    if s is not None and len(s) != 0:
        raise ctx.error(f"dimension must be a scalar, got rank {len(s)}")
    shape = ctx.input_shape(0)
    value = ctx.input_value(1)
    if shape is None:
        return [None]
    if value is None:
        return [(None,) * max(len(shape) - 1, 0)]
    (axis,) = normalize_axes(value, len(shape), ctx.error)
    return [reduced_shape(shape, [axis], False)]


def _arg_reference(np_fn: Callable) -> Callable:
    def kernel(ctx, x, dimension):
        (axis,) = _run_time_axes(ctx, x, dimension)
        if x.shape[axis] == 0:
            raise ExecutionError(f"reduction axis {axis} is empty in shape {list(x.shape)}", ctx.node)
        return np_fn(x, axis=axis).astype(ctx.attrs["output_type"].np)
    return kernel


for _name, _np_fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
    register_op(_name, inputs=["input: T", "dimension: Tidx"], outputs=["output: output_type"],
                attrs=["T: {numeric, bool}", "Tidx: {i32, i64} = i32",
                       "output_type: {i32, i64} = i64"],
                shape=_arg_shape, kernel=_arg_reference(_np_fn), group="reduce",
                doc="Index of the extreme value along an axis (first one on ties; NaN wins).")
