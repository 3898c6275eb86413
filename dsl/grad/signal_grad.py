"""The gradient of ``_DFT`` (``compiler/ops/signal.py``): the transform is linear, so its
gradient is its adjoint, itself a ``_DFT`` of the incoming gradient:

- forward (L points): ``L * inverse DFT`` of the gradient (bins a onesided transform left out
  count as 0);
- inverse: ``1 / L * forward DFT``;
- inverse onesided (irfft): ``c_b / L * rfft`` of the gradient, ``c_b`` = 1 for bin 0 and, for
  even L, bin L / 2, else 2 (each other bin stands for itself and its mirror);

then cut or zero-padded back to the input's length along the axis, and its real part only
for a real input. The length and the input's size along the axis must be known at compile
time.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import GradientShapeError, RegisterGradient
from dsl.grad._util import need_rank, need_value
from dsl.ops import apply_op, constant
from dsl.tensor import Operation, Tensor, static_shape

Grads = List[Optional[Tensor]]


def _resize(t: Tensor, axis: int, rank: int, have: int, want: int) -> Tensor:
    """``t`` cut to, or zero-padded at the end to, ``want`` entries along ``axis``."""
    if want == have:
        return t
    if want < have:
        size = [-1] * rank
        size[axis] = want
        return apply_op("Slice", [t, constant(np.zeros(rank, np.int64)),
                                  constant(np.asarray(size, np.int64))])
    pads = np.zeros((rank, 2), np.int64)
    pads[axis, 1] = want - have
    return apply_op("Pad", [t, constant(pads)])


def _scaled(t: Tensor, scale) -> Tensor:
    return apply_op("Mul", [t, constant(np.asarray(scale, t.dtype.np))])


@RegisterGradient("_DFT")
def _dft_grad(op: Operation, g: Tensor) -> Grads:
    x = op.inputs[0]
    rank = need_rank(op, x)
    axis, inverse, onesided = op.get_attr("axis"), op.get_attr("inverse"), op.get_attr("onesided")
    length = int(np.reshape(need_value(op, 1, "fft_length"), -1)[0])
    n, channels = static_shape(x)[axis], static_shape(x)[-1]
    if n is None or channels is None:
        raise GradientShapeError(f"the gradient of _DFT '{op.name}' needs the input's size "
                                 "along the axis and its last dim known")
    size = constant(np.int64(length))
    attrs = {"axis": axis}
    if not inverse:
        bins = length // 2 + 1 if onesided else length
        full = _resize(g, axis, rank, bins, length)
        back = _scaled(apply_op("_DFT", [full, size], {**attrs, "inverse": True}), length)
        have = length
    elif not onesided:
        back = _scaled(apply_op("_DFT", [g, size], attrs), 1.0 / length)
        have = length
    else:
        bins = length // 2 + 1
        weights = np.full(bins, 2.0 / length)
        weights[0] = 1.0 / length
        if length % 2 == 0:
            weights[-1] = 1.0 / length
        shape = [1] * rank
        shape[axis] = bins
        spectrum = apply_op("_DFT", [g, size], {**attrs, "onesided": True})
        back = apply_op("Mul", [spectrum, constant(weights.reshape(shape).astype(g.dtype.np))])
        have = bins
    back = _resize(back, axis, rank, have, n)
    if channels == 1:
        back = _resize(back, rank - 1, rank, 2, 1)
    return [back, None]
