"""ConvTranspose of any spatial rank (flowc's Conv2DBackpropInput takes 2-D windows only) as
one matmul and one placement per kernel offset.

Every input element, times the kernel's [Cin, Cout] matrix at offset k, lands at output
position ``i * stride + k * dilation``: one MatMul computes all offsets' products, then each
offset's products are spread out by the stride (zeros between), shifted to their place with
Pad, and summed; the ONNX pads crop the sum. Layout inside is channels-last.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

import dsl as fl
from dsl.onnx.values import index_const, index_scalar
from dsl.ops import apply_op
from dsl.tensor import Tensor, static_shape


@dataclass(frozen=True)
class TransposedWindows:
    in_dims: Tuple[int, ...]                  # spatial dims of the input
    kernel: Tuple[int, ...]
    strides: Tuple[int, ...]
    dilations: Tuple[int, ...]
    output_padding: Tuple[int, ...]
    pads: Tuple[Tuple[int, int], ...]         # cropped from the full output, (before, after)
    out_dims: Tuple[int, ...]                 # the output's spatial dims

    @property
    def full_dims(self) -> Tuple[int, ...]:
        """The output's dims before the pads crop it."""
        return tuple(s * (i - 1) + op + (k - 1) * d + 1 for i, s, op, k, d in
                     zip(self.in_dims, self.strides, self.output_padding, self.kernel,
                         self.dilations))


def _transpose(x: Tensor, perm: Sequence[int]) -> Tensor:
    return apply_op("Transpose", [x, index_const(list(perm))])


def _pad(x: Tensor, pairs: Sequence[Tuple[int, int]]) -> Tensor:
    if all(p == (0, 0) for p in pairs):
        return x
    return apply_op("Pad", [x, fl.constant(np.array(pairs, np.int64), dtype=fl.int64)])


def _crop(x: Tensor, begin: Sequence[int], end: Sequence[int]) -> Tensor:
    """x[:, begin:end (per spatial dim), :] of a channels-last tensor."""
    rank = len(begin) + 2
    return apply_op("StridedSlice", [x, index_const([0, *begin, 0]), index_const([0, *end, 0]),
                                     index_const([1] * rank)],
                    {"begin_mask": 1 | (1 << (rank - 1)), "end_mask": 1 | (1 << (rank - 1))})


def _spread(x: Tensor, win: TransposedWindows) -> Tensor:
    """[N, *in, C] -> [N, *(in * stride), C]: stride - 1 zeros after every element."""
    if all(s == 1 for s in win.strides):
        return x
    interleaved = [-1] + [v for d in win.in_dims for v in (d, 1)] + [int(static_shape(x)[-1])]
    y = apply_op("Reshape", [x, index_const(interleaved)])
    y = _pad(y, [(0, 0)] + [p for s in win.strides for p in ((0, 0), (0, s - 1))] + [(0, 0)])
    spread = [-1] + [d * s for d, s in zip(win.in_dims, win.strides)] + [int(static_shape(x)[-1])]
    return apply_op("Reshape", [y, index_const(spread)])


def _place(part: Tensor, win: TransposedWindows, offset: Sequence[int]) -> Tensor:
    """One offset's products, spread by the stride, at their place in the full output."""
    spread = _spread(part, win)
    befores = [k * d for k, d in zip(offset, win.dilations)]
    keeps = [min(i * s, f - b) for i, s, f, b in
             zip(win.in_dims, win.strides, win.full_dims, befores)]
    if any(k < i * s for k, i, s in zip(keeps, win.in_dims, win.strides)):
        spread = _crop(spread, [0] * len(keeps), keeps)
    pairs = [(b, f - b - k) for b, f, k in zip(befores, win.full_dims, keeps)]
    return _pad(spread, [(0, 0), *pairs, (0, 0)])


def _products(x: Tensor, w: Tensor, win: TransposedWindows, group: int) -> Tensor:
    """[N, *in, K, Cout]: every input position times the kernel at each of the K offsets."""
    n = len(win.in_dims)
    taps = int(np.prod(win.kernel))
    xh = _transpose(x, [0, *range(2, n + 2), 1])                 # NC... -> N...C
    wh = _transpose(w, [0, *range(2, n + 2), 1])  # [Cin, Cout/g, k...] -> [Cin, k..., Cout/g]
    cin, cout_g = int(static_shape(w)[0]), int(static_shape(w)[1])
    if group == 1:
        xs, ws = [xh], [wh]
    else:
        xs = apply_op("Split", [fl.constant(np.int32(n + 1)), xh], {"num_split": group})
        ws = apply_op("Split", [fl.constant(np.int32(0)), wh], {"num_split": group})
    outs: List[Tensor] = []
    for xg, wg in zip(xs, ws):
        rows = apply_op("Reshape", [xg, index_const([-1, cin // group])])
        cols = apply_op("Reshape", [wg, index_const([cin // group, taps * cout_g])])
        prod = apply_op("MatMul", [rows, cols])
        outs.append(apply_op("Reshape", [prod, index_const([-1, *win.in_dims, taps, cout_g])]))
    return outs[0] if group == 1 else apply_op("ConcatV2", [outs, index_scalar(n + 2)])


def conv_transpose(x: Tensor, w: Tensor, bias, win: TransposedWindows, group: int) -> Tensor:
    """ONNX ConvTranspose of ``x`` [N, Cin, *in] by ``w`` [Cin, Cout/group, *kernel]."""
    n = len(win.in_dims)
    products = _products(x, w, win, group)
    parts = []
    for tap, offset in enumerate(itertools.product(*[range(k) for k in win.kernel])):
        part = apply_op("GatherV2", [products, index_scalar(tap), index_scalar(n + 1)])
        parts.append(_place(part, win, offset))
    total = parts[0] if len(parts) == 1 else apply_op("AddN", [parts])
    begins = [b for b, _ in win.pads]
    ends = [min(b + o, f) for b, o, f in zip(begins, win.out_dims, win.full_dims)]
    y = _crop(total, begins, ends)
    y = _pad(y, [(0, 0), *[(0, o - (e - b)) for o, b, e in zip(win.out_dims, begins, ends)],
                 (0, 0)])                     # output_shape past the full size: only bias there
    if bias is not None:
        y = apply_op("AddV2", [y, bias])
    return _transpose(y, [0, n + 1, *range(1, n + 1)])
