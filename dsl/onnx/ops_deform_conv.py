"""DeformConv (2-D): a convolution whose taps are moved by learned offsets (and weighted by an
optional mask), as the ONNX reference computes it: every tap is a bilinear sample of X
(flowc's ``_GridSample``, zeros padding) at ``base + offset``, then the sampled columns are
multiplied by the mask and contracted with the kernel per group by one BatchMatMulV2.

The tap positions are pixel positions; they reach ``_GridSample`` as normalized coordinates
``(2 p + 1) / L - 1`` (``align_corners=0``), which maps back to p for any size L. The grid is
float64, so that the round trip moves a position by ~1e-16 pixel, not float32's ~1e-7 (which
would make a tap exactly on the padding border read a sliver of the pixel beside it).
"""
from __future__ import annotations

import numpy as np

import dsl as fl
from dsl.onnx.values import binary, index_const, rank_of, static_shape
from dsl.ops import apply_op


def _ints(ctx, name, n, default):
    value = ctx.attr(name, None)
    return [default] * n if not value else [int(v) for v in value]


def lower_deform_conv(ctx):
    x, w, offset = ctx.input(0), ctx.input(1), ctx.input(2)
    bias, mask = ctx.optional_input(3), ctx.optional_input(4)
    if rank_of(x, ctx) != 4:
        raise ctx.error("only 2-D DeformConv is supported (X must be [N, C, H, W])")
    xs, ws, os_ = static_shape(x), static_shape(w), static_shape(offset)
    if None in xs[1:] or None in ws or None in os_[1:]:
        raise ctx.error("needs X's channels and spatial dims, W's shape and the offsets' "
                        "shape known")
    _, c, h, wd = xs
    oc, cg, kh, kw = ws
    oh, ow = os_[2:]
    group, og = int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))
    if c != cg * group or oc % group or c % og:
        raise ctx.error(f"X has {c} channels, W {ws}: group {group} and offset_group {og} do "
                        "not divide them")
    k = kh * kw
    if os_[1] != og * k * 2:
        raise ctx.error(f"offset has {os_[1]} channels, expected offset_group * kH * kW * 2 = "
                        f"{og * k * 2}")
    sh, sw = _ints(ctx, "strides", 2, 1)
    dh, dw = _ints(ctx, "dilations", 2, 1)
    pt, pl = _ints(ctx, "pads", 4, 0)[:2]
    t = x.dtype
    # pixel positions of every tap before the offsets: [kH, oH] rows and [kW, oW] columns
    rows = (np.arange(kh)[:, None] * dh + np.arange(oh)[None, :] * sh - pt).astype(t.np)
    cols = (np.arange(kw)[:, None] * dw + np.arange(ow)[None, :] * sw - pl).astype(t.np)
    f64 = fl.float64
    off = apply_op("Reshape", [fl.cast(offset, f64), index_const([-1, og, kh, kw, 2, oh, ow])])
    dy, dx = apply_op("Unpack", [off], {"num": 2, "axis": 4})             # [N, G, kH, kW, oH, oW]
    py = binary("AddV2", dy, fl.constant(rows.reshape(kh, 1, oh, 1).astype(np.float64)))
    px = binary("AddV2", dx, fl.constant(cols.reshape(1, kw, 1, ow).astype(np.float64)))

    def normalized(p, size):
        two, one = fl.constant(np.float64(2)), fl.constant(np.float64(1))
        scaled = binary("RealDiv", binary("AddV2", binary("Mul", p, two), one),
                        fl.constant(np.float64(size)))
        return binary("Sub", scaled, one)
    grid = apply_op("Pack", [[normalized(px, wd), normalized(py, h)]], {"axis": -1})
    grid = apply_op("Reshape", [grid, index_const([-1, k, oh * ow, 2])])   # [N*G, K, P, 2]
    xg = apply_op("Reshape", [x, index_const([-1, c // og, h, wd])])         # [N*G, C/G, H, W]
    sampled = apply_op("_GridSample", [xg, grid], {"mode": "linear", "padding_mode": "zeros",
                                                   "align_corners": False})
    sampled = apply_op("Reshape", [sampled, index_const([-1, og, c // og, k, oh * ow])])
    if mask is not None:
        m = apply_op("Reshape", [fl.cast(mask, t), index_const([-1, og, 1, k, oh * ow])])
        sampled = binary("Mul", sampled, m)
    columns = apply_op("Reshape", [sampled, index_const([-1, group, (c // group) * k, oh * ow])])
    kernel = apply_op("Reshape", [w, index_const([1, group, oc // group, cg * k])])
    y = apply_op("BatchMatMulV2", [kernel, columns])                         # [N, g, oC/g, P]
    y = apply_op("Reshape", [y, index_const([-1, oc, oh, ow])])
    if bias is not None:
        y = binary("AddV2", y, apply_op("Reshape", [bias, index_const([1, oc, 1, 1])]))
    return y


LOWERINGS = {
    "DeformConv": [(19, None, lower_deform_conv)],
}
