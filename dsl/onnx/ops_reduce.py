"""Reductions (ReduceSum/Mean/Max/Min/Prod and the composed ones: L1, L2, SumSquare, LogSum,
LogSumExp) and ArgMax/ArgMin."""
from __future__ import annotations

import numpy as np

import dsl as fl
from dsl.onnx.values import binary, index_const, index_scalar, normalize_axis, rank_of, scalar, \
    static_shape, unary
from dsl.ops import apply_op


def _reduce_axes(ctx, axes_input_since: int):
    """The reduced axes, or None for an Identity (``noop_with_empty_axes`` and no axes)."""
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    if ctx.opset < axes_input_since:
        axes = ctx.attr("axes", None)
    else:
        value = ctx.optional_const(1, "axes")
        axes = None if value is None else value.reshape(-1).tolist()
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted({normalize_axis(int(a), rank, ctx) for a in axes})


_BOOL_REDUCTIONS = {"Max": "Any", "Min": "All"}      # max/min of bools: or/and


def _reduction(op: str, axes_input_since: int, before=None, after=None):
    def lower(ctx):
        x = ctx.input(0)
        axes = _reduce_axes(ctx, axes_input_since)
        if before is not None:
            x = before(x)
        name = _BOOL_REDUCTIONS.get(op, op) if x.dtype == fl.bool_ else op
        if axes is None:
            y = apply_op("Identity", [x])
        else:
            y = apply_op(name, [x, index_const(axes)], {"keep_dims": bool(ctx.attr("keepdims", 1))})
        return after(y) if after is not None else y
    lower.__name__ = f"lower_reduce_{op.lower()}"
    return lower


def _square(x):
    return binary("Mul", x, x)


def _abs(x):
    return unary("Abs", x)


def _sqrt(x):
    return unary("Sqrt", x) if x.dtype.is_floating else \
        fl.cast(unary("Sqrt", fl.cast(x, fl.float32)), x.dtype)


def lower_reduce_log_sum_exp(ctx):
    x = ctx.input(0)
    axes = _reduce_axes(ctx, 18)
    if axes is None:
        return apply_op("Identity", [x])
    keep = bool(ctx.attr("keepdims", 1))
    peak = apply_op("Max", [x, index_const(axes)], {"keep_dims": True})
    finite = fl.where_v2(binary("Equal", unary("Abs", peak), scalar(np.inf, peak)),
                         scalar(0, peak), peak)
    total = apply_op("Sum", [unary("Exp", binary("Sub", x, finite)), index_const(axes)],
                     {"keep_dims": True})
    y = binary("AddV2", unary("Log", total), finite)
    return y if keep else apply_op("Squeeze", [y], {"squeeze_dims": axes})


def _arg(op: str):
    def lower(ctx):
        x = ctx.input(0)
        rank = rank_of(x, ctx)
        axis = normalize_axis(ctx.attr("axis", 0), rank, ctx)
        if ctx.attr("select_last_index", 0):
            dim = static_shape(x)[axis]
            if dim is None:
                raise ctx.error("select_last_index needs the reduced dim known")
            rev = apply_op("StridedSlice", [x, index_const([0] * rank), index_const([0] * rank),
                                            index_const([-1 if k == axis else 1 for k in range(rank)])],
                           {"begin_mask": (1 << rank) - 1, "end_mask": (1 << rank) - 1})
            idx = apply_op(op, [rev, index_scalar(axis)], {"output_type": fl.int64})
            idx = binary("Sub", fl.constant(np.int64(dim - 1)), idx)
        else:
            idx = apply_op(op, [x, index_scalar(axis)], {"output_type": fl.int64})
        if ctx.attr("keepdims", 1):
            idx = apply_op("ExpandDims", [idx, index_scalar(axis)])
        return idx
    lower.__name__ = f"lower_{op.lower()}"
    return lower


LOWERINGS = {
    "ReduceSum": [(1, None, _reduction("Sum", 13))],
    "ReduceMean": [(1, None, _reduction("Mean", 18))],
    "ReduceMax": [(1, None, _reduction("Max", 18))],
    "ReduceMin": [(1, None, _reduction("Min", 18))],
    "ReduceProd": [(1, None, _reduction("Prod", 18))],
    "ReduceL1": [(1, None, _reduction("Sum", 18, before=_abs))],
    "ReduceL2": [(1, None, _reduction("Sum", 18, before=_square, after=_sqrt))],
    "ReduceSumSquare": [(1, None, _reduction("Sum", 18, before=_square))],
    "ReduceLogSum": [(1, None, _reduction("Sum", 18, after=lambda y: unary("Log", y)))],
    "ReduceLogSumExp": [(1, None, lower_reduce_log_sum_exp)],
    "ArgMax": [(1, None, _arg("ArgMax"))],
    "ArgMin": [(1, None, _arg("ArgMin"))],
}
