"""Convolution and pooling: Conv2D and its two backprops, MaxPool, AvgPool and their gradients,
with TensorFlow's window arithmetic (SAME puts the smaller half of the padding before:
pad_before = pad_total // 2). NHWC everywhere; NCHW in the reference interpreter only (the
NHWC code on transposed operands), a compile-time error in C. The C lowering is
``compiler/codegen/c_ops/conv.py``.

Conv2D takes TensorFlow's grouped form (input depth G times the filter's in-channels, the
output channels a multiple of G; Keras' ``Conv2D(groups=G)``), and so do its two backprops,
TensorFlow's gradient of it: input_sizes' (or the input's) depth G times the filter's
in-channels.

MaxPool takes the first maximum of a window (a later element replaces it only if strictly
greater), which is also where MaxPoolGrad routes the gradient, as TensorFlow's CPU kernels do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import shape_str
from compiler.ir.op_registry import register_op
from compiler.ops.array.common import _partial_vector

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
    if padding not in _MODES:
        raise err(f"padding {padding!r} is not supported here")
    pads = ((0, 0), (0, 0))
    if padding == "EXPLICIT":
        e = list(attrs.get("explicit_paddings", []))
        if len(e) != 8 or any(x != 0 for x in e[:2] + e[6:]) or not all(0 <= x <= _ATTR_MAX for x in e):
            raise err("EXPLICIT padding needs explicit_paddings of 8 non-negative values with "
                      f"zeros for the batch and depth dims, got {e}")
        pads = ((e[2], e[3]), (e[4], e[5]))
        if ksize and any(p >= k for pair, k in zip(pads, pairs[1]) for p in pair):
            raise err(f"a pooling window's explicit paddings must be smaller than the window "
                      f"({pairs[1][0]}x{pairs[1][1]}), got {e}")
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
    """The 4 values of a shape-like input where known now (checked), None for the others:
    all of a constant, the static dims of a ``Shape`` (a gradient's ``Shape(x)`` of an input
    whose batch is fed: TensorFlow's partial shape), or None when nothing is known."""
    s = ctx.input_shape(i)
    if s is not None and (len(s) != 1 or s[0] not in (None, 4)):
        raise ctx.error(f"{what} must be a vector of 4 elements, got shape {shape_str(s)}")
    v = ctx.input_value(i)
    if v is None:
        partial = ctx.partial_vector(i) if isinstance(ctx, _NHWCShapeContext) else \
            (_partial_vector(ctx, i) if ctx.node is not None else None)
        if partial is None or len(partial) != 4:
            return None
        if any(x is not None and x < 0 for x in partial):
            raise ctx.error(f"{what} must be 4 non-negative sizes, got {partial}")
        return tuple(partial)
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
def _check_groups(ctx, c_x, c_f, o) -> None:
    """A grouped Conv2D (TensorFlow's: input depth a multiple of the filter's in-channels,
    groups = their ratio, Keras' ``Conv2D(groups=...)``): the output depth must be a multiple
    of the groups too."""
    if c_x is None or c_f is None or c_x == c_f:
        return
    if c_f <= 0 or c_x <= 0 or c_x % c_f:
        raise ctx.error(f"filter in-channels has shape {shape_str((c_f,))}, expected "
                        f"{shape_str((c_x,))} (or a divisor of it: grouped convolution)")
    if o is not None and o % (c_x // c_f):
        raise ctx.error(f"Depth of output ({o}) is not a multiple of the number of groups "
                        f"({c_x // c_f})")


def _conv_shape(ctx) -> list:
    g = _geometry(ctx.attrs, ctx.error)
    x, f = _rank4(ctx, 0, "input"), _rank4(ctx, 1, "filter")
    _check_groups(ctx, x[3], f[2], f[3])
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    return [(n, oh, ow, f[3])]


def _conv_input_shape(ctx) -> list:
    """The input's shape from input_sizes; its depth is input_sizes' (a multiple of the
    filter's in-channels when grouped, so not the filter's when unknown)."""
    g = _geometry(ctx.attrs, ctx.error)
    sizes = _sizes_value(ctx, 0, "input_sizes") or (None,) * 4
    f, dy = _rank4(ctx, 1, "filter"), _rank4(ctx, 2, "out_backprop")
    x = (_merge(sizes[0], dy[0]), sizes[1], sizes[2], sizes[3])
    _check_groups(ctx, sizes[3], f[2], f[3])
    n, oh, ow = _check_out(ctx, g, x, f[0], f[1])
    _expect(ctx, "out_backprop", dy, (n, oh, ow, f[3]))
    return [x]


def _conv_filter_shape(ctx) -> list:
    """The filter's shape from filter_sizes; its in-channels are filter_sizes' (a divisor of
    the input's depth when grouped)."""
    g = _geometry(ctx.attrs, ctx.error)
    x, dy = _rank4(ctx, 0, "input"), _rank4(ctx, 2, "out_backprop")
    sizes = _sizes_value(ctx, 1, "filter_sizes") or (None,) * 4
    f = (sizes[0], sizes[1], sizes[2], _merge(sizes[3], dy[3]))
    _check_groups(ctx, x[3], sizes[2], f[3])
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


def _groups(ctx, c_x: int, c_f: int, o: int) -> int:
    """The groups of a convolution of input depth ``c_x`` by a filter of ``c_f`` in-channels
    and ``o`` outputs (TensorFlow's grouped Conv2D: ``c_x`` a multiple of ``c_f``, ``o`` a
    multiple of the groups); an ExecutionError naming the node otherwise."""
    if c_x == c_f:
        return 1
    if c_f <= 0 or c_x <= 0 or c_x % c_f:
        raise ExecutionError(f"input depth {c_x} does not match filter in-channels {c_f} "
                             "(nor is a multiple of it: grouped convolution)", ctx.node)
    groups = c_x // c_f
    if o % groups:
        raise ExecutionError(f"Depth of output ({o}) is not a multiple of the number of groups "
                             f"({groups})", ctx.node)
    return groups


def _conv_ref(ctx, x, f):
    kh, kw, c, o = f.shape
    groups = _groups(ctx, x.shape[3], c, o)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x.shape, kh, kw)
    taps, pads = _taps(g, x.shape, kh, kw, oh, ow, pt, pl)
    xp = _padded(x, pads)
    y = np.zeros((x.shape[0], oh, ow, o), x.dtype)
    per = o // groups
    for k in range(groups):           # group k: input channels k*c.., output channels k*per..
        xs, ys = slice(k * c, (k + 1) * c), slice(k * per, (k + 1) * per)
        for i, j, rs, cs in taps:
            y[..., ys] += xp[:, rs, cs, xs] @ f[i, j][:, ys]
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
    groups = _groups(ctx, x_shape[3], c, o)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x_shape, kh, kw)
    _check_grad(ctx, dy.shape, (x_shape[0], oh, ow, o))
    taps, pads = _taps(g, x_shape, kh, kw, oh, ow, pt, pl)
    dxp = _padded(np.zeros(x_shape, dy.dtype), pads)
    per = o // groups
    for k in range(groups):           # group k: input channels k*c.., output channels k*per..
        xs, ys = slice(k * c, (k + 1) * c), slice(k * per, (k + 1) * per)
        for i, j, rs, cs in taps:
            dxp[:, rs, cs, xs] += dy[..., ys] @ f[i, j][:, ys].T
    return np.ascontiguousarray(dxp[:, pt:pt + x_shape[1], pl:pl + x_shape[2], :])


def _conv_filter_ref(ctx, x, sizes, dy):
    kh, kw, c, o = _sizes(ctx, sizes, "filter_sizes")
    groups = _groups(ctx, x.shape[3], c, o)
    g, oh, ow, pt, pl = _ref_geometry(ctx, x.shape, kh, kw)
    _check_grad(ctx, dy.shape, (x.shape[0], oh, ow, o))
    taps, pads = _taps(g, x.shape, kh, kw, oh, ow, pt, pl)
    xp = _padded(x, pads)
    df = np.zeros((kh, kw, c, o), x.dtype)
    rows = x.shape[0] * oh * ow
    d2 = dy.reshape(rows, o)
    per = o // groups
    for k in range(groups):           # group k: input channels k*c.., output channels k*per..
        xs, ys = slice(k * c, (k + 1) * c), slice(k * per, (k + 1) * per)
        for i, j, rs, cs in taps:
            df[i, j][:, ys] = xp[:, rs, cs, xs].reshape(rows, c).T @ d2[:, ys]
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

    def partial_vector(self, i: int):
        """Input ``i``'s elements known now (see ``_sizes_value``), permuted like its value."""
        v = _partial_vector(self._ctx, i)
        if v is None or self._kinds[i] != "sizes" or len(v) != 4:
            return v
        return [v[k] for k in _TO_NHWC]

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
_CONV_ATTRS = ["T: {float}", "strides: list(int)", "use_cudnn_on_gpu: bool = true",
               "padding: string", "explicit_paddings: list(int) = []",
               'data_format: string = "NHWC"', "dilations: list(int) = [1, 1, 1, 1]"]
_POOL_ATTRS = ["T: {float}", "ksize: list(int)", "strides: list(int)", "padding: string",
               'data_format: string = "NHWC"']
_COMMON = dict(group="other")

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
