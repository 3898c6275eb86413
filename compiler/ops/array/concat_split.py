"""ConcatV2, Split, SplitV, Pack, Unpack: copies along one axis."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import (Dim, _check_scalar_input, _contiguous, _merged_shape,
                                       _normalize_axis, _reference, _scalar_value,
                                       _vector_length, _vector_value)


def _concat_shape(ctx):
    n = ctx.attr("N")
    shapes = [ctx.input_shape(i) for i in range(n)]
    _check_scalar_input(ctx, n)
    axis = _scalar_value(ctx, n)
    ranks = {len(s) for s in shapes if s is not None}
    if len(ranks) > 1:
        raise ctx.error(f"ConcatV2 inputs must have the same rank, got shapes "
                        f"{', '.join(shape_str(s) for s in shapes)}")
    if not ranks:
        return [None]
    rank = ranks.pop()
    if rank == 0:
        raise ctx.error("Can't concatenate scalars (use tf.stack instead)")
    if axis is None:
        return [(None,) * rank]
    a = _normalize_axis(axis, rank)
    known = [s for s in shapes if s is not None]
    others = [s[:a] + (None,) + s[a + 1:] for s in known]
    out = list(_merged_shape(ctx, others, "ConcatV2 inputs must match except along the axis"))
    sizes = [s[a] for s in shapes if s is not None]
    out[a] = sum(sizes) if len(sizes) == n and None not in sizes else None
    return [tuple(out)]


@_reference
def _concat_kernel(ctx, *arrays):
    values, axis = arrays[:-1], arrays[-1]
    rank = values[0].ndim
    if rank == 0:
        raise ValueError("Can't concatenate scalars (use tf.stack instead)")
    a = _normalize_axis(int(axis.reshape(-1)[0]), rank)
    def others(v):
        return v.shape[:a] + v.shape[a + 1:]

    for i, v in enumerate(values):
        if v.ndim != rank or others(v) != others(values[0]):
            raise ValueError(f"ConcatOp : Dimensions of inputs should match: shape[0] = "
                             f"{list(values[0].shape)} vs. shape[{i}] = {list(v.shape)}")
    return np.concatenate(values, axis=a)


register_op("ConcatV2", inputs=["values: N * T", "axis: Tidx"], outputs=["output: T"],
            attrs=["N: int >= 2", "T: {all}", "Tidx: {i32, i64} = i32"], shape=_concat_shape,
            kernel=_concat_kernel,
            group="movement", doc="Concatenates ``values`` along ``axis``.", half_native=True)


def _split_shape(ctx):
    n = ctx.attr("num_split")
    _check_scalar_input(ctx, 0)
    axis = _scalar_value(ctx, 0)
    s = ctx.input_shape(1)
    if s is None:
        return [None] * n
    if axis is None:
        return [(None,) * len(s)] * n
    a = _normalize_axis(axis, len(s))
    d = s[a]
    if d is not None and d % n:
        raise ctx.error(f"Number of ways to split should evenly divide the split dimension, but "
                        f"got split_dim {a} (size = {d}) and num_split {n}")
    return [s[:a] + (None if d is None else d // n,) + s[a + 1:]] * n


@_reference
def _split_kernel(ctx, axis, x):
    n = ctx.attrs["num_split"]
    a = _normalize_axis(int(axis.reshape(-1)[0]), x.ndim)
    if x.shape[a] % n:
        raise ValueError(f"Number of ways to split should evenly divide the split dimension, but "
                         f"got split_dim {a} (size = {x.shape[a]}) and num_split {n}")
    return [_contiguous(p) for p in np.split(x, n, axis=a)]


register_op("Split", inputs=["split_dim: i32", "value: T"], outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: {all}"], shape=_split_shape, kernel=_split_kernel,
            group="movement",
            half_native=True,
            doc="Splits ``value`` along ``split_dim`` (``axis`` in TensorFlow's Python API) into "
                "``num_split`` equal parts.")


def _split_sizes(sizes: Sequence[int], dim: Dim) -> List[Dim]:
    """SplitV's sizes with the -1 resolved (None where ``dim`` is unknown); ValueError if bad."""
    unknown = [k for k, v in enumerate(sizes) if v == -1]
    if len(unknown) > 1:
        raise ValueError("There can only be one -1 in the input.")
    for k, v in enumerate(sizes):
        if v < -1:
            raise ValueError(f"Split size at index {k} must be >= 0. Got: {v}")
    known = sum(v for v in sizes if v != -1)
    if dim is None:
        return [None if v == -1 else v for v in sizes]
    if (known > dim) if unknown else (known != dim):
        raise ValueError("Determined shape must either match input shape along split_dim exactly "
                         "if fully specified, or be less than the size of the input along "
                         f"split_dim if not fully specified.  Got: {known}")
    return [dim - known if v == -1 else v for v in sizes]


def _split_v_shape(ctx):
    n = ctx.attr("num_split")
    length = _vector_length(ctx, 1)
    if length is not None and length != n:
        raise ctx.error(f"size_splits has {length} elements but num_split is {n}")
    _check_scalar_input(ctx, 2)
    sizes = _vector_value(ctx, 1)
    axis = _scalar_value(ctx, 2)
    s = ctx.input_shape(0)
    if s is None:
        return [None] * n
    if axis is None:
        return [(None,) * len(s)] * n
    a = _normalize_axis(axis, len(s))
    resolved = [None] * n if sizes is None else _split_sizes(sizes, s[a])
    return [s[:a] + (d,) + s[a + 1:] for d in resolved]


@_reference
def _split_v_kernel(ctx, x, size_splits, axis):
    n = ctx.attrs["num_split"]
    if size_splits.size != n:
        raise ValueError(f"size_splits has {size_splits.size} elements but num_split is {n}")
    a = _normalize_axis(int(axis.reshape(-1)[0]), x.ndim)
    sizes = _split_sizes([int(v) for v in size_splits.reshape(-1)], x.shape[a])
    offsets = np.cumsum([0] + sizes)
    return [_contiguous(np.take(x, np.arange(offsets[k], offsets[k + 1]), axis=a))
            for k in range(n)]


register_op("SplitV", inputs=["value: T", "size_splits: Tlen", "split_dim: i32"],
            outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: {all}", "Tlen: {i32, i64} = i64"],
            shape=_split_v_shape, kernel=_split_v_kernel, group="movement", half_native=True,
            doc="Splits ``value`` along ``split_dim`` (``axis`` in TensorFlow's Python API) into "
                "parts of ``size_splits`` (one may be -1).")


def _pack_shape(ctx):
    n = ctx.attr("N")
    merged = _merged_shape(ctx, [ctx.input_shape(i) for i in range(n)],
                           "Shapes of all inputs must match")
    if merged is None:
        return [None]
    a = _normalize_axis(ctx.attr("axis"), len(merged) + 1)
    return [merged[:a] + (n,) + merged[a:]]


@_reference
def _pack_kernel(ctx, *values):
    for i, v in enumerate(values):
        if v.shape != values[0].shape:
            raise ValueError(f"Shapes of all inputs must match: values[0].shape = "
                             f"{list(values[0].shape)} != values[{i}].shape = {list(v.shape)}")
    return np.stack(values, axis=_normalize_axis(ctx.attrs["axis"], values[0].ndim + 1))


register_op("Pack", inputs=["values: N * T"], outputs=["output: T"],
            attrs=["N: int >= 1", "T: {all}", "axis: int = 0"], shape=_pack_shape,
            kernel=_pack_kernel, group="movement",
            doc="Stacks N tensors of one shape along a new dim ``axis``.", half_native=True)


def _unpack_shape(ctx):
    num = ctx.attr("num")
    s = ctx.input_shape(0)
    if s is None:
        return [None] * num
    a = _normalize_axis(ctx.attr("axis"), len(s))
    if s[a] is not None and s[a] != num:
        raise ctx.error(f"Dimension {a} has size {s[a]} but num is {num}")
    return [s[:a] + s[a + 1:]] * num


@_reference
def _unpack_kernel(ctx, x):
    num = ctx.attrs["num"]
    a = _normalize_axis(ctx.attrs["axis"], x.ndim)
    if x.shape[a] != num:
        raise ValueError(f"Dimension {a} has size {x.shape[a]} but num is {num}")
    return [_contiguous(np.take(x, i, axis=a)) for i in range(num)]


register_op("Unpack", inputs=["value: T"], outputs=["output: num * T"],
            attrs=["num: int >= 0", "T: {all}", "axis: int = 0"], shape=_unpack_shape,
            kernel=_unpack_kernel,
            group="movement", half_native=True,
            doc="Unstacks dim ``axis`` of ``value`` into ``num`` tensors.")
