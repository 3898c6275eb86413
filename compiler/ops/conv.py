"""Convolution and pooling: Conv2D and its two backprops, MaxPool, AvgPool and their gradients,
with TensorFlow's window arithmetic (SAME puts the smaller half of the padding before:
pad_before = pad_total // 2). NHWC everywhere; NCHW in the reference interpreter only (the
NHWC code on transposed operands), a compile-time error in C.

C kernels: convolutions are im2col (col2im for the input gradient) plus OpenBLAS gemm, over
chunks of rows of the column matrix sized to stay in a core's L2 cache; pooling is direct loops
over all channels of a window at once. MaxPool takes the first maximum of a window (a later
element replaces it only if strictly greater), which is also where MaxPoolGrad routes the
gradient, as TensorFlow's CPU kernels do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from compiler.codegen.kernel_context import KernelContext as CKernelContext
from compiler.errors import ExecutionError
from compiler.ir.construct import constant_value
from compiler.ir.types import shape_str
from compiler.ops.nn import GEMM_PARALLEL_MIN_WORK, parallel_gemm
from compiler.ops.reduction import module_helper
from compiler.ir.op_registry import get_op, register_op
from runtime.dtypes import DType

_MODES = {"VALID": 0, "SAME": 1, "EXPLICIT": 2}
_ATTR_MAX = 2**31 - 1                # attrs are bounded so window arithmetic cannot overflow


# --- window arithmetic (TensorFlow's GetWindowedOutputSize) --------------------------------
def _trunc_div(a: int, b: int) -> int:
    """a / b rounded toward zero, as C (and TensorFlow) divide."""
    q = abs(a) // b
    return q if a >= 0 else -q


def window(size: int, k: int, s: int, d: int, padding: str, pads: Tuple[int, int]) -> Tuple[int, int]:
    """(output size, padding before) of one spatial dim; output < 0 means an invalid window."""
    ek = (k - 1) * d + 1
    if padding == "SAME":
        out = _trunc_div(size + s - 1, s)
        return out, max((out - 1) * s + ek - size, 0) // 2
    before, after = pads if padding == "EXPLICIT" else (0, 0)
    return _trunc_div(size + before + after - ek + s, s), before


@dataclass
class Geometry:
    """Attrs of a convolution or pooling, as (height, width) pairs."""
    strides: Tuple[int, int]
    dilations: Tuple[int, int]
    padding: str
    pads: Tuple[Tuple[int, int], Tuple[int, int]]

    def dims(self, h: Optional[int], w: Optional[int], kh: Optional[int], kw: Optional[int]):
        """(out_h, out_w, pad_top, pad_left); None where an input is unknown."""
        res = []
        for size, k, i in ((h, kh, 0), (w, kw, 1)):
            if size is None or k is None:
                res.append((None, None))
            else:
                res.append(window(size, k, self.strides[i], self.dilations[i], self.padding, self.pads[i]))
        return res[0][0], res[1][0], res[0][1], res[1][1]


def _geometry(attrs, err, ksize: bool = False) -> Geometry:
    """Validate the NHWC attrs (strides, dilations or ksize, padding) and return them."""
    fmt = attrs.get("data_format", "NHWC")
    if fmt != "NHWC":
        raise err(f"data_format {fmt!r} is not supported here (NHWC; NCHW in the interpreter only)")
    names = ["strides", "ksize"] if ksize else ["strides", "dilations"]
    pairs = []
    for name in names:
        v = list(attrs[name])
        if len(v) != 4:
            raise err(f"{name} must have 4 elements (NHWC), got {v}")
        if v[0] != 1 or v[3] != 1:
            raise err(f"{name} over the batch and depth dims must be 1, got {v}")
        if not all(1 <= x <= _ATTR_MAX for x in v):
            raise err(f"{name} must be positive (and below 2**31), got {v}")
        pairs.append((v[1], v[2]))
    padding = attrs["padding"]
    if padding not in _MODES or (ksize and padding == "EXPLICIT"):
        raise err(f"padding {padding!r} is not supported here")
    pads = ((0, 0), (0, 0))
    if padding == "EXPLICIT":
        e = list(attrs.get("explicit_paddings", []))
        if len(e) != 8 or any(x != 0 for x in e[:2] + e[6:]) or not all(0 <= x <= _ATTR_MAX for x in e):
            raise err("EXPLICIT padding needs explicit_paddings of 8 non-negative values with "
                      f"zeros for the batch and depth dims, got {e}")
        pads = ((e[2], e[3]), (e[4], e[5]))
    elif attrs.get("explicit_paddings"):
        raise err("explicit_paddings must be empty unless padding is EXPLICIT")
    if ksize:
        return Geometry(pairs[0], (1, 1), padding, pads)
    return Geometry(pairs[0], pairs[1], padding, pads)


def _ref_error(ctx):
    return lambda m: ExecutionError(m, ctx.node)


def _rank4(ctx, i: int, what: str):
    s = ctx.input_shape(i)
    if s is not None and len(s) != 4:
        raise ctx.error(f"{what} must be rank 4, got shape {shape_str(s)}")
    return s if s is not None else (None,) * 4


def _sizes_value(ctx, i: int, what: str):
    """The 4 values of a shape-like input if constant (checked), else None."""
    s = ctx.input_shape(i)
    if s is not None and (len(s) != 1 or s[0] not in (None, 4)):
        raise ctx.error(f"{what} must be a vector of 4 elements, got shape {shape_str(s)}")
    v = ctx.input_value(i)
    if v is None:
        return None
    v = [int(x) for x in np.reshape(v, -1)]
    if len(v) != 4 or min(v) < 0:
        raise ctx.error(f"{what} must be 4 non-negative sizes, got {v}")
    return tuple(v)


def _merge(a, b):
    return a if a is not None else b


def _check_out(ctx, g: Geometry, x, kh, kw):
    """Output (N, OH, OW) of a window over NHWC ``x``; a negative size is a shape error."""
    oh, ow, _, _ = g.dims(x[1], x[2], kh, kw)
    for o in (oh, ow):
        if o is not None and o < 0:
            raise ctx.error(f"computed output size would be negative (input {shape_str(x)}, "
                            f"window {kh}x{kw}, padding {g.padding})")
    return x[0], oh, ow


def _expect(ctx, name: str, got, want) -> None:
    """Shape ``got`` of input ``name`` must agree with ``want`` where both are known."""
    for a, b in zip(got, want):
        if a is not None and b is not None and a != b:
            raise ctx.error(f"{name} has shape {shape_str(tuple(got))}, expected {shape_str(tuple(want))}")


# --- shape functions -------------------------------------------------------------------------
def _conv_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error)
    x, f = _rank4(ctx, 0, "input"), _rank4(ctx, 1, "filter")
    _expect(ctx, "filter in-channels", (f[2],), (x[3],))
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    return [(n, oh, ow, f[3])]


def _conv_input_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error)
    sizes = _sizes_value(ctx, 0, "input_sizes") or (None,) * 4
    f, dy = _rank4(ctx, 1, "filter"), _rank4(ctx, 2, "out_backprop")
    x = (_merge(sizes[0], dy[0]), sizes[1], sizes[2], _merge(sizes[3], f[2]))
    _expect(ctx, "filter in-channels", (f[2],), (sizes[3],))
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    _expect(ctx, "out_backprop", dy, (n, oh, ow, f[3]))
    return [x]


def _conv_filter_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error)
    x, dy = _rank4(ctx, 0, "input"), _rank4(ctx, 2, "out_backprop")
    sizes = _sizes_value(ctx, 1, "filter_sizes") or (None,) * 4
    f = (sizes[0], sizes[1], _merge(sizes[2], x[3]), _merge(sizes[3], dy[3]))
    _expect(ctx, "filter_sizes in-channels", (sizes[2],), (x[3],))
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    _expect(ctx, "out_backprop", dy, (n, oh, ow, f[3]))
    return [f]


def _pool_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error, ksize=True)
    x = _rank4(ctx, 0, "input")
    k = ctx.attr("ksize")
    n, oh, ow = _check_out(ctx, g, x, k[1], k[2])
    return [(n, oh, ow, x[3])]


def _max_pool_grad_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error, ksize=True)
    x, y, dy = (_rank4(ctx, i, n) for i, n in enumerate(("orig_input", "orig_output", "grad")))
    k = ctx.attr("ksize")
    n, oh, ow = _check_out(ctx, g, x, k[1], k[2])
    _expect(ctx, "orig_output", y, (n, oh, ow, x[3]))
    _expect(ctx, "grad", dy, (n, oh, ow, x[3]))
    return [x]


def _avg_pool_grad_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error, ksize=True)
    sizes = _sizes_value(ctx, 0, "orig_input_shape") or (None,) * 4
    dy = _rank4(ctx, 1, "grad")
    k = ctx.attr("ksize")
    x = (_merge(sizes[0], dy[0]), sizes[1], sizes[2], _merge(sizes[3], dy[3]))
    n, oh, ow = _check_out(ctx, g, x, k[1], k[2])
    _expect(ctx, "grad", dy, (n, oh, ow, x[3]))
    return [x]


# --- numpy reference kernels -----------------------------------------------------------------
def _ref_geometry(ctx, x_shape, kh: int, kw: int, ksize: bool = False):
    """(geometry, OH, OW, pads) for a concrete NHWC input shape; errors as ExecutionError."""
    g = _geometry(ctx.attrs, _ref_error(ctx), ksize)
    oh, ow, pt, pl = g.dims(x_shape[1], x_shape[2], kh, kw)
    if oh < 0 or ow < 0:
        raise ExecutionError(f"computed output size would be negative (input {list(x_shape)}, "
                             f"window {kh}x{kw}, padding {g.padding})", ctx.node)
    return g, oh, ow, pt, pl


def _taps(g: Geometry, x_shape, kh: int, kw: int, oh: int, ow: int, pt: int, pl: int):
    """Per filter tap (i, j): the padded input's (rows, cols) slices it reads for all outputs,
    and the padding ((top, bottom), (left, right)) that makes every slice in range."""
    (sh, sw), (dh, dw) = g.strides, g.dilations
    need_h = max((oh - 1) * sh + (kh - 1) * dh + 1, 0)
    need_w = max((ow - 1) * sw + (kw - 1) * dw + 1, 0)
    pads = ((pt, max(need_h - pt - x_shape[1], 0)), (pl, max(need_w - pl - x_shape[2], 0)))
    taps = [(i, j, slice(i * dh, i * dh + (oh - 1) * sh + 1, sh) if oh else slice(0, 0),
             slice(j * dw, j * dw + (ow - 1) * sw + 1, sw) if ow else slice(0, 0))
            for i in range(kh) for j in range(kw)]
    return taps, pads


def _padded(x: np.ndarray, pads, value=0) -> np.ndarray:
    return np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)), constant_values=value)


def _check_channels(ctx, c_x: int, c_f: int) -> None:
    if c_x != c_f:
        raise ExecutionError(f"input depth {c_x} does not match filter in-channels {c_f}", ctx.node)


def _conv_ref(ctx, x, f):
    kh, kw, c, o = f.shape
    _check_channels(ctx, x.shape[3], c)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x.shape, kh, kw)
    taps, pads = _taps(g, x.shape, kh, kw, oh, ow, pt, pl)
    xp = _padded(x, pads)
    y = np.zeros((x.shape[0], oh, ow, o), x.dtype)
    for i, j, rs, cs in taps:
        y += xp[:, rs, cs, :] @ f[i, j]
    return y


def _sizes(ctx, v: np.ndarray, what: str) -> Tuple[int, ...]:
    s = [int(a) for a in np.reshape(v, -1)]
    if v.ndim != 1 or len(s) != 4 or min(s) < 0:
        raise ExecutionError(f"{what} must be 4 non-negative sizes, got {s}", ctx.node)
    return tuple(s)


def _check_grad(ctx, dy_shape, want, what: str = "out_backprop") -> None:
    if tuple(dy_shape) != tuple(want):
        raise ExecutionError(f"{what} has shape {list(dy_shape)}, expected {list(want)}", ctx.node)


def _conv_input_ref(ctx, sizes, f, dy):
    x_shape = _sizes(ctx, sizes, "input_sizes")
    kh, kw, c, o = f.shape
    _check_channels(ctx, x_shape[3], c)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x_shape, kh, kw)
    _check_grad(ctx, dy.shape, (x_shape[0], oh, ow, o))
    taps, pads = _taps(g, x_shape, kh, kw, oh, ow, pt, pl)
    dxp = _padded(np.zeros(x_shape, dy.dtype), pads)
    for i, j, rs, cs in taps:
        dxp[:, rs, cs, :] += dy @ f[i, j].T
    return np.ascontiguousarray(dxp[:, pt:pt + x_shape[1], pl:pl + x_shape[2], :])


def _conv_filter_ref(ctx, x, sizes, dy):
    kh, kw, c, o = _sizes(ctx, sizes, "filter_sizes")
    _check_channels(ctx, x.shape[3], c)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x.shape, kh, kw)
    _check_grad(ctx, dy.shape, (x.shape[0], oh, ow, o))
    taps, pads = _taps(g, x.shape, kh, kw, oh, ow, pt, pl)
    xp = _padded(x, pads)
    df = np.zeros((kh, kw, c, o), x.dtype)
    rows = x.shape[0] * oh * ow
    d2 = dy.reshape(rows, o)
    for i, j, rs, cs in taps:
        df[i, j] = xp[:, rs, cs, :].reshape(rows, c).T @ d2
    return df


def _pool_windows(ctx, x_shape):
    """Taps of a pooling window with a mask of the in-range (unpadded) positions."""
    k = ctx.attrs["ksize"]
    g, oh, ow, pt, pl = _ref_geometry(ctx, x_shape, k[1], k[2], ksize=True)
    taps, pads = _taps(g, x_shape, k[1], k[2], oh, ow, pt, pl)
    valid = _padded(np.ones((1,) + tuple(x_shape[1:3]) + (1,), bool), pads, False)
    return taps, pads, valid, (x_shape[0], oh, ow, x_shape[3])


def max_pool_argmax(ctx, x: np.ndarray):
    """(MaxPool output, flat h*W+w index of the chosen element): the first maximum wins."""
    taps, pads, valid, out_shape = _pool_windows(ctx, x.shape)
    xp = _padded(x, pads)
    w = x.shape[2]
    rows = np.arange(xp.shape[1])[None, :, None, None] - pads[0][0]
    cols = np.arange(xp.shape[2])[None, None, :, None] - pads[1][0]
    flat = rows * w + cols
    best = np.zeros(out_shape, x.dtype)
    idx = np.zeros(out_shape, np.int64)
    seen = np.zeros(out_shape, bool)
    for _, _, rs, cs in taps:
        v, m = xp[:, rs, cs, :], valid[:, rs, cs, :]
        take = m & (~seen | (v > best))
        best = np.where(take, v, best)
        idx = np.where(take, flat[:, rs, cs, :], idx)
        seen |= m
    return best, idx


def _max_pool_ref(ctx, x):
    return max_pool_argmax(ctx, x)[0]


def _avg_pool_ref(ctx, x):
    taps, pads, valid, out_shape = _pool_windows(ctx, x.shape)
    xp = _padded(x, pads)
    total = np.zeros(out_shape, x.dtype)
    count = np.zeros(out_shape[1:3] + (1,), np.int64)
    for _, _, rs, cs in taps:
        total += xp[:, rs, cs, :]
        count += valid[0, rs, cs, :]
    return (total / np.maximum(count, 1).astype(x.dtype)).astype(x.dtype)


def _max_pool_grad_ref(ctx, x, y, dy):
    best, idx = max_pool_argmax(ctx, x)
    _check_grad(ctx, y.shape, best.shape, "orig_output")
    _check_grad(ctx, dy.shape, best.shape, "grad")
    n, h, w, c = x.shape
    dx = np.zeros(n * h * w * c, dy.dtype)
    nn = np.arange(n)[:, None, None, None]
    cc = np.arange(c)[None, None, None, :]
    np.add.at(dx, ((nn * h * w + idx) * c + cc).reshape(-1), dy.reshape(-1))
    return dx.reshape(x.shape)


def _avg_pool_grad_ref(ctx, sizes, dy):
    x_shape = _sizes(ctx, sizes, "orig_input_shape")
    taps, pads, valid, out_shape = _pool_windows(ctx, x_shape)
    _check_grad(ctx, dy.shape, out_shape, "grad")
    count = np.zeros(out_shape[1:3] + (1,), np.int64)
    for _, _, rs, cs in taps:
        count += valid[0, rs, cs, :]
    share = dy / np.maximum(count, 1).astype(dy.dtype)
    dxp = _padded(np.zeros(x_shape, dy.dtype), pads)
    for _, _, rs, cs in taps:
        dxp[:, rs, cs, :] += share
    return np.ascontiguousarray(dxp[:, pads[0][0]:pads[0][0] + x_shape[1],
                                    pads[1][0]:pads[1][0] + x_shape[2], :])


# --- C ---------------------------------------------------------------------------------------
def _helpers(kc: CKernelContext, dtype: DType) -> str:
    """Add the module helpers for ``dtype``; returns the name suffix of its functions."""
    sfx = dtype.ir_name
    module_helper(kc, "flowc_conv_window", kc.render("conv.c.j2", part="window"))
    if base_op(kc.node.op).startswith("Conv"):
        kc.require("blas")
        if kc.target.name == "cuda":            # the CUDA twin of conv.c.j2 names no gemm
            gemm = "scipy_cblas_sgemm" if dtype is DType.f32 else "scipy_cblas_dgemm"
        else:
            gemm = parallel_gemm(kc, dtype)      # shares flowc's threads (nn.py)
        module_helper(kc, f"flowc_conv_{sfx}", kc.render("conv.c.j2", part="conv", sfx=sfx,
                                                         T=kc.target.c_type(dtype), gemm=gemm,
                                                         min_work=GEMM_PARALLEL_MIN_WORK))
    else:
        index = "int32_t" if dtype.itemsize == 4 else "int64_t"
        module_helper(kc, f"flowc_pool_{sfx}", kc.render("pool.c.j2", sfx=sfx,
                                                         T=kc.target.c_type(dtype), I=index,
                                                         I_MAX=index.upper()[:-2] + "_MAX"))
    return sfx


def _sizes_c(kc: CKernelContext, i: int) -> List[str]:
    """The 4 values of shape-like input ``i`` as C (literals when constant), checked >= 0."""
    v = constant_value(kc.node.inputs[i])
    if v is not None:
        return [str(int(a)) for a in np.reshape(v, -1)]
    ref, name = kc.inputs[i], get_op(kc.node.op).inputs[i].name
    kc.check_dims_equal(ref.size, "4", f"{name} must have 4 elements")
    vals = [f"(int64_t){ref.data}[{k}]" for k in range(4)]
    for k, e in enumerate(vals):
        kc.check(f"{e} >= 0", f"{name}[{k}] must be non-negative, got %lld", f"(long long)({e})")
    return vals


def check_output_sizes(kc: CKernelContext, geo: "CGeometry") -> None:
    """The window's output height and width must not be negative: checked now when they are
    known, at run time otherwise."""
    for axis in (0, 1):
        out = geo.out(axis)
        if out.lstrip("-").isdigit():
            if int(out) < 0:
                raise kc.error("computed output size would be negative")
        else:
            kc.check(f"{out} >= 0", "computed output size would be negative (or is too large)")


@dataclass
class CGeometry:
    """C expressions of one convolution/pooling problem (NHWC input x, KHxKWxCxO filter)."""
    x: List[str]
    kh: str
    kw: str
    o: str
    g: Geometry

    def window_args(self, axis: int) -> str:
        k = (self.kh, self.kw)[axis]
        pads = self.g.pads[axis]
        return (f"{self.x[1 + axis]}, {k}, {self.g.strides[axis]}, {self.g.dilations[axis]}, "
                f"{_MODES[self.g.padding]}, {pads[0]}, {pads[1]}")

    def _static(self, axis: int) -> Optional[Tuple[int, int]]:
        size, k = self.x[1 + axis], (self.kh, self.kw)[axis]
        if not (size.isdigit() and k.isdigit()):
            return None
        return window(int(size), int(k), self.g.strides[axis], self.g.dilations[axis],
                      self.g.padding, self.g.pads[axis])

    def out(self, axis: int) -> str:
        """Output size along ``axis`` (0: height, 1: width): a literal when static."""
        known = self._static(axis)
        return str(known[0]) if known else f"flowc_conv_out({self.window_args(axis)})"

    def pad(self, axis: int) -> str:
        known = self._static(axis)
        return str(known[1]) if known else f"flowc_conv_pad({self.window_args(axis)})"

    def out_dims(self) -> List[str]:
        return [self.x[0], self.out(0), self.out(1), self.o]

    def call_args(self) -> str:
        """Arguments N, H, W, C, KH, KW, O, OH, OW, sh, sw, dh, dw, pt, pl of the helpers."""
        oh, ow = self.out_dims()[1:3]
        return ", ".join(self.x + [self.kh, self.kw, self.o, oh, ow,
                                   *map(str, self.g.strides + self.g.dilations),
                                   self.pad(0), self.pad(1)])


def _c_geometry(kc: CKernelContext) -> CGeometry:
    """Geometry of the node in C; the first call adds run-time checks of all the shapes."""
    cached = getattr(kc, "_conv_geometry", None)
    if cached is not None:
        return cached
    kc._conv_geometry = geo = _new_c_geometry(kc)
    return geo


def _new_c_geometry(kc: CKernelContext) -> CGeometry:
    op = base_op(kc.node.op)
    pool = "Pool" in op
    g = _geometry(kc.attrs, kc.error, ksize=pool)
    ins = kc.inputs
    _helpers(kc, kc.out.dtype)
    if op == "Conv2D":
        x, f = ins[0].dims, ins[1].dims
        kc.check_dims_equal(x[3], f[2], "input depth differs from filter in-channels")
        if kc.node.op == "_FusedConv2D":
            kc.check_dims_equal(ins[2].dim(0), f[3], "bias size differs from filter out-channels")
        geo, has_grad = CGeometry(x, f[0], f[1], f[3], g), False
    elif op == "Conv2DBackpropInput":
        x, f = _sizes_c(kc, 0), ins[1].dims
        kc.check_dims_equal(x[3], f[2], "input depth differs from filter in-channels")
        geo, has_grad = CGeometry(x, f[0], f[1], f[3], g), True
    elif op == "Conv2DBackpropFilter":
        x, f = ins[0].dims, _sizes_c(kc, 1)
        kc.check_dims_equal(x[3], f[2], "input depth differs from filter in-channels")
        geo, has_grad = CGeometry(x, f[0], f[1], f[3], g), True
    else:
        k = kc.attr("ksize")
        x = _sizes_c(kc, 0) if op == "AvgPoolGrad" else ins[0].dims
        geo = CGeometry(x, str(k[1]), str(k[2]), x[3], g)
        has_grad = op.endswith("Grad")
    check_output_sizes(kc, geo)
    want = geo.out_dims()
    checked = (([len(ins) - 1] if has_grad else []) + ([1] if op == "MaxPoolGrad" else [])
               + ([2] if kc.node.op == "_MaxPoolGradArgmax" else []))
    for i in checked:
        name = get_op(kc.node.op).inputs[i].name
        for d in range(4):
            kc.check_dims_equal(ins[i].dim(d), want[d], f"{name} dim {d} differs from the window output")
    return geo


def _out_dims(kc: CKernelContext) -> List[List[str]]:
    geo = _c_geometry(kc)
    op = base_op(kc.node.op)
    if op in ("Conv2D", "MaxPool", "AvgPool"):
        dims = geo.out_dims()
    elif op == "Conv2DBackpropFilter":
        dims = [geo.kh, geo.kw, geo.x[3], geo.o]
    else:
        dims = geo.x
    kc.check(f"flowc_conv_dims_ok({', '.join(dims)}, {kc.out.dtype.itemsize})",
             "the output shape is too large (its byte size overflows int64)")
    if kc.node.op == "_Conv2DBackpropFilterBias":
        return [dims, [geo.o]]
    if kc.node.op == "_MaxPoolArgmax":
        return [dims, dims]
    return [dims]


# Fused ops made by the fuse-updates pass (compiler/ops/conv_fused.py) that run the helper of
# the op they extend, with its epilogue switched on.
_BASE_OPS = {"_FusedConv2D": "Conv2D", "_MaxPoolReluGrad": "MaxPoolGrad",
             "_Conv2DBackpropFilterBias": "Conv2DBackpropFilter", "_MaxPoolArgmax": "MaxPool",
             "_MaxPoolGradArgmax": "MaxPoolGrad"}


def base_op(op: str) -> str:
    """The op of this family whose window arithmetic and C helper ``op`` uses."""
    return _BASE_OPS.get(op, op)


def _epilogue_args(kc: CKernelContext) -> List[str]:
    """Extra C arguments after the inputs: Conv2D's bias and ReLU flag, MaxPoolGrad's ReLU
    flag (off for the plain ops)."""
    op = kc.node.op
    if op == "Conv2D":
        return ["NULL", "0"]
    if op == "_FusedConv2D":
        fused = list(kc.attr("fused_ops"))
        return [kc.inputs[2].data, "1" if "Relu" in fused else "0"]
    if op in ("MaxPoolGrad", "_MaxPoolReluGrad"):
        return ["1" if op == "_MaxPoolReluGrad" else "0"]
    if op == "_MaxPoolGradArgmax":
        return ["1" if kc.attr("relu") else "0"]
    if op == "_MaxPoolArgmax":
        return [kc.out.data, kc.outputs[1].data]
    if op == "Conv2DBackpropFilter":
        return ["NULL"]
    if op == "_Conv2DBackpropFilterBias":
        return [kc.outputs[1].data]
    return []


_CALLS = {
    "Conv2D": ("flowc_conv2d", (0, 1)),
    "Conv2DBackpropInput": ("flowc_conv2d_bwd_input", (2, 1)),
    "Conv2DBackpropFilter": ("flowc_conv2d_bwd_filter", (0, 2)),
    "MaxPool": ("flowc_max_pool", (0,)),
    "AvgPool": ("flowc_avg_pool", (0,)),
    "MaxPoolGrad": ("flowc_max_pool_grad", (0, 2)),
    "_MaxPoolArgmax": ("flowc_max_pool_argmax", (0,)),
    "_MaxPoolGradArgmax": ("flowc_max_pool_grad_argmax", (1, 2, 3)),
    "AvgPoolGrad": ("flowc_avg_pool_grad", (1,)),
}


# A convolution whose filter has at most this many taps (KH * KW * C), and whose output
# channels fill whole 32-byte vectors, at most 4 of them, is computed directly
# (conv_direct.c.j2) instead of by im2col + gemm.
DIRECT_MAX_TAPS = 32
DIRECT_VECTOR_BYTES = 32
DIRECT_MAX_VECTORS = 4


def _direct_conv(kc: CKernelContext, geo: CGeometry) -> Optional[str]:
    """The name of the direct-convolution helper for this convolution or filter gradient,
    added to the module, when its filter dims are static and small; else None."""
    op = base_op(kc.node.op)
    if op not in ("Conv2D", "Conv2DBackpropFilter"):
        return None
    dims = [geo.kh, geo.kw, geo.x[3], geo.o]
    if not all(d.isdigit() for d in dims):
        return None
    kh, kw, c, o = map(int, dims)
    dtype = kc.out.dtype
    out_bytes = o * dtype.itemsize
    if not (0 < kh * kw * c <= DIRECT_MAX_TAPS and out_bytes % DIRECT_VECTOR_BYTES == 0
            and 0 < out_bytes <= DIRECT_MAX_VECTORS * DIRECT_VECTOR_BYTES):
        return None
    name = f"flowc_conv2d_direct_{dtype.ir_name}_{kh}x{kw}x{c}x{o}"
    module_helper(kc, name, kc.render("conv_direct.c.j2", name=name, T=kc.target.c_type(dtype),
                                      KH=kh, KW=kw, C=c, O=o, sfx=dtype.ir_name))
    return name if op == "Conv2D" else f"{name}_bwd_filter"


def emit_conv(kc: CKernelContext) -> str:
    """C for every op of this family: one call of its module helper, failing on its status."""
    geo = _c_geometry(kc)
    fn, args = _CALLS.get(kc.node.op) or _CALLS[base_op(kc.node.op)]
    direct = _direct_conv(kc, geo)
    if direct is not None:
        fn = direct
    outs = [] if kc.node.op == "_MaxPoolArgmax" else [kc.out.data]
    ptrs = ", ".join([kc.inputs[i].data for i in args] + _epilogue_args(kc) + outs)
    rc = kc.tmp("rc")
    oom = kc.fail("out of memory for the im2col buffer", code="FLOWC_RESOURCE_EXHAUSTED")
    if direct is None:
        fn = f"{fn}_{kc.out.dtype.ir_name}"
    return (f"int {rc} = {fn}({ptrs}, {geo.call_args()});\n"
            f"if ({rc} == 1) {oom}\n"
            f"if ({rc} != 0) {kc.fail('sizes too large for 32-bit indices (of BLAS or a pooling window)')}\n")



# --- NCHW in the reference interpreter: the NHWC code on transposed operands -----------------
_TO_NHWC, _TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)
_ACTIVATION_ARGS = {"input", "value", "out_backprop", "orig_input", "orig_output", "grad"}
_SIZES_ARGS = {"input_sizes", "orig_input_shape"}        # filter_sizes is HWIO in both formats


def _nhwc_attrs(attrs: dict) -> dict:
    """The attrs of the same op written for NHWC (NCHW attrs permuted)."""
    if attrs.get("data_format") != "NCHW":
        return attrs
    out = dict(attrs, data_format="NHWC")
    for name in ("strides", "dilations", "ksize"):
        if name in attrs and len(attrs[name]) == 4:
            out[name] = [attrs[name][i] for i in _TO_NHWC]
    e = list(attrs.get("explicit_paddings", []))
    if len(e) == 8:
        out["explicit_paddings"] = [x for i in _TO_NHWC for x in e[2 * i:2 * i + 2]]
    return out


def _permute(value, kind: str, perm):
    """An activation's shape or array, or a sizes vector, permuted; anything else unchanged."""
    if value is None:
        return None
    if kind == "activation":
        if isinstance(value, np.ndarray):
            return np.ascontiguousarray(np.transpose(value, perm)) if value.ndim == 4 else value
        return tuple(value[i] for i in perm) if len(value) == 4 else value
    if kind == "sizes":
        v = np.reshape(value, -1)
        return np.asarray(v[list(perm)], dtype=v.dtype) if v.size == 4 else value
    return value


class _NHWCShapeContext:
    """A ShapeContext seen through NCHW -> NHWC (inputs and attrs)."""

    def __init__(self, ctx, kinds: Sequence[str]):
        self._ctx, self._kinds = ctx, kinds
        self.attrs, self.node = _nhwc_attrs(ctx.attrs), ctx.node

    def attr(self, name: str):
        return self.attrs[name]

    def input_shape(self, i: int):
        shape = self._ctx.input_shape(i)
        return _permute(shape, "activation", _TO_NHWC) if self._kinds[i] == "activation" else shape

    def input_value(self, i: int):
        return _permute(self._ctx.input_value(i), self._kinds[i], _TO_NHWC)

    def error(self, message: str):
        return self._ctx.error(message)


def _register(name: str, inputs: List[str], shape, kernel, out_is_activation: bool = True, **kw) -> None:
    """Register an op whose shape function and reference kernel are written for NHWC."""
    kinds = ["activation" if a.split(":")[0] in _ACTIVATION_ARGS else
             "sizes" if a.split(":")[0] in _SIZES_ARGS else "other" for a in inputs]
    out_kind = "activation" if out_is_activation else "other"

    def shape_fn(ctx) -> list:
        if ctx.attrs.get("data_format") != "NCHW":
            return shape(ctx)
        return [_permute(shape(_NHWCShapeContext(ctx, kinds))[0], out_kind, _TO_NCHW)]

    def kernel_fn(ctx, *arrays):
        if ctx.attrs.get("data_format") != "NCHW":
            return kernel(ctx, *arrays)
        inner = _Ctx(_nhwc_attrs(ctx.attrs), ctx.node)
        args = [_permute(a, k, _TO_NHWC) for a, k in zip(arrays, kinds)]
        return _permute(kernel(inner, *args), out_kind, _TO_NCHW)

    register_op(name, inputs=inputs, shape=shape_fn, kernel=kernel_fn, **kw)


@dataclass
class _Ctx:
    """What the NHWC reference kernels read from their context."""
    attrs: dict
    node: object


# --- registration ----------------------------------------------------------------------------
_CONV_ATTRS = ["T: {f32, f64}", "strides: list(int)", "use_cudnn_on_gpu: bool = true",
               "padding: string", "explicit_paddings: list(int) = []",
               'data_format: string = "NHWC"', "dilations: list(int) = [1, 1, 1, 1]"]
_POOL_ATTRS = ["T: {f32, f64}", "ksize: list(int)", "strides: list(int)", "padding: string",
               'data_format: string = "NHWC"']
_COMMON = dict(c_kernel=emit_conv, c_output_dims=_out_dims, group="other")

_register("Conv2D", ["input: T", "filter: T"], _conv_shape, _conv_ref, outputs=["output: T"],
          attrs=_CONV_ATTRS, **_COMMON,
          doc="2-D convolution of NHWC input with an HWIO filter (im2col + gemm in C).")
_register("Conv2DBackpropInput", ["input_sizes: i32", "filter: T", "out_backprop: T"],
          _conv_input_shape, _conv_input_ref, outputs=["output: T"], attrs=_CONV_ATTRS, **_COMMON,
          doc="Gradient of Conv2D with respect to its input (gemm + col2im in C).")
_register("Conv2DBackpropFilter", ["input: T", "filter_sizes: i32", "out_backprop: T"],
          _conv_filter_shape, _conv_filter_ref, out_is_activation=False, outputs=["output: T"],
          attrs=_CONV_ATTRS, **_COMMON,
          doc="Gradient of Conv2D with respect to its filter (im2col + gemm in C).")
_MAX_POOL_ATTRS = _POOL_ATTRS[:4] + ["explicit_paddings: list(int) = []"] + _POOL_ATTRS[4:]
_register("MaxPool", ["input: T"], _pool_shape, _max_pool_ref, outputs=["output: T"],
          attrs=_MAX_POOL_ATTRS, **_COMMON,
          doc="Max over each window (the first maximum when tied); padding is ignored.")
_register("AvgPool", ["value: T"], _pool_shape, _avg_pool_ref, outputs=["output: T"],
          attrs=_POOL_ATTRS, **_COMMON, doc="Mean over the in-range elements of each window.")
_register("MaxPoolGrad", ["orig_input: T", "orig_output: T", "grad: T"], _max_pool_grad_shape,
          _max_pool_grad_ref, outputs=["output: T"], attrs=_MAX_POOL_ATTRS, **_COMMON,
          doc="Routes each grad to the first maximum of its window in orig_input.")
_register("AvgPoolGrad", ["orig_input_shape: i32", "grad: T"], _avg_pool_grad_shape,
          _avg_pool_grad_ref, outputs=["output: T"], attrs=_POOL_ATTRS, **_COMMON,
          doc="Spreads each grad evenly over the in-range elements of its window.")
