"""``_GridSample``: flowc's own op (TensorFlow has none) for sampling an N-D image at the
points of a grid, ONNX's ``GridSample`` (PyTorch's ``grid_sample``).

- ``input`` is ``[N, C, D1, ..., Dr]``, ``grid`` is ``[N, H1, ..., Hr, r]``: each grid point
  holds r normalized coordinates in [-1, 1], innermost dim first (x, y[, z]: x runs along
  Dr); the output is ``[N, C, H1, ..., Hr]``.
- A coordinate ``u`` on a dim of size L is the pixel position ``(u + 1) / 2 * (L - 1)`` with
  ``align_corners`` (-1 and 1 are the centres of the corner pixels), else
  ``((u + 1) * L - 1) / 2`` (-1 and 1 are the corner pixels' outer edges).
- ``mode``: ``nearest`` (rounded half to even), ``linear`` (2 taps per dim) or ``cubic`` (4
  taps per dim, Keys' kernel with a = -0.75), separable: the innermost dim is interpolated
  first, then the next, as ONNX's reference does.
- ``padding_mode``: ``zeros`` (taps outside the input read 0), ``border`` (positions outside
  the border [-0.5, L - 0.5], or [0, L - 1] with ``align_corners``, clamp to [0, L - 1], and
  taps clamp to the input) or ``reflection`` (positions and taps reflect at the border).
- A coordinate that is NaN, or infinite with reflection, samples 0. Coordinates far outside
  the input cost nothing extra: all their taps are outside.

``_GridSampleGrad`` is its gradient (``dsl/grad/grid_sample_grad.py``): the input's gradient
adds each output's gradient times each tap's weight into the tap's pixel; the grid's is the
derivative of the interpolation along each coordinate (the weights' derivatives), times that
of the coordinate transform (0 where ``border`` clamps, +-1 through ``reflection``, 0 for
``nearest``, whose output is piecewise constant).

The C lowering is ``compiler/codegen/c_ops/grid_sample.py``.
"""
from __future__ import annotations

import itertools
from typing import List, Tuple

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_A = -0.75


def taps_per_dim(mode: str) -> int:
    return {"nearest": 1, "linear": 2, "cubic": 4}[mode]


def _check_attrs(attrs, fail) -> None:
    if attrs["mode"] not in MODES:
        raise fail(f"mode must be one of {', '.join(MODES)}, got '{attrs['mode']}'")
    if attrs["padding_mode"] not in PADDING_MODES:
        raise fail(f"padding_mode must be one of {', '.join(PADDING_MODES)}, got "
                   f"'{attrs['padding_mode']}'")


def _grid_sample_shape(ctx) -> list:
    _check_attrs(ctx.attrs, ctx.error)
    x, g = ctx.input_shape(0), ctx.input_shape(1)
    if x is not None and len(x) < 3:
        raise ctx.error(f"input must have rank 3 or more ([N, C, spatial...]), got {len(x)}")
    if x is None:
        return [None]
    if g is None:
        return [(x[0], x[1]) + (None,) * (len(x) - 2)]
    if len(g) != len(x):
        raise ctx.error(f"grid must have rank {len(x)} for an input of rank {len(x)}, got "
                        f"{len(g)}")
    if g[-1] is not None and g[-1] != len(x) - 2:
        raise ctx.error(f"grid's last dim must be {len(x) - 2} (one coordinate per spatial "
                        f"dim), got {g[-1]}")
    if x[0] is not None and g[0] is not None and x[0] != g[0]:
        raise ctx.error(f"grid's batch {g[0]} does not match input's {x[0]}")
    n = x[0] if x[0] is not None else g[0]
    return [(n, x[1]) + tuple(g[1:-1])]


# --- numpy reference ---------------------------------------------------------------------------
def reflect(c: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Positions outside [lo, hi] reflected back into it, by the near border repeatedly."""
    span = hi - lo
    if span <= 0:
        return np.where(np.isnan(c), c, lo).astype(c.dtype)
    with np.errstate(invalid="ignore"):
        below = np.fmod(lo - c, 2 * span)
        above = np.fmod(c - hi, 2 * span)
    from_below = np.where(below < span, lo + below, hi - (below - span))
    from_above = np.where(above < span, hi - above, lo + (above - span))
    return np.where(c < lo, from_below, np.where(c > hi, from_above, c)).astype(c.dtype)


def cubic_weights(t: np.ndarray) -> List[np.ndarray]:
    """Keys' cubic convolution weights of the 4 taps at -1, 0, 1, 2 for fraction ``t``."""
    a = t.dtype.type(CUBIC_A)
    one, two = t.dtype.type(1), t.dtype.type(2)
    return [((a * (t + one) - 5 * a) * (t + one) + 8 * a) * (t + one) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + one,
            ((a + 2) * (one - t) - (a + 3)) * (one - t) * (one - t) + one,
            ((a * (two - t) - 5 * a) * (two - t) + 8 * a) * (two - t) - 4 * a]


def cubic_weight_slopes(t: np.ndarray) -> List[np.ndarray]:
    """d/dt of the 4 cubic weights."""
    a = t.dtype.type(CUBIC_A)
    one, two = t.dtype.type(1), t.dtype.type(2)
    s0, s2, s3 = t + one, one - t, two - t
    return [(3 * a * s0 - 10 * a) * s0 + 8 * a,
            (3 * (a + 2) * t - 2 * (a + 3)) * t,
            -((3 * (a + 2) * s2 - 2 * (a + 3)) * s2),
            -((3 * a * s3 - 10 * a) * s3 + 8 * a)]


def coordinate_slope(u: np.ndarray, size: int, mode: str, padding: str, align: bool
                     ) -> np.ndarray:
    """d(pixel position)/du, through the padding mode's clamp or reflection."""
    ft = u.dtype.type
    scale = ft(size - 1) / ft(2) if align else ft(size) / ft(2)
    if mode == "nearest":
        return np.zeros_like(u)
    lo, hi = (ft(0), ft(size - 1)) if align else (ft(-0.5), ft(size - 0.5))
    with np.errstate(invalid="ignore", over="ignore"):
        c = ((u + ft(1)) / ft(2) * ft(size - 1) if align
             else ((u + ft(1)) * ft(size) - ft(1)) / ft(2))
        below, above = c < lo, c > hi
        slope = np.full_like(u, scale)
        if padding == "border":
            slope = np.where(below | above, ft(0), slope)
        elif padding == "reflection":
            span = hi - lo
            if span <= 0:
                slope = np.where(below | above, ft(0), slope)
            else:
                m_below = np.fmod(lo - c, 2 * span)
                m_above = np.fmod(c - hi, 2 * span)
                sign = np.where(below, np.where(m_below < span, ft(-1), ft(1)),
                                np.where(above, np.where(m_above < span, ft(-1), ft(1)),
                                         ft(1)))
                slope = slope * sign
    return np.where(np.isfinite(slope) & np.isfinite(c), slope, ft(0))


def dim_taps(u: np.ndarray, size: int, mode: str, padding: str, align: bool,
             with_slopes: bool = False) -> Tuple[List[np.ndarray], ...]:
    """For normalized coordinates ``u`` on a dim of ``size``: per tap, (index, weight,
    valid) arrays shaped like ``u`` (and, ``with_slopes``, the weights' derivatives along the
    pixel position)."""
    ft = u.dtype.type
    lo, hi = (ft(0), ft(size - 1)) if align else (ft(-0.5), ft(size - 0.5))
    with np.errstate(invalid="ignore", over="ignore"):
        c = ((u + ft(1)) / ft(2) * ft(size - 1) if align
             else ((u + ft(1)) * ft(size) - ft(1)) / ft(2))
        if mode == "nearest":
            c = np.rint(c)
        outside = (c < lo) | (c > hi)
        if padding == "border":
            c = np.where(outside, np.clip(c, ft(0), ft(max(size - 1, 0))), c)
        elif padding == "reflection":
            c = np.where(outside, reflect(c, lo, hi), c)
    finite = np.isfinite(c) & (size > 0)
    c = np.where(finite, np.clip(c, ft(-4), ft(size + 4)), ft(0))
    if mode == "nearest":
        bases, weights = [c.astype(np.int64)], [np.ones_like(c)]
    else:
        b = np.floor(c)
        t = (c - b).astype(u.dtype)
        b = b.astype(np.int64)
        if mode == "linear":
            bases, weights = [b, b + 1], [ft(1) - t, t]
        else:
            bases, weights = [b - 1, b, b + 1, b + 2], cubic_weights(t)
    if with_slopes:
        if mode == "nearest":
            slopes = [np.zeros_like(c)]
        elif mode == "linear":
            slopes = [np.full_like(c, -1), np.ones_like(c)]
        else:
            slopes = cubic_weight_slopes(t)
    index, valid = [], []
    for i in bases:
        if padding == "zeros":
            ok = finite & (i >= 0) & (i < size)
        else:
            ok = finite.copy()
            if padding == "reflection":
                i = np.trunc(reflect(i.astype(u.dtype), lo, hi)).astype(np.int64)
            i = np.clip(i, 0, max(size - 1, 0))
        index.append(np.where(ok, i, 0))
        valid.append(ok)
    if with_slopes:
        return index, weights, valid, slopes
    return index, weights, valid


def _grid_sample_ref(ctx, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    mode, padding = ctx.attrs["mode"], ctx.attrs["padding_mode"]
    align = bool(ctx.attrs["align_corners"])
    r = x.ndim - 2
    if grid.shape[0] != x.shape[0] or grid.shape[-1] != r:
        raise ExecutionError(f"grid of shape {list(grid.shape)} does not fit an input of shape "
                             f"{list(x.shape)}", ctx.node)
    n, ch, spatial = x.shape[0], x.shape[1], x.shape[2:]
    points = grid.shape[1:-1]
    g = grid.reshape(n, int(np.prod(points, dtype=np.int64)), r)
    taps = [dim_taps(g[:, :, r - 1 - d], spatial[d], mode, padding, align) for d in range(r)]
    xt = np.moveaxis(x, 1, -1)                                   # [N, spatial..., C]
    acc_type = np.float64 if x.dtype == np.float64 else np.float32
    batch = np.arange(n)[:, None]

    def level(d: int, chosen: list) -> np.ndarray:
        """The interpolation over dims d.. with taps ``chosen`` of the dims before: [N, P, C]."""
        total = None
        for idx, w, ok in zip(*taps[d]):
            picked = chosen + [(idx, ok)]
            if d + 1 < r:
                value = level(d + 1, picked)
            else:
                value = xt[(batch,) + tuple(i for i, _ in picked)].astype(acc_type)
                allowed = np.logical_and.reduce([o for _, o in picked])
                value = np.where(allowed[..., None], value, acc_type(0))
            term = value if mode == "nearest" else w.astype(acc_type)[..., None] * value
            total = term if total is None else total + term
        return total

    y = level(0, []) if g.shape[1] and ch else np.zeros((n, g.shape[1], ch), acc_type)
    return np.moveaxis(y, -1, 1).reshape((n, ch) + points).astype(x.dtype)


def _grid_sample_grad_shape(ctx) -> list:
    _check_attrs(ctx.attrs, ctx.error)
    return [ctx.input_shape(1), ctx.input_shape(2)]


def _grid_sample_grad_ref(ctx, dy: np.ndarray, x: np.ndarray, grid: np.ndarray):
    mode, padding = ctx.attrs["mode"], ctx.attrs["padding_mode"]
    align = bool(ctx.attrs["align_corners"])
    r = x.ndim - 2
    n, ch, spatial = x.shape[0], x.shape[1], x.shape[2:]
    if grid.shape[0] != n or grid.shape[-1] != r or dy.shape != (n, ch) + grid.shape[1:-1]:
        raise ExecutionError(f"gradient {list(dy.shape)}, input {list(x.shape)} and grid "
                             f"{list(grid.shape)} do not fit", ctx.node)
    acc = np.float64 if x.dtype == np.float64 else np.float32
    pts = int(np.prod(grid.shape[1:-1], dtype=np.int64))
    g = grid.reshape(n, pts, r)
    taps = [dim_taps(g[:, :, r - 1 - d], spatial[d], mode, padding, align, True)
            for d in range(r)]
    slopes = [coordinate_slope(g[:, :, r - 1 - d], spatial[d], mode, padding, align)
              for d in range(r)]
    gy = np.moveaxis(dy.reshape(n, ch, pts), 1, -1).astype(acc)       # [N, P, C]
    xt = np.moveaxis(x, 1, -1).astype(acc)                            # [N, spatial, C]
    dx = np.zeros_like(xt)
    dcoord = np.zeros((r, n, pts), acc)
    batch = np.broadcast_to(np.arange(n)[:, None], (n, pts))
    k = taps_per_dim(mode)
    for combo in itertools.product(range(k), repeat=r):
        idx = tuple(taps[d][0][combo[d]] for d in range(r))
        ok = np.logical_and.reduce([taps[d][2][combo[d]] for d in range(r)])
        w = [taps[d][1][combo[d]].astype(acc) for d in range(r)]
        weight = np.where(ok, np.prod(w, axis=0), acc(0))
        np.add.at(dx, (batch,) + idx, gy * weight[..., None])
        if mode == "nearest":
            continue
        value = np.where(ok[..., None], xt[(batch,) + idx], acc(0))
        along = np.sum(gy * value, axis=-1)                            # [N, P]
        for d in range(r):
            others = [w[e] for e in range(r) if e != d]
            rest = np.prod(others, axis=0) if others else np.ones_like(along)
            dcoord[d] += along * taps[d][3][combo[d]].astype(acc) * rest
    dgrid = np.stack([dcoord[r - 1 - j] * np.stack(slopes)[r - 1 - j].astype(acc)
                      for j in range(r)], axis=-1)
    return (np.moveaxis(dx, -1, 1).astype(x.dtype),
            dgrid.reshape(grid.shape).astype(grid.dtype))


register_op("_GridSampleGrad", inputs=["grad: T", "input: T", "grid: Tgrid"],
            outputs=["input_grad: T", "grid_grad: Tgrid"],
            attrs=["T: {float}", "Tgrid: {float}", 'mode: string = "linear"',
                   'padding_mode: string = "zeros"', "align_corners: bool = false"],
            shape=_grid_sample_grad_shape, kernel=_grid_sample_grad_ref, group="other",
            doc="The gradients of _GridSample with respect to its input and its grid.")


register_op("_GridSample", inputs=["input: T", "grid: Tgrid"], outputs=["output: T"],
            attrs=["T: {float}", "Tgrid: {float}", 'mode: string = "linear"',
                   'padding_mode: string = "zeros"', "align_corners: bool = false"],
            shape=_grid_sample_shape, kernel=_grid_sample_ref, group="other",
            doc="Samples input [N, C, D1..Dr] at grid [N, H1..Hr, r] (normalized coordinates, "
                "innermost dim first): nearest, linear or cubic; zeros, border or reflection "
                "padding (ONNX's GridSample).")
