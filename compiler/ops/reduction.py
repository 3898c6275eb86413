"""Reductions: Sum, Mean, Max, Min, Prod (numeric), All, Any (bool), and ArgMax / ArgMin.

Semantics follow TensorFlow's CPU kernels:

* Reducing over an empty set gives the reducer's identity: Sum 0, Prod 1, Max the lowest value
  (``-inf`` for floats), Min the highest, All true, Any false; Mean gives NaN for floats and 0
  for integers.
* Integer Sum and Prod wrap around in the input type (two's complement). Integer Mean sums
  8/16/32-bit integers in 64 bits and divides with truncation, as TensorFlow does.
* float32 Sum and Mean accumulate in float64 (rounded once at the end).
* Max and Min propagate NaN (as numpy does).
* ArgMax / ArgMin return the first index of the extreme value; a NaN counts as the extreme
  (first NaN wins, as in numpy); an empty reduced dimension is a run-time error.

The C kernels collapse the input into groups of adjacent reduced / kept dims, so a reduction
over the last axis (or the leading axes) becomes one contiguous loop (``reduction.c.j2``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, List, Sequence, Tuple

import numpy as np

from compiler.codegen.kernel_context import KernelContext as CKernelContext, product
from compiler.errors import ExecutionError
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType


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


def _prod_ref(x, axes, keep):
    return np.prod(x, axis=axes, dtype=x.dtype, keepdims=keep)


def _all_ref(x, axes, keep):
    return np.all(x, axis=axes, keepdims=keep)


def _any_ref(x, axes, keep):
    return np.any(x, axis=axes, keepdims=keep)


def _reference(fn: Callable) -> Callable:
    def kernel(ctx, x, axes):
        return fn(x, _run_time_axes(ctx, x, axes), ctx.attrs["keep_dims"])
    return kernel


# --- C code generation ---------------------------------------------------------------------
def module_helper(kc: CKernelContext, name: str, text: str) -> str:
    """Add a module-level C helper once per module (``name`` must identify ``text``)."""
    kc.module.add_global(text)
    return name


@dataclass(frozen=True)
class Reducer:
    """How one reduction is written in C: accumulator type, identity, combine and finalize."""
    acc: str
    init: str
    combine: Callable[[str, str], str]
    final: Callable[[str, str], str]          # (accumulator, element count) -> output value
    final_is_cast: bool = True                # final(acc) is just a conversion


def _sum_acc(dtype: DType, wide: bool = False) -> str:
    if dtype.is_floating:
        return "double"
    return "uint64_t" if wide or dtype.itemsize > 4 else "uint32_t"


def _max_combine(dtype: DType, greater: str) -> Callable[[str, str], str]:
    if dtype.is_floating:
        # Bitwise | (not ||) keeps the select branch-free, so it vectorizes; NaN sticks.
        return lambda a, b: f"((({b}) {greater} ({a})) | (({b}) != ({b}))) ? ({b}) : ({a})"
    return lambda a, b: f"({b}) {greater} ({a}) ? ({b}) : ({a})"


def _mean_final(dtype: DType, ctype: str) -> Callable[[str, str], str]:
    if dtype.is_floating:
        return lambda acc, n: f"({ctype})(({acc}) / (double)({n}))"
    if dtype.is_signed:
        return lambda acc, n: (f"(({n}) == 0 ? ({ctype})0 : "
                               f"({ctype})((int64_t)({acc}) / (int64_t)({n})))")
    return lambda acc, n: f"(({n}) == 0 ? ({ctype})0 : ({ctype})(({acc}) / (uint64_t)({n})))"


def c_reducer(op: str, kc: CKernelContext) -> Reducer:
    """The C description of reduction ``op`` for the node's input dtype."""
    dtype = kc.inputs[0].dtype
    ctype = kc.inputs[0].ctype
    t = kc.target

    def cast(acc: str, count: str) -> str:
        return f"({ctype})({acc})"

    if op == "Sum":
        return Reducer(_sum_acc(dtype), "0", lambda a, b: f"({a}) + ({b})", cast)
    if op == "Mean":
        return Reducer(_sum_acc(dtype, wide=True), "0", lambda a, b: f"({a}) + ({b})",
                       _mean_final(dtype, ctype), final_is_cast=False)
    if op == "Prod":
        acc = ctype if dtype.is_floating else _sum_acc(dtype)
        return Reducer(acc, "1", lambda a, b: f"({a}) * ({b})", cast)
    if op == "Max":
        return Reducer(ctype, t.min_value(dtype), _max_combine(dtype, ">"), cast)
    if op == "Min":
        return Reducer(ctype, t.max_value(dtype), _max_combine(dtype, "<"), cast)
    if op == "All":
        return Reducer("bool", "true", lambda a, b: f"({a}) && ({b})", cast)
    if op == "Any":
        return Reducer("bool", "false", lambda a, b: f"({a}) || ({b})", cast)
    raise kc.error(f"no C reducer for {op}")


def constant_axes(kc: CKernelContext, i: int = 1) -> List[int]:
    """The node's constant reduction axes; the C backend cannot reduce over run-time axes."""
    value = constant_value(kc.node.inputs[i])
    if value is None:
        raise kc.error("the C backend needs the reduction axes to be known at compile time "
                       "(a constant); these are computed at run time")
    return normalize_axes(value, kc.inputs[0].rank, kc.error)


def collapse_groups(dims: Sequence[str], reduced: Sequence[int]) -> List[Tuple[str, bool]]:
    """Merge adjacent dims that are all reduced or all kept: [(extent, is_reduced), ...].

    Static size-1 dims are dropped (they change no index); the result is never empty.
    """
    groups: List[Tuple[List[str], bool]] = []
    for k, d in enumerate(dims):
        if d == "1":
            continue
        r = k in reduced
        if groups and groups[-1][1] == r:
            groups[-1][0].append(d)
        else:
            groups.append(([d], r))
    if not groups:
        return [("1", False)]
    return [(product(ds), r) for ds, r in groups]


def _reduce_output_dims(kc: CKernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    axes = constant_axes(kc)
    keep = kc.attr("keep_dims")
    return [[("1" if k in axes else d) for k, d in enumerate(x.dims) if keep or k not in axes]]


def _output_strides(groups: List[Tuple[str, bool]]) -> List[str]:
    """Per group, its stride in the output (kept groups only; "0" for reduced groups)."""
    strides = []
    for j, (_, r) in enumerate(groups):
        later = [e for e, rr in groups[j + 1:] if not rr]
        strides.append("0" if r else product(later))
    return strides


def _lanes(acc_ctype: str) -> int:
    """Independent accumulators for a contiguous reduction: four 256-bit vectors' worth."""
    return 16 if acc_ctype in ("double", "int64_t", "uint64_t") else 32


def emit_reduction(kc: CKernelContext, op: str) -> str:
    """C for a reduction: a contiguous fast path when only trailing dims are reduced."""
    x = kc.inputs[0]
    axes = constant_axes(kc)
    red = c_reducer(op, kc)
    groups = collapse_groups(x.dims, axes)
    count = product([x.dim(a) for a in axes])
    out_size = product([e for e, r in groups if not r])
    helper = f"flowc_reduce_{op.lower()}_{x.dtype.ir_name}"
    module_helper(kc, helper, kc.render("reduction.c.j2", part="helper", fn=helper, red=red,
                                        lanes=_lanes(red.acc)))
    rows = groups[-1][1] and not any(r for _, r in groups[:-1])
    acc_is_out = red.acc == x.ctype
    return (kc.render("reduction.c.j2", part="body", fn=helper, red=red,
                                  groups=groups, ostrides=_output_strides(groups), count=count,
                                  out_size=out_size, rows=rows, acc_is_out=acc_is_out))


def _register_reduction(name: str, types: str, ref: Callable, doc: str) -> None:
    t_input = "input: T" if types != "bool" else "input: bool"
    t_output = "output: T" if types != "bool" else "output: bool"
    attrs = ["keep_dims: bool = false", "Tidx: {i32, i64} = i32"]
    if types != "bool":
        attrs.append(f"T: {{{types}}}")
    register_op(name, inputs=[t_input, "reduction_indices: Tidx"], outputs=[t_output],
                attrs=attrs, shape=_reduce_shape, kernel=_reference(ref),
                c_kernel=lambda kc: emit_reduction(kc, name), c_output_dims=_reduce_output_dims,
                group="reduce", doc=doc)


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


def _arg_output_dims(kc: CKernelContext) -> List[List[str]]:
    (axis,) = constant_axes(kc)
    return [[d for k, d in enumerate(kc.inputs[0].dims) if k != axis]]


def emit_arg_reduction(kc: CKernelContext, greater: str) -> str:
    """C for ArgMax (``greater`` is ">") or ArgMin ("<") over one constant axis."""
    x = kc.inputs[0]
    (axis,) = constant_axes(kc)
    extent = x.dim(axis)
    kc.check(f"{extent} > 0", f"reduction axis {axis} is empty (size 0)")
    return (kc.render("argminmax.c.j2", outer=x.dim_product(0, axis),
                                  extent=extent, inner=x.dim_product(axis + 1),
                                  greater=greater, floating=x.dtype.is_floating))


for _name, _np_fn, _cmp in (("ArgMax", np.argmax, ">"), ("ArgMin", np.argmin, "<")):
    register_op(_name, inputs=["input: T", "dimension: Tidx"], outputs=["output: output_type"],
                attrs=["T: {numeric, bool}", "Tidx: {i32, i64} = i32",
                       "output_type: {i32, i64} = i64"],
                shape=_arg_shape, kernel=_arg_reference(_np_fn),
                c_kernel=lambda kc, c=_cmp: emit_arg_reduction(kc, c),
                c_output_dims=_arg_output_dims, group="reduce",
                doc="Index of the extreme value along an axis (first one on ties; NaN wins).")
