"""Shape and movement ops: Reshape, Transpose, Concat, Flatten, (Un)Squeeze, Shape, Size,
Slice, Gather, Expand, Tile, Pad, Split, ConstantOfShape, Range, Constant, Dropout."""
from __future__ import annotations

import numpy as np

import dsl as fl
from dsl.onnx.folding import static_value
from dsl.onnx.values import (binary, full_shape, index_const, index_scalar, normalize_axis,
                             rank_of, scalar, shape_i64, static_shape)
from dsl.ops import apply_op
from dsl.tensor import static_shape

_BIG = 2 ** 31 - 1


def _axes(ctx, attr_until: int, input_index: int = 1):
    """An op's axes: an attribute before opset ``attr_until``, an optional input from it."""
    if ctx.opset < attr_until:
        axes = ctx.attr("axes", None)
        return None if axes is None else [int(a) for a in axes]
    value = ctx.optional_const(input_index, "axes")
    return None if value is None else [int(a) for a in value.reshape(-1)]


def lower_reshape(ctx):
    x = ctx.input(0)
    if ctx.opset < 5:
        target = np.asarray(ctx.attr("shape"), dtype=np.int64)
    else:
        value = static_value(ctx.input(1).output)
        if value is None:
            return _reshape_to_run_time_shape(ctx, x, ctx.input(1))
        target = np.asarray(value).astype(np.int64).reshape(-1)
    zeros = [i for i, d in enumerate(target) if d == 0]
    if zeros and not ctx.attr("allowzero", 0):
        shape = static_shape(x)
        if shape is None:
            raise ctx.error("a 0 in the shape copies an input dim: the input's rank must be known")
        target = target.copy()
        dynamic = []
        for i in zeros:
            if i >= len(shape):
                raise ctx.error(f"shape[{i}] is 0 but the input has rank {len(shape)}")
            if shape[i] is None:
                dynamic.append(i)
            else:
                target[i] = shape[i]
        if dynamic:
            idx = np.minimum(np.arange(len(target)), len(shape) - 1)
            from_input = apply_op("GatherV2", [shape_i64(x), index_const(idx), index_scalar(0)])
            mask = fl.constant(np.isin(np.arange(len(target)), dynamic))
            return apply_op("Reshape", [x, fl.where_v2(mask, from_input, index_const(target))])
    return apply_op("Reshape", [x, index_const(target)])


def _reshape_to_run_time_shape(ctx, x, shape):
    """Reshape to a shape computed at run time (``x.view(x.size(0), -1)`` exported from
    PyTorch on a dynamic batch): ONNX's 0 entries copy the input's dim there."""
    shape = fl.cast(shape, fl.int64)
    if ctx.attr("allowzero", 0):
        return apply_op("Reshape", [x, shape])
    length, rank = static_shape(shape), static_shape(x)
    if length is None or length[0] is None or rank is None:
        raise ctx.error("a shape computed at run time needs a known length and input rank")
    idx = np.minimum(np.arange(length[0]), max(len(rank) - 1, 0))
    from_input = apply_op("GatherV2", [shape_i64(x), index_const(idx), index_scalar(0)])
    zero = binary("Equal", shape, fl.constant(np.int64(0)))
    return apply_op("Reshape", [x, fl.where_v2(zero, from_input, shape)])


def lower_transpose(ctx):
    x = ctx.input(0)
    perm = ctx.attr("perm", None)
    if perm is None:
        perm = list(reversed(range(rank_of(x, ctx))))
    return apply_op("Transpose", [x, index_const(perm)])


def lower_concat(ctx):
    xs = [ctx.input(i) for i in range(len(ctx.inputs)) if ctx.has_input(i)]
    axis = ctx.attr("axis")
    if len(xs) == 1:
        return apply_op("Identity", [xs[0]])
    return apply_op("ConcatV2", [xs, index_scalar(axis)])


def _prod(dims):
    return int(np.prod(dims, dtype=np.int64)) if dims else 1


def lower_flatten(ctx):
    x = ctx.input(0)
    shape = static_shape(x)
    rank = rank_of(x, ctx)
    axis = ctx.attr("axis", 1)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis <= rank:
        raise ctx.error(f"axis {ctx.attr('axis', 1)} is out of range for rank {rank}")
    outer, inner = shape[:axis], shape[axis:]
    if None not in inner:
        lead = -1 if None in outer else _prod(outer)
        return apply_op("Reshape", [x, index_const([lead, _prod(inner)])])
    if None not in outer:
        return apply_op("Reshape", [x, index_const([_prod(outer), -1])])
    dims = shape_i64(x)
    lead = apply_op("Prod", [apply_op("Slice", [dims, index_const([0]), index_const([axis])]),
                             index_const([0])], {"keep_dims": True})
    return apply_op("Reshape", [x, apply_op("ConcatV2", [[lead, index_const([-1])], index_scalar(0)])])


def lower_squeeze(ctx):
    x = ctx.input(0)
    axes = _axes(ctx, 13)
    rank = rank_of(x, ctx)
    if axes is None:
        shape = static_shape(x)
        if None in shape:
            raise ctx.error("Squeeze without axes needs every input dim known")
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = sorted(normalize_axis(a, rank, ctx) for a in axes)
    if not axes:
        return apply_op("Identity", [x])
    return apply_op("Squeeze", [x], {"squeeze_dims": axes})


def lower_unsqueeze(ctx):
    x = ctx.input(0)
    axes = _axes(ctx, 13)
    if axes is None:
        raise ctx.error("needs axes")
    out_rank = rank_of(x, ctx) + len(axes)
    for a in sorted(normalize_axis(a, out_rank, ctx) for a in axes):
        x = apply_op("ExpandDims", [x, index_scalar(a)])
    return x


def lower_shape(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    start, end = ctx.attr("start", 0), ctx.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    shape = full_shape(x)
    if shape is not None:
        return index_const(shape[start:end]) if end > start else \
            fl.constant(np.zeros([0], np.int64), dtype=fl.int64)
    dims = shape_i64(x)
    if (start, end) == (0, rank):
        return dims
    return apply_op("Slice", [dims, index_const([start]), index_const([max(end - start, 0)])])


def lower_size(ctx):
    return apply_op("Size", [ctx.input(0)], {"out_type": fl.int64})


def _slice_axis(start, end, step, dim):
    """(begin, end, begin masked, end masked) of one sliced dim for StridedSlice."""
    if dim is not None:
        b, e, _ = slice(int(start), int(end), int(step)).indices(dim)
        return b, e, False, (step < 0 and e < 0)
    begin_masked = (step > 0 and start <= -_BIG) or (step < 0 and start >= _BIG)
    end_masked = (step > 0 and end >= _BIG) or (step < 0 and end <= -_BIG)
    return start, end, begin_masked, end_masked


def _slice_at_run_time(ctx, x, rank):
    """A Slice whose starts or ends are computed at run time, not from graph inputs (an
    iteration number in a loop body): a StridedSlice with begin/end vectors assembled at run
    time, which clamps them as ONNX does. Its axes and steps must be known."""
    starts, ends = (ctx.input(i) for i in (1, 2))
    count = static_shape(starts)[0] if static_shape(starts) is not None and len(static_shape(starts)) == 1 else None
    axes = ctx.optional_const(3, "axes")
    if axes is None and count is None:
        raise ctx.error("without axes, the length of starts must be known")
    axes = list(range(count)) if axes is None else axes.reshape(-1).tolist()
    steps = ctx.optional_const(4, "steps")
    steps = [1] * len(axes) if steps is None else steps.reshape(-1).tolist()
    axes = [normalize_axis(int(a), rank, ctx) for a in axes]
    if len(set(axes)) != len(axes):
        raise ctx.error(f"axes {axes} repeat an axis")
    if 0 in steps:
        raise ctx.error("a step of 0")
    starts, ends = (t if t.dtype == fl.int64 else fl.cast(t, fl.int64) for t in (starts, ends))
    begin, end, strides = [], [], [1] * rank
    mask = (1 << rank) - 1                         # an axis not sliced is taken whole
    for axis in range(rank):
        if axis not in axes:
            begin.append(index_const([0]))
            end.append(index_const([0]))
            continue
        k = axes.index(axis)
        begin.append(apply_op("Slice", [starts, index_const([k]), index_const([1])]))
        end.append(apply_op("Slice", [ends, index_const([k]), index_const([1])]))
        strides[axis] = int(steps[k])
        mask &= ~(1 << axis)
    begin, end = (apply_op("ConcatV2", [parts, index_scalar(0)]) for parts in (begin, end))
    return apply_op("StridedSlice", [x, begin, end, index_const(strides)],
                    {"begin_mask": mask, "end_mask": mask})


def lower_slice(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    shape = static_shape(x)
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        known = [static_value(ctx.input(i).output) for i in (1, 2)]
        if (known[0] is None or known[1] is None) and not (
                ctx.graph_inputs_of(1, through_shapes=False)
                or ctx.graph_inputs_of(2, through_shapes=False)):
            # computed at run time (a loop's iteration, a dynamic dim's length: x[:, :seq]);
            # read from graph inputs' values: bind them
            return _slice_at_run_time(ctx, x, rank)
        starts = ctx.const(1, "starts").reshape(-1).tolist()
        ends = ctx.const(2, "ends").reshape(-1).tolist()
        axes = ctx.optional_const(3, "axes")
        axes = list(range(len(starts))) if axes is None else axes.reshape(-1).tolist()
        steps = ctx.optional_const(4, "steps")
        steps = [1] * len(starts) if steps is None else steps.reshape(-1).tolist()
    begin, end, strides = [0] * rank, [0] * rank, [1] * rank
    begin_mask = end_mask = (1 << rank) - 1        # an axis not sliced is taken whole
    for start, stop, axis, step in zip(starts, ends, axes, steps):
        axis = normalize_axis(int(axis), rank, ctx)
        if step == 0:
            raise ctx.error("a step of 0")
        b, e, bm, em = _slice_axis(int(start), int(stop), int(step), shape[axis])
        begin[axis], end[axis], strides[axis] = b, e, int(step)
        if not bm:
            begin_mask &= ~(1 << axis)
        if not em:
            end_mask &= ~(1 << axis)
    return apply_op("StridedSlice", [x, index_const(begin), index_const(end), index_const(strides)],
                    {"begin_mask": begin_mask, "end_mask": end_mask})


def lower_gather(ctx):
    params, indices = ctx.input(0), ctx.input(1)
    rank = rank_of(params, ctx)
    axis = normalize_axis(ctx.attr("axis", 0), rank, ctx)
    dim = static_shape(params)[axis]
    value = static_value(indices.output)
    if value is not None and dim is not None:
        fixed = np.where(value < 0, value + dim, value).astype(value.dtype)
        indices = fl.constant(fixed, dtype=indices.dtype)
    else:
        size = scalar(dim, indices) if dim is not None else fl.cast(
            apply_op("GatherV2", [shape_i64(params), index_scalar(axis), index_scalar(0)]),
            indices.dtype)
        indices = fl.where_v2(binary("Less", indices, scalar(0, indices)),
                           binary("AddV2", indices, size), indices)
    return apply_op("GatherV2", [params, indices, index_scalar(axis)])


def lower_expand(ctx):
    x = ctx.input(0)
    value = static_value(ctx.input(1).output)
    shape = fl.cast(ctx.input(1), fl.int64) if value is None else index_const(value)
    if x.dtype == fl.bool_:
        return binary("LogicalOr", x, apply_op("Fill", [shape, fl.constant(False)]))
    return binary("Mul", x, apply_op("Fill", [shape, scalar(1, x)]))


def lower_tile(ctx):
    return apply_op("Tile", [ctx.input(0), fl.cast(ctx.input(1), fl.int64)])


def lower_pad(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise ctx.error(f"unknown mode '{mode}'")
    if ctx.opset < 11:
        pads = np.asarray(ctx.attr("pads"), dtype=np.int64)
        value = ctx.attr("value", 0.0)
    else:
        pads = ctx.const(1, "pads").astype(np.int64).reshape(-1)
        value = ctx.optional_const(2, "constant_value")
        value = 0 if value is None else value.reshape(-1)[0] if value.size else 0
    axes = ctx.optional_const(3, "axes") if ctx.opset >= 18 else None
    axes = list(range(rank)) if axes is None else [normalize_axis(int(a), rank, ctx) for a in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads has {len(pads)} values for {len(axes)} axes")
    if (pads < 0).any():
        raise ctx.error("negative pads (cropping) are not supported")
    paddings = np.zeros([rank, 2], np.int64)
    for k, axis in enumerate(axes):
        paddings[axis] = [pads[k], pads[k + len(axes)]]
    if mode != "constant":
        return _pad_by_gather(ctx, x, paddings, mode)
    padded = apply_op("Pad", [x, fl.constant(paddings, dtype=fl.int64)])
    if value == 0:
        return padded
    inside = apply_op("Pad", [apply_op("Fill", [shape_i64(x), fl.constant(np.uint8(1))]),
                              fl.constant(paddings, dtype=fl.int64)])
    return fl.where_v2(binary("Equal", inside, fl.constant(np.uint8(1))), padded, scalar(value, x))


def _pad_by_gather(ctx, x, paddings, mode: str):
    """edge / reflect / wrap padding: a gather along each padded axis with the source index of
    every output position (the dims must be known)."""
    shape = static_shape(x)
    for axis, (before, after) in enumerate(paddings):
        if before == 0 and after == 0:
            continue
        dim = shape[axis]
        if dim is None:
            raise ctx.error(f"{mode} padding needs dim {axis} known")
        pos = np.arange(-before, dim + after)
        if mode == "edge":
            idx = np.clip(pos, 0, dim - 1)
        elif mode == "wrap":
            idx = pos % dim
        else:
            if dim == 1:
                idx = np.zeros_like(pos)
            else:
                period = 2 * (dim - 1)
                idx = np.abs(pos) % period
                idx = np.where(idx >= dim, period - idx, idx)
        x = apply_op("GatherV2", [x, index_const(idx), index_scalar(axis)])
    return x


def lower_split(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    axis = normalize_axis(ctx.attr("axis", 0), rank, ctx)
    dim = static_shape(x)[axis]
    n = ctx.num_outputs
    if ctx.opset < 13:
        sizes = ctx.attr("split", None)
    else:
        sizes = ctx.optional_const(1, "split")
        sizes = None if sizes is None else sizes.reshape(-1).tolist()
    if sizes is None:
        n = ctx.attr("num_outputs", n)
        if dim is None:
            return apply_op("Split", [fl.constant(np.int32(axis)), x], {"num_split": n})
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    if len(sizes) == 1:
        return [apply_op("Identity", [x])]
    return apply_op("SplitV", [x, index_const(sizes), fl.constant(np.int32(axis))],
                    {"num_split": len(sizes)})


def lower_constant_of_shape(ctx):
    value = ctx.attr("value", np.zeros([1], np.float32))
    value = np.asarray(value).reshape(-1)[:1].reshape(())
    shape = ctx.input(0)
    fill_value = fl.constant(value, dtype=fl.DType.from_numpy(value.dtype))
    return apply_op("Fill", [fl.cast(shape, fl.int64), fill_value])


def lower_range(ctx):
    return apply_op("Range", [ctx.input(0), ctx.input(1), ctx.input(2)])


def lower_constant(ctx):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in ctx.attrs:
            value = np.asarray(ctx.attrs[key])
            if key.startswith("value_float"):
                value = value.astype(np.float32)
            elif key.startswith("value_int"):
                value = value.astype(np.int64)
            try:
                dtype = fl.DType.from_numpy(value.dtype)
            except TypeError:
                raise ctx.error(f"a constant of type {value.dtype}, which flowc does not have") from None
            return fl.constant(value, dtype=dtype)
    raise ctx.error(f"unsupported constant attribute(s) {', '.join(ctx.attrs) or '(none)'}")


def lower_dropout(ctx):
    """Identity in inference. In training mode (opset 12's ``training_mode`` input, known at
    compile time or fed) each element is kept when a uniform number in [0, 1) is at least
    ``ratio`` and scaled by 1 / (1 - ratio). The numbers are flowc's (Philox streams seeded
    from the ``seed`` attribute, as ``fl.random_uniform``); ONNX leaves the generator to the
    backend, so masks agree with other backends in distribution only."""
    x = ctx.input(0)
    training = ctx.optional_input(2) if ctx.opset >= 12 else None
    known = static_value(training.output) if training is not None else None
    if training is None or (known is not None and not bool(np.asarray(known).reshape(-1)[0])):
        y = apply_op("Identity", [x])
        if ctx.output_wanted(1):
            return [y, apply_op("Fill", [shape_i64(x), fl.constant(True)])]
        return y
    ratio = ctx.optional_input(1)
    if ratio is None:
        ratio = scalar(0.5, x)
    else:
        ratio = fl.cast(apply_op("Reshape", [ratio, index_const([])]), x.dtype)
    seed = ctx.attr("seed", None)
    uniform = fl.random_uniform(shape_i64(x), dtype=x.dtype,
                                seed=None if seed is None else int(seed))
    keep = binary("GreaterEqual", uniform, ratio)
    scale = binary("RealDiv", scalar(1, x), binary("Sub", scalar(1, x), ratio))
    y = fl.where_v2(keep, binary("Mul", x, scale), scalar(0, x))
    if known is None:                   # training_mode fed at run time
        flag = apply_op("Reshape", [fl.cast(training, fl.bool_), index_const([])])
        y = fl.where_v2(flag, y, x)
        keep = binary("LogicalOr", keep, apply_op("LogicalNot", [flag]))
    return [y, keep] if ctx.output_wanted(1) else y


def lower_trilu(ctx):
    x = ctx.input(0)
    shape = static_shape(x)
    if shape is None or len(shape) < 2 or None in shape[-2:]:
        raise ctx.error("needs the last two dims known")
    k = ctx.optional_const(1, "k")
    k = 0 if k is None else int(k.reshape(-1)[0])
    rows, cols = np.arange(shape[-2])[:, None], np.arange(shape[-1])[None, :]
    keep = (cols - rows >= k) if ctx.attr("upper", 1) else (cols - rows <= k)
    zero = fl.constant(np.zeros([], x.dtype.np), dtype=x.dtype)
    return fl.where_v2(fl.constant(keep), x, zero)


def lower_one_hot(ctx):
    indices = ctx.input(0)
    depth = int(ctx.const(1, "depth").reshape(-1)[0])
    values = ctx.input(2)
    off = apply_op("GatherV2", [values, index_scalar(0), index_scalar(0)])
    on = apply_op("GatherV2", [values, index_scalar(1), index_scalar(0)])
    idx = fl.cast(indices, fl.int64)
    idx = fl.where_v2(binary("Less", idx, scalar(0, idx)),
                      binary("AddV2", idx, scalar(depth, idx)), idx)
    return apply_op("OneHot", [idx, fl.constant(np.int32(depth)), on, off],
                    {"axis": normalize_axis(int(ctx.attr("axis", -1)), rank_of(indices, ctx) + 1, ctx)})


def lower_eye_like(ctx):
    x = ctx.input(0)
    shape = full_shape(x)
    if shape is None or len(shape) != 2:
        raise ctx.error("needs a 2-D input of known shape")
    elem = ctx.attr("dtype", None)
    from dsl.onnx.dtypes import flowc_dtype
    dtype = x.dtype if elem is None else flowc_dtype(elem)
    if dtype is None:
        raise ctx.error(f"dtype {elem} is not a flowc dtype")
    return fl.constant(np.eye(shape[0], shape[1], k=ctx.attr("k", 0)).astype(dtype.np), dtype=dtype)




LOWERINGS = {
    "Trilu": [(14, None, lower_trilu)],
    "OneHot": [(9, None, lower_one_hot)],
    "EyeLike": [(9, None, lower_eye_like)],
    "Reshape": [(5, None, lower_reshape)],
    "Transpose": [(1, None, lower_transpose)],
    "Concat": [(4, None, lower_concat)],
    "Flatten": [(1, None, lower_flatten)],
    "Squeeze": [(1, None, lower_squeeze)],
    "Unsqueeze": [(1, None, lower_unsqueeze)],
    "Shape": [(1, None, lower_shape)],
    "Size": [(1, None, lower_size)],
    "Slice": [(1, None, lower_slice)],
    "Gather": [(1, None, lower_gather)],
    "Expand": [(8, None, lower_expand)],
    "Tile": [(6, None, lower_tile)],
    "Pad": [(2, None, lower_pad)],
    "Split": [(2, None, lower_split)],
    "ConstantOfShape": [(9, None, lower_constant_of_shape)],
    "Range": [(11, None, lower_range)],
    "Constant": [(1, None, lower_constant)],
    "Dropout": [(1, None, lower_dropout)],
}
