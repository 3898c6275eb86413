"""Slice, StridedSlice: a box (with strides) of the input."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str
from compiler.ops.array.common import (Dim, _contiguous, _partial_vector, _reference,
                                       _vector_length)


def _slice_dim(dim: int, begin: int, size: int, k: int) -> Tuple[int, int]:
    """(begin, size) of input dim ``k`` after TensorFlow's checks; size -1 means to the end."""
    if size == -1:
        size = dim - begin
    if not 0 <= begin <= dim:
        raise ValueError(f"Expected begin[{k}] in [0, {dim}], but got {begin}")
    if not 0 <= size <= dim - begin:
        raise ValueError(f"Expected size[{k}] in [0, {dim - begin}], but got {size}")
    return begin, size


def _slice_shape(ctx):
    s = ctx.input_shape(0)
    lengths = {n for n in (_vector_length(ctx, 1), _vector_length(ctx, 2)) if n is not None}
    if s is not None:
        lengths.add(len(s))
    if len(lengths) > 1:
        raise ctx.error(f"Expected begin and size arguments to be 1-D tensors of size "
                        f"{'the input rank' if s is None else len(s)}, got "
                        f"{shape_str(ctx.input_shape(1))} and {shape_str(ctx.input_shape(2))}")
    if not lengths:
        return [None]
    rank = lengths.pop()
    begin, size = _partial_vector(ctx, 1), _partial_vector(ctx, 2)
    out: List[Dim] = []
    for k in range(rank):
        d = None if s is None else s[k]
        b = None if begin is None else begin[k]
        z = None if size is None else size[k]
        if z is not None and z < -1:
            raise ctx.error(f"Expected size[{k}] in [0, ...], but got {z}")
        if d is not None and b is not None and z is not None:
            out.append(_slice_dim(d, b, z, k)[1])
        elif d is not None and b is not None and not 0 <= b <= d:
            raise ctx.error(f"Expected begin[{k}] in [0, {d}], but got {b}")
        else:
            out.append(None if z is None or z == -1 else z)
    return [tuple(out)]


@_reference
def _slice_kernel(ctx, x, begin, size):
    if begin.shape != (x.ndim,) or size.shape != (x.ndim,):
        raise ValueError(f"Expected begin and size arguments to be 1-D tensors of size {x.ndim}, "
                         f"but got shapes {list(begin.shape)} and {list(size.shape)} instead.")
    index = []
    for k in range(x.ndim):
        b, z = _slice_dim(x.shape[k], int(begin[k]), int(size[k]), k)
        index.append(slice(b, b + z))
    return _contiguous(x[tuple(index)])


register_op("Slice", inputs=["input: T", "begin: Index", "size: Index"], outputs=["output: T"],
            attrs=["T: {all}", "Index: {i32, i64}"], shape=_slice_shape, kernel=_slice_kernel,
            group="movement", half_native=True,
            doc="The box of ``size`` elements from ``begin`` (size -1: to the end of the dim).")


@dataclass(frozen=True)
class _SliceAxis:
    """One input dim of a StridedSlice once the ellipsis is expanded (TensorFlow's dense spec).

    ``sparse`` indexes begin/end/strides; None for dims the ellipsis covers (whole range).
    """
    sparse: Optional[int]
    begin_masked: bool
    end_masked: bool
    shrink: bool


def _dense_spec(n: int, rank: int, attrs) -> Tuple[List[_SliceAxis], List[Optional[int]]]:
    """Expand StridedSlice's sparse spec of ``n`` entries over an input of ``rank`` dims.

    Returns one _SliceAxis per input dim and, per output dim, the input dim it comes from
    (None for a new axis of size 1; shrunk dims have no output dim).
    """
    ellipsis, new_axis = attrs["ellipsis_mask"], attrs["new_axis_mask"]
    if ellipsis & (ellipsis - 1):
        raise ValueError("Multiple ellipses in slice spec not allowed")
    entries, seen, new_after = n, False, 0
    for i in range(n):
        if seen and new_axis >> i & 1:
            new_after += 1
        if ellipsis >> i & 1:
            seen = True
    if not seen:
        ellipsis |= 1 << n
        entries += 1
    axes: List[_SliceAxis] = []
    final: List[Optional[int]] = []
    for i in range(entries):
        if ellipsis >> i & 1:
            stop = min(rank - (entries - i) + 1 + new_after, rank)
            while len(axes) < stop:
                final.append(len(axes))
                axes.append(_SliceAxis(None, True, True, False))
        elif new_axis >> i & 1:
            final.append(None)
        else:
            if len(axes) == rank:
                raise ValueError(f"Index out of range using input dim {len(axes)}; input has "
                                 f"only {rank} dims")
            shrink = bool(attrs["shrink_axis_mask"] >> i & 1)
            if not shrink:
                final.append(len(axes))
            axes.append(_SliceAxis(i, bool(attrs["begin_mask"] >> i & 1),
                                   bool(attrs["end_mask"] >> i & 1), shrink))
    return axes, final


def _ss_count(start: int, end: int, stride: int) -> int:
    n = end - start
    if n == 0 or (n < 0) != (stride < 0):
        return 0
    q, r = abs(n) // abs(stride), abs(n) % abs(stride)
    return q + (1 if r else 0)


def _ss_resolve(dim: int, b: int, e: int, s: int, ax: _SliceAxis, k: int) -> Tuple[int, int]:
    """(start, count) of input dim ``k`` for begin b, end e, stride s: TensorFlow's rules."""
    if s == 0:
        raise ValueError(f"strides[{k}] must be non-zero")
    if ax.shrink:
        if s <= 0:
            raise ValueError("only stride 1 allowed on non-range indexing.")
        x = b + dim if b < 0 else b
        if not 0 <= x < dim:
            raise ValueError(f"slice index {x} of dimension {k} out of bounds.")
        return x, 1
    lo, hi = (0, dim) if s > 0 else (-1, dim - 1)

    def canonical(x: int, masked: bool, c: int) -> int:
        if masked:
            return lo if (s > 0) == (c == 0) else hi
        x = x + dim if x < 0 else x
        return min(max(x, lo), hi)

    start, end = canonical(b, ax.begin_masked, 0), canonical(e, ax.end_masked, 1)
    return start, _ss_count(start, end, s)


def _ss_size(dim: Dim, b: Optional[int], e: Optional[int], s: Optional[int],
             ax: _SliceAxis, k: int) -> Dim:
    """The output size of input dim ``k`` from what is known at compile time (None: unknown)."""
    if s == 0 or (ax.shrink and s is not None and s <= 0):
        _ss_resolve(0, 0, 0, s, ax, k)                      # raises
    if ax.shrink:
        if dim is not None and b is not None:
            _ss_resolve(dim, b, 0, 1, ax, k)                # checks the index
        return 1
    if dim is None or s is None:
        return None
    if (b is None and not ax.begin_masked) or (e is None and not ax.end_masked):
        return None
    return _ss_resolve(dim, b or 0, e or 0, s, ax, k)[1]


def _ss_inputs(values: Sequence[Optional[Sequence]], ax: _SliceAxis) -> Tuple:
    """(begin, end, stride) of one axis from begin/end/strides values (None when unknown)."""
    if ax.sparse is None:
        return 0, 0, 1
    return tuple(None if v is None else v[ax.sparse] for v in values)


def _strided_slice_shape(ctx):
    s = ctx.input_shape(0)
    lengths = {n for n in (_vector_length(ctx, i) for i in (1, 2, 3)) if n is not None}
    if len(lengths) > 1:
        raise ctx.error("begin, end and strides must all have the same length")
    if s is None or not lengths:
        return [None]
    axes, final = _dense_spec(lengths.pop(), len(s), ctx.attrs)
    values = [_partial_vector(ctx, i) for i in (1, 2, 3)]
    sizes = [_ss_size(s[j], *_ss_inputs(values, ax), ax, j) for j, ax in enumerate(axes)]
    return [tuple(1 if j is None else sizes[j] for j in final)]


@_reference
def _strided_slice_kernel(ctx, x, begin, end, strides):
    if not (begin.ndim == end.ndim == strides.ndim == 1 and begin.size == end.size == strides.size):
        raise ValueError("begin, end and strides must be 1-D and of the same length")
    axes, final = _dense_spec(begin.size, x.ndim, ctx.attrs)
    values = [[int(v) for v in t] for t in (begin, end, strides)]
    index, sizes = [], []
    for j, ax in enumerate(axes):
        b, e, s = _ss_inputs(values, ax)
        start, count = _ss_resolve(x.shape[j], b, e, s, ax, j)
        sizes.append(count)
        if ax.shrink:
            index.append(start)
        elif count == 0:
            index.append(slice(0, 0))
        else:
            stop = start + count * s
            index.append(slice(start, None if stop < 0 else stop, s))
    result = _contiguous(x[tuple(index)])
    return result.reshape([1 if j is None else sizes[j] for j in final])


register_op("StridedSlice", inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
            outputs=["output: T"],
            attrs=["T: {all}", "Index: {i32, i64}", "begin_mask: int = 0", "end_mask: int = 0",
                   "ellipsis_mask: int = 0", "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"],
            shape=_strided_slice_shape, kernel=_strided_slice_kernel, group="movement",
            half_native=True,
            doc="numpy-style basic indexing: begin:end:stride per dim, with masks for omitted "
                "bounds, an ellipsis, new axes and shrunk (integer-indexed) dims.")
