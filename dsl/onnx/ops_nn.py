"""Neural-network ops on ONNX's NCHW layout: Conv, MaxPool, AveragePool, the global pools,
Softmax/LogSoftmax, BatchNormalization, InstanceNormalization, LayerNormalization.

flowc's convolution and pooling are TensorFlow's (NHWC): the lowering transposes in and out,
turns ONNX pads and auto_pad into explicit paddings; a depthwise Conv (group == input channels)
is one DepthwiseConv2dNative, another grouped one one grouped Conv2D (TensorFlow's: input
depth a multiple of the filter's in-channels; one kernel in C) when the input's channels are
known, else a Conv2D per group.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

import dsl as fl
from dsl.onnx import conv_transpose_offsets, pool_windows
from dsl.onnx.values import (binary, index_const, index_scalar, normalize_axis, rank_of,
                             scalar, shape_i64, static_shape, unary)
from dsl.ops import apply_op

_TO_NHWC = [0, 2, 3, 1]
_TO_NCHW = [0, 3, 1, 2]


def _transpose(x, perm):
    return apply_op("Transpose", [x, index_const(perm)])


def _spatial_rank(ctx, x) -> int:
    rank = rank_of(x, ctx)
    if rank not in (3, 4):
        raise ctx.error(f"only 1-D and 2-D {ctx.op_type} are supported (input rank {rank})")
    return rank - 2


def _as_2d(x, spatial: int):
    """NCW -> NCHW with H = 1, so 1-D windows run as 2-D ones."""
    return apply_op("ExpandDims", [x, index_scalar(2)]) if spatial == 1 else x


def _from_2d(y, spatial: int):
    return apply_op("Squeeze", [y], {"squeeze_dims": [2]}) if spatial == 1 else y


def _window_pads(ctx, in_dims: List, kernel: List[int], strides: List[int],
                 dilations: List[int], ceil_mode: bool = False) -> List[Tuple[int, int]]:
    """(before, after) padding of each spatial dim from pads / auto_pad (and ceil_mode)."""
    n = len(kernel)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if None in in_dims:
            raise ctx.error(f"auto_pad {auto_pad} needs the spatial dims known")
        pads = []
        for size, k, s, d in zip(in_dims, kernel, strides, dilations):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small = total // 2
            pads.append((small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small))
        return pads
    if auto_pad == "VALID":
        pairs = [(0, 0)] * n
    elif auto_pad == "NOTSET":
        p = list(ctx.attr("pads", [0] * (2 * n)))
        pairs = list(zip(p[:n], p[n:]))
    else:
        raise ctx.error(f"unknown auto_pad '{auto_pad}'")
    if ceil_mode:
        adjusted = []
        for (b, e), size, k, s, d in zip(pairs, in_dims, kernel, strides, dilations):
            if size is None:
                raise ctx.error("ceil_mode needs the spatial dims known")
            span = (k - 1) * d + 1
            out = -(-(size + b + e - span) // s) + 1
            if (out - 1) * s >= size + b:          # the last window would start in the padding
                out -= 1
            adjusted.append((b, e + max((out - 1) * s + span - (size + b + e), 0)))
        pairs = adjusted
    return pairs


def _ints(ctx, name, n, default):
    value = ctx.attr(name, None)
    return [default] * n if value is None or len(value) == 0 else [int(v) for v in value]


def _pad_nhwc(x, pairs, value=0.0):
    """Pad the H and W dims of an NHWC tensor with ``value``."""
    paddings = fl.constant(np.array([[0, 0], *pairs, [0, 0]], np.int64), dtype=fl.int64)
    padded = apply_op("Pad", [x, paddings])
    if value == 0.0:
        return padded
    inside = apply_op("Pad", [apply_op("Fill", [shape_i64(x), fl.constant(np.uint8(1))]), paddings])
    return fl.where_v2(binary("Equal", inside, fl.constant(np.uint8(1))), padded, scalar(value, x))


def lower_conv(ctx):
    return conv(ctx, ctx.input(0), ctx.input(1), ctx.optional_input(2))


def conv(ctx, x, w, bias=None):
    """ONNX's Conv of ``x`` (NCW or NCHW) by ``w`` with ``ctx``'s attributes (pads, strides,
    dilations, group), plus ``bias`` (or None)."""
    spatial = _spatial_rank(ctx, x)
    wshape = static_shape(w)
    if wshape is None or None in wshape[2:]:
        raise ctx.error("the kernel's spatial dims must be known")
    kernel = [int(k) for k in wshape[2:]]
    strides = _ints(ctx, "strides", spatial, 1)
    dilations = _ints(ctx, "dilations", spatial, 1)
    pads = _window_pads(ctx, static_shape(x)[2:], kernel, strides, dilations)
    if spatial == 1:
        kernel, strides, dilations, pads = [1] + kernel, [1] + strides, [1] + dilations, [(0, 0)] + pads
        w = apply_op("ExpandDims", [w, index_scalar(2)])
    xh = _transpose(_as_2d(x, spatial), _TO_NHWC)
    attrs = {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1],
             "padding": "EXPLICIT", "explicit_paddings": [0, 0, *pads[0], *pads[1], 0, 0]}
    group = ctx.attr("group", 1)
    if group > 1 and wshape[1] == 1:
        # depthwise (group == input channels, each with wshape[0] / group filters): output
        # channel g*M + m is TensorFlow's c*M + m, so [C*M, 1, KH, KW] -> [KH, KW, C, M]
        if wshape[0] is None or wshape[0] % group:
            raise ctx.error(f"the kernel's {wshape[0]} output channels do not divide into "
                            f"{group} groups")
        kh, kw = kernel
        wd = apply_op("Reshape", [w, index_const([group, wshape[0] // group, kh, kw])])
        y = apply_op("DepthwiseConv2dNative", [xh, _transpose(wd, [2, 3, 0, 1])], attrs)
        return _finish_conv(y, bias, spatial)
    wh = _transpose(w, [2, 3, 1, 0])                          # OIHW -> HWIO
    channels = (static_shape(x) or [None, None])[1]
    if group == 1 or (channels is not None and wshape[1] is not None
                      and channels == group * wshape[1]):
        # ONNX's output channel o reads group o // (O / group): TensorFlow's grouped Conv2D
        # (filter [KH, KW, C / group, O]) computes the same, the groups in one kernel
        y = apply_op("Conv2D", [xh, wh], attrs)
    else:
        xs = apply_op("Split", [fl.constant(np.int32(3)), xh], {"num_split": group})
        ws = apply_op("Split", [fl.constant(np.int32(3)), wh], {"num_split": group})
        y = apply_op("ConcatV2", [[apply_op("Conv2D", [a, b], attrs) for a, b in zip(xs, ws)],
                                  index_scalar(3)])
    return _finish_conv(y, bias, spatial)


def _finish_conv(y, bias, spatial: int):
    """The optional bias added to an NHWC convolution output, back in ONNX's layout."""
    if bias is not None:
        y = apply_op("BiasAdd", [y, bias])
    return _from_2d(_transpose(y, _TO_NCHW), spatial)


def lower_conv_transpose(ctx):
    """The transpose of a convolution: flowc's Conv2DBackpropInput, whose forward convolution
    maps the output (Cout channels) back to the input (Cin)."""
    x, w = ctx.input(0), ctx.input(1)
    spatial = rank_of(x, ctx) - 2
    if spatial not in (1, 2, 3):
        raise ctx.error("only 1-D, 2-D and 3-D ConvTranspose are supported "
                        f"(input rank {spatial + 2})")
    xshape, wshape = static_shape(x), static_shape(w)
    if None in xshape or wshape is None or None in wshape:
        raise ctx.error("needs the input and kernel shapes known")
    group = ctx.attr("group", 1)
    kernel = [int(k) for k in wshape[2:]]
    strides = _ints(ctx, "strides", spatial, 1)
    dilations = _ints(ctx, "dilations", spatial, 1)
    out_pad = _ints(ctx, "output_padding", spatial, 0)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    full = [s * (h - 1) + op + span for h, s, op, span in zip(xshape[2:], strides, out_pad, spans)]
    out_shape = ctx.attr("output_shape", None)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if out_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = list(out_shape)[-spatial:] if out_shape is not None else \
            [h * s for h, s in zip(xshape[2:], strides)]
        pads = []
        for f, t in zip(full, target):
            total = max(f - t, 0)
            small = total // 2
            pads.append((total - small, small) if auto_pad == "SAME_LOWER" else (small, total - small))
    elif auto_pad == "VALID":
        pads = [(0, 0)] * spatial
    else:
        p = list(ctx.attr("pads", [0] * (2 * spatial)))
        pads = list(zip(p[:spatial], p[spatial:]))
    out_dims = [f - b - e for f, (b, e) in zip(full, pads)]
    if out_shape is not None:            # past the full size: rows only the bias reaches
        out_dims = [int(t) for t in list(out_shape)[-spatial:]]
    cout = wshape[1] * group
    if spatial == 3:
        win = conv_transpose_offsets.TransposedWindows(
            tuple(xshape[2:]), tuple(kernel), tuple(strides), tuple(dilations), tuple(out_pad),
            tuple(tuple(p) for p in pads), tuple(out_dims))
        return conv_transpose_offsets.conv_transpose(x, w, ctx.optional_input(2), win, group)
    if spatial == 1:
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        pads, out_dims = [(0, 0)] + pads, [1] + out_dims
        w = apply_op("ExpandDims", [w, index_scalar(2)])
    xh = _transpose(_as_2d(x, spatial), _TO_NHWC)
    wh = _transpose(w, [2, 3, 1, 0])                         # [Cin, Cout/g, kh, kw] -> HWOI
    attrs = {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1],
             "padding": "EXPLICIT", "explicit_paddings": [0, 0, *pads[0], *pads[1], 0, 0]}

    def transposed(inp, filt, channels):
        sizes = fl.constant(np.array([xshape[0], *out_dims, channels], np.int32))
        return apply_op("Conv2DBackpropInput", [sizes, filt, inp], attrs)
    if group == 1:
        y = transposed(xh, wh, cout)
    else:
        xs = apply_op("Split", [fl.constant(np.int32(3)), xh], {"num_split": group})
        ws = apply_op("Split", [fl.constant(np.int32(3)), wh], {"num_split": group})
        y = apply_op("ConcatV2", [[transposed(a, b, cout // group) for a, b in zip(xs, ws)],
                                  index_scalar(3)])
    bias = ctx.optional_input(2)
    if bias is not None:
        y = apply_op("BiasAdd", [y, bias])
    return _from_2d(_transpose(y, _TO_NCHW), spatial)


def _pool_setup(ctx):
    x = ctx.input(0)
    spatial = _spatial_rank(ctx, x)
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    strides = _ints(ctx, "strides", spatial, 1)
    dilations = _ints(ctx, "dilations", spatial, 1)
    in_dims = static_shape(x)[2:]
    pads = _window_pads(ctx, in_dims, kernel, strides, dilations, bool(ctx.attr("ceil_mode", 0)))
    explicit = _window_pads(ctx, in_dims, kernel, strides, dilations)     # without ceil_mode
    if spatial == 1:
        kernel, strides = [1] + kernel, [1] + strides
        pads, explicit = [(0, 0)] + pads, [(0, 0)] + explicit
    xh = _transpose(_as_2d(x, spatial), _TO_NHWC)
    attrs = {"ksize": [1, *kernel, 1], "strides": [1, *strides, 1], "padding": "VALID"}
    return xh, attrs, pads, explicit, spatial


def _by_window_offsets(ctx, indices: bool = False) -> bool:
    """Whether a pooling node needs pool_windows: windows flowc's MaxPool/AvgPool don't take."""
    spatial = rank_of(ctx.input(0), ctx) - 2
    return spatial == 3 or indices or any(d != 1 for d in _ints(ctx, "dilations", spatial, 1))


def _windows(ctx):
    """The node's windows (pool_windows.Windows) and its explicit pads (without ceil_mode)."""
    x = ctx.input(0)
    spatial = rank_of(x, ctx) - 2
    if spatial not in (1, 2, 3):
        raise ctx.error(f"only 1-D, 2-D and 3-D {ctx.op_type} are supported "
                        f"(input rank {spatial + 2})")
    in_dims = static_shape(x)[2:]
    if None in in_dims:
        raise ctx.error("dilated and 3-D pooling need the spatial dims known")
    kernel = [int(k) for k in ctx.attr("kernel_shape")]
    strides = _ints(ctx, "strides", spatial, 1)
    dilations = _ints(ctx, "dilations", spatial, 1)
    pads = _window_pads(ctx, in_dims, kernel, strides, dilations, bool(ctx.attr("ceil_mode", 0)))
    explicit = _window_pads(ctx, in_dims, kernel, strides, dilations)
    win = pool_windows.Windows(tuple(in_dims), tuple(kernel), tuple(strides), tuple(dilations),
                               tuple(tuple(p) for p in pads))
    return win, explicit


def _max_pool_by_windows(ctx):
    x = ctx.input(0)
    win, _ = _windows(ctx)
    if not ctx.output_wanted(1):
        return pool_windows.max_pool(x, win)
    n, c = static_shape(x)[:2]
    if n is None or c is None:
        raise ctx.error("the Indices output needs the batch and channel dims known")
    return list(pool_windows.max_pool(x, win, indices=True,
                                      storage_order=ctx.attr("storage_order", 0),
                                      batch_channels=(n, c)))


def lower_max_pool(ctx):
    # storage_order orders the Indices output only, which the window-offset lowering makes
    if _by_window_offsets(ctx, ctx.output_wanted(1)):
        return _max_pool_by_windows(ctx)
    xh, attrs, pads, _, spatial = _pool_setup(ctx)
    dtype = xh.dtype
    if not dtype.is_floating:            # flowc pools floats: integers go through f64 exactly
        xh = fl.cast(xh, fl.float64)
    window = attrs["ksize"][1:3]
    if any(p != (0, 0) for p in pads) and all(b < k and e < k for (b, e), k in zip(pads, window)):
        # padding smaller than the window: MaxPool's own EXPLICIT padding (ignored, as ONNX's)
        attrs = dict(attrs, padding="EXPLICIT",
                     explicit_paddings=[0, 0, *pads[0], *pads[1], 0, 0])
    elif any(p != (0, 0) for p in pads):
        xh = _pad_nhwc(xh, pads, -np.inf)
    y = _transpose(apply_op("MaxPool", [xh], attrs), _TO_NCHW)
    return _from_2d(fl.cast(y, dtype), spatial)


def lower_average_pool(ctx):
    if _by_window_offsets(ctx):
        win, explicit = _windows(ctx)
        counted = explicit if ctx.attr("count_include_pad", 0) else [(0, 0)] * len(explicit)
        return pool_windows.average_pool(ctx.input(0), win, counted)
    xh, attrs, pads, explicit, spatial = _pool_setup(ctx)
    if all(p == (0, 0) for p in pads):
        y = apply_op("AvgPool", [xh], attrs)
    else:
        # windows are full after padding: mean over the padded input, divided by the mean of
        # a mask that is 1 where an element counts (the input, and the pads when included;
        # never the extra padding of ceil_mode)
        if ctx.attr("count_include_pad", 0):
            counted_region = _pad_nhwc(xh, explicit)
            rest = [(p[0] - e[0], p[1] - e[1]) for p, e in zip(pads, explicit)]
        else:
            counted_region, rest = xh, pads
        counted = apply_op("Fill", [shape_i64(counted_region), scalar(1, xh)])
        total = apply_op("AvgPool", [_pad_nhwc(xh, pads)], attrs)
        count = apply_op("AvgPool", [_pad_nhwc(counted, rest)], attrs)
        y = binary("RealDiv", total, count)
    return _from_2d(_transpose(y, _TO_NCHW), spatial)


def _global(op: str):
    def lower(ctx):
        x = ctx.input(0)
        rank = rank_of(x, ctx)
        return apply_op(op, [x, index_const(list(range(2, rank)))], {"keep_dims": True})
    lower.__name__ = f"lower_global_{op.lower()}"
    return lower


def _along(op: str, x, axis: int):
    """(Log)Softmax along ``axis`` (flowc's run along the last one: transpose there and back)."""
    rank = len(static_shape(x))
    if axis == rank - 1:
        return apply_op(op, [x])
    perm = [k for k in range(rank) if k != axis] + [axis]
    back = [perm.index(k) for k in range(rank)]
    return _transpose(apply_op(op, [_transpose(x, perm)]), back)


def log_softmax_along(x, axis: int):
    return _along("LogSoftmax", x, axis)


def _softmax(op: str):
    def lower(ctx):
        x = ctx.input(0)
        rank = rank_of(x, ctx)
        if ctx.opset >= 13:
            return _along(op, x, normalize_axis(ctx.attr("axis", -1), rank, ctx))
        axis = normalize_axis(ctx.attr("axis", 1), rank, ctx)
        shape = static_shape(x)
        inner = shape[axis:]
        if None in inner:
            raise ctx.error("the dims from axis on must be known")
        flat = apply_op("Reshape", [x, index_const([-1, int(np.prod(inner, dtype=np.int64))])])
        return apply_op("Reshape", [apply_op(op, [flat]), shape_i64(x)])
    lower.__name__ = f"lower_{op.lower()}"
    return lower


def _channel_param(p, rank):
    """A per-channel [C] tensor shaped [C, 1, ...] to broadcast over NC... data."""
    return apply_op("Reshape", [p, index_const([-1] + [1] * (rank - 2))])


def lower_batch_norm(ctx):
    """Inference normalizes with the running statistics; training mode (opset 14's attribute,
    or extra outputs before it) with the batch's, and also returns the running statistics
    updated with ``momentum`` (and, before opset 14, the batch statistics)."""
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    training = ctx.attr("training_mode", 0) if ctx.opset >= 14 else ctx.num_outputs > 1
    if not training:
        scale, bias, mean, var = (_channel_param(ctx.input(i), rank) for i in range(1, 5))
        return _batch_normalized(ctx, x, scale, bias, mean, var)
    axes = index_const([0] + list(range(2, rank)))
    batch_mean = apply_op("Mean", [x, axes], {"keep_dims": True})
    centered = binary("Sub", x, batch_mean)
    batch_var = apply_op("Mean", [binary("Mul", centered, centered), axes], {"keep_dims": True})
    scale, bias = _channel_param(ctx.input(1), rank), _channel_param(ctx.input(2), rank)
    y = _batch_normalized(ctx, x, scale, bias, batch_mean, batch_var)
    momentum = ctx.attr("momentum", 0.9)
    flat_mean, flat_var = (apply_op("Reshape", [t, index_const([-1])])
                           for t in (batch_mean, batch_var))

    def running(old, batch):
        return binary("AddV2", binary("Mul", old, scalar(momentum, old)),
                      binary("Mul", batch, scalar(1 - momentum, batch)))
    return [y, running(ctx.input(3), flat_mean), running(ctx.input(4), flat_var),
            flat_mean, flat_var]


def _batch_normalized(ctx, x, scale, bias, mean, var):
    eps = scalar(ctx.attr("epsilon", 1e-5), var)
    inv = unary("Rsqrt", binary("AddV2", var, eps))
    y = binary("Mul", binary("Sub", x, mean), binary("Mul", inv, scale))
    return binary("AddV2", y, bias)


def _normalize(x, axes, eps):
    mean = apply_op("Mean", [x, index_const(axes)], {"keep_dims": True})
    centered = binary("Sub", x, mean)
    var = apply_op("Mean", [binary("Mul", centered, centered), index_const(axes)], {"keep_dims": True})
    inv = unary("Rsqrt", binary("AddV2", var, scalar(eps, x)))
    return binary("Mul", centered, inv), mean, inv


def lower_instance_norm(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    y, _, _ = _normalize(x, list(range(2, rank)), ctx.attr("epsilon", 1e-5))
    y = binary("Mul", y, _channel_param(ctx.input(1), rank))
    return binary("AddV2", y, _channel_param(ctx.input(2), rank))


def lower_layer_norm(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    axis = normalize_axis(ctx.attr("axis", -1), rank, ctx)
    y, mean, inv = _normalize(x, list(range(axis, rank)), ctx.attr("epsilon", 1e-5))
    y = binary("Mul", y, ctx.input(1))
    if ctx.has_input(2):
        y = binary("AddV2", y, ctx.input(2))
    return [y, mean, inv]


def lower_rms_norm(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    axis = normalize_axis(ctx.attr("axis", -1), rank, ctx)
    axes = index_const(list(range(axis, rank)))
    mean_square = apply_op("Mean", [binary("Mul", x, x), axes], {"keep_dims": True})
    inv = unary("Rsqrt", binary("AddV2", mean_square, scalar(ctx.attr("epsilon", 1e-5), x)))
    return binary("Mul", binary("Mul", x, inv), ctx.input(1))


def lower_lp_normalization(ctx):
    x = ctx.input(0)
    axis = normalize_axis(ctx.attr("axis", -1), rank_of(x, ctx), ctx)
    p = ctx.attr("p", 2)
    if p not in (1, 2):
        raise ctx.error(f"p must be 1 or 2, got {p}")
    part = unary("Abs", x) if p == 1 else binary("Mul", x, x)
    norm = apply_op("Sum", [part, index_const([axis])], {"keep_dims": True})
    if p == 2:
        norm = unary("Sqrt", norm)
    safe = fl.where_v2(binary("Equal", norm, scalar(0, norm)), scalar(1, norm), norm)
    return binary("RealDiv", x, safe)


def lower_hardmax(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    axis = normalize_axis(ctx.attr("axis", -1), rank, ctx)
    depth = static_shape(x)[axis]
    if depth is None:
        raise ctx.error(f"dim {axis} must be known")
    first_max = apply_op("ArgMax", [x, index_scalar(axis)], {"output_type": fl.int64})
    return apply_op("OneHot", [first_max, fl.constant(np.int32(depth)), scalar(1, x),
                               scalar(0, x)], {"axis": axis})


def _space_depth(ctx, x, to_depth: bool):
    shape = static_shape(x)
    if shape is None or len(shape) != 4 or None in shape[1:]:
        raise ctx.error("needs an NCHW input with C, H and W known")
    n, c, h, w = shape
    b = ctx.attr("blocksize")
    if to_depth:
        y = apply_op("Reshape", [x, index_const([-1, c, h // b, b, w // b, b])])
        crd = ctx.attr("mode", "DCR") == "CRD"
        y = _transpose(y, [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4])
        return apply_op("Reshape", [y, index_const([-1, c * b * b, h // b, w // b])])
    if ctx.attr("mode", "DCR") == "DCR":
        y = apply_op("Reshape", [x, index_const([-1, b, b, c // (b * b), h, w])])
        y = _transpose(y, [0, 3, 4, 1, 5, 2])
    else:
        y = apply_op("Reshape", [x, index_const([-1, c // (b * b), b, b, h, w])])
        y = _transpose(y, [0, 1, 4, 2, 5, 3])
    return apply_op("Reshape", [y, index_const([-1, c // (b * b), h * b, w * b])])


def lower_space_to_depth(ctx):
    return _space_depth(ctx, ctx.input(0), True)


def lower_depth_to_space(ctx):
    return _space_depth(ctx, ctx.input(0), False)


LOWERINGS = {
    "RMSNormalization": [(23, None, lower_rms_norm)],
    "LpNormalization": [(1, None, lower_lp_normalization)],
    "Hardmax": [(13, None, lower_hardmax)],
    "SpaceToDepth": [(1, None, lower_space_to_depth)],
    "DepthToSpace": [(1, None, lower_depth_to_space)],
    "Conv": [(1, None, lower_conv)],
    "ConvTranspose": [(1, None, lower_conv_transpose)],
    "MaxPool": [(1, None, lower_max_pool)],
    "AveragePool": [(1, None, lower_average_pool)],
    "GlobalAveragePool": [(1, None, _global("Mean"))],
    "GlobalMaxPool": [(1, None, _global("Max"))],
    "Softmax": [(1, None, _softmax("Softmax"))],
    "LogSoftmax": [(1, None, _softmax("LogSoftmax"))],
    "BatchNormalization": [(7, None, lower_batch_norm)],
    "InstanceNormalization": [(6, None, lower_instance_norm)],
    "LayerNormalization": [(17, None, lower_layer_norm)],
}
