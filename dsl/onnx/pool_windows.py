"""Pooling as a sum (or maximum) over window offsets, for the windows flowc's MaxPool/AvgPool
kernels do not take: 3-D windows, dilated windows and MaxPool's Indices output.

On ONNX's layout (N, C, spatial...), each kernel offset is one strided slice of the padded
input, holding that offset's element of every window; the pool is the elementwise maximum
(or sum) of those slices, which the fuse pass turns into one kernel. The average's divisor
(how many elements of each window count) depends on shapes only, so it is computed here.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

import dsl as fl
from dsl.onnx.values import binary, index_const
from dsl.ops import apply_op
from dsl.tensor import Tensor


@dataclass(frozen=True)
class Windows:
    """Where the windows of one pooling node lie in its (padded) input."""
    in_dims: Tuple[int, ...]                  # spatial dims of the input
    kernel: Tuple[int, ...]
    strides: Tuple[int, ...]
    dilations: Tuple[int, ...]
    pads: Tuple[Tuple[int, int], ...]         # (before, after) per dim, ceil_mode's extra included

    @property
    def padded_dims(self) -> Tuple[int, ...]:
        return tuple(d + b + e for d, (b, e) in zip(self.in_dims, self.pads))

    @property
    def out_dims(self) -> Tuple[int, ...]:
        return tuple((p - ((k - 1) * d + 1)) // s + 1 for p, k, s, d in
                     zip(self.padded_dims, self.kernel, self.strides, self.dilations))

    def offsets(self):
        return itertools.product(*[range(k) for k in self.kernel])

    def slices(self, offset: Sequence[int]) -> Tuple[slice, ...]:
        """The spatial slice holding element ``offset`` of every window."""
        return tuple(slice(k * d, k * d + (o - 1) * s + 1, s) for k, d, s, o in
                     zip(offset, self.dilations, self.strides, self.out_dims))


def _window_slice(x: Tensor, win: Windows, offset: Sequence[int]) -> Tensor:
    spatial = win.slices(offset)
    begin = [0, 0] + [s.start for s in spatial]
    end = [0, 0] + [s.stop for s in spatial]
    strides = [1, 1] + [s.step for s in spatial]
    return apply_op("StridedSlice", [x, index_const(begin), index_const(end), index_const(strides)],
                    {"begin_mask": 3, "end_mask": 3})      # N and C whole


def _as_nc(values: np.ndarray, dtype) -> Tensor:
    """A spatial array as a [1, 1, spatial...] constant (it broadcasts over N and C)."""
    return fl.constant(values.reshape((1, 1) + values.shape).astype(dtype.np), dtype=dtype)


def _pad(x: Tensor, win: Windows, fill) -> Tensor:
    """``x`` padded by ``win.pads`` with the value ``fill``."""
    if all(p == (0, 0) for p in win.pads):
        return x
    paddings = fl.constant(np.array([[0, 0], [0, 0], *win.pads], np.int64), dtype=fl.int64)
    padded = apply_op("Pad", [x, paddings])
    if fill == 0:
        return padded
    inside = np.pad(np.ones(win.in_dims, bool), win.pads)
    return fl.where_v2(_as_nc(inside, fl.bool_), padded, fl.constant(np.asarray(fill, x.dtype.np)))


def _lowest(dtype) -> object:
    return -np.inf if dtype.is_floating else np.iinfo(dtype.np).min


def max_pool(x: Tensor, win: Windows, indices: bool = False, storage_order: int = 0,
             batch_channels: Optional[Tuple[int, int]] = None):
    """The windows' maximum; with ``indices``, also where each maximum is in ``x``, as ONNX
    counts it: the flat index into the (N, C, spatial...) input, spatial dims column-major
    when ``storage_order`` is 1. The first of equal maxima (in window order) wins."""
    padded = _pad(x, win, _lowest(x.dtype))
    spatial_index = np.arange(int(np.prod(win.in_dims)), dtype=np.int64)
    if storage_order:
        spatial_index = spatial_index.reshape(win.in_dims[::-1]).T
    spatial_index = np.pad(spatial_index.reshape(win.in_dims), win.pads, constant_values=-1)
    best = argmax = None
    for offset in win.offsets():
        values = _window_slice(padded, win, offset)
        if best is None:
            best = values
            if indices:
                argmax = _as_nc(spatial_index[win.slices(offset)], fl.int64)
        elif indices:
            take = binary("Greater", values, best)
            best = fl.where_v2(take, values, best)
            argmax = fl.where_v2(take, _as_nc(spatial_index[win.slices(offset)], fl.int64), argmax)
        else:
            best = binary("Maximum", best, values)
    if not indices:
        return best
    n, c = batch_channels
    base = (np.arange(n * c, dtype=np.int64) * int(np.prod(win.in_dims)))
    base = base.reshape((n, c) + (1,) * len(win.in_dims))
    return best, binary("AddV2", argmax, fl.constant(base, dtype=fl.int64))


def average_pool(x: Tensor, win: Windows, counted_pads: Sequence[Tuple[int, int]]) -> Tensor:
    """The windows' mean over the elements that count: the input's, and those of
    ``counted_pads`` (the explicit pads when count_include_pad; never ceil_mode's extra)."""
    padded = _pad(x, win, 0)
    slices: List[Tensor] = [_window_slice(padded, win, offset) for offset in win.offsets()]
    total = slices[0] if len(slices) == 1 else apply_op("AddN", [slices])
    counted = np.ones(win.in_dims, np.int64)
    counted = np.pad(counted, list(counted_pads), constant_values=1)
    rest = [(b - cb, e - ce) for (b, e), (cb, ce) in zip(win.pads, counted_pads)]
    counted = np.pad(counted, rest)
    count = sum(counted[win.slices(offset)] for offset in win.offsets())
    return binary("RealDiv", total, _as_nc(count, x.dtype))
