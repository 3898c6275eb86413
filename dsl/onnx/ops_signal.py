"""Signal processing: DFT (flowc's ``_DFT``), STFT (frames gathered from the signal, times
the window, then ``_DFT`` along each frame) and MelWeightMatrix (a constant: its inputs are
sizes and frequencies known at compile time, and the matrix is computed at import as the
ONNX reference computes it)."""
from __future__ import annotations

import numpy as np

import dsl as fl
from dsl.onnx.dtypes import flowc_dtype
from dsl.onnx.values import (binary, index_const, index_scalar, normalize_axis, rank_of,
                             shape_i64, static_shape)
from dsl.ops import apply_op


def _scalar_i64(t):
    return fl.cast(apply_op("Reshape", [t, index_const([])]), fl.int64)


def _dim(x, axis: int):
    """Dim ``axis`` of x: a constant when static, else read from its shape."""
    d = static_shape(x)[axis]
    if d is not None:
        return fl.constant(np.int64(d), dtype=fl.int64)
    return apply_op("GatherV2", [shape_i64(x), index_scalar(axis), index_scalar(0)])


def dft(x, length, axis: int, inverse: bool, onesided: bool):
    return apply_op("_DFT", [x, length], {"axis": axis, "inverse": inverse, "onesided": onesided})


def lower_dft(ctx):
    x = ctx.input(0)
    rank = rank_of(x, ctx)
    if not x.dtype.is_floating:
        raise ctx.error(f"DFT takes float tensors, got {x.dtype}")
    if ctx.opset >= 20:
        axis_in = ctx.optional_const(2, "axis")
        axis = -2 if axis_in is None else int(axis_in.reshape(-1)[0])
    else:
        axis = int(ctx.attr("axis", 1))
    axis = normalize_axis(axis, rank, ctx)
    if axis >= rank - 1:
        raise ctx.error(f"axis {axis} is the last (complex) dim of a rank {rank} input")
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    length = ctx.optional_input(1)
    if length is not None:
        length = _scalar_i64(length)
    else:
        length = _dim(x, axis)
        if inverse and onesided:                      # irfft: an even length by default
            length = binary("Mul", binary("Sub", length, index_scalar(1)), index_scalar(2))
    return dft(x, length, axis, inverse, onesided)


def lower_stft(ctx):
    signal = ctx.input(0)
    if rank_of(signal, ctx) != 3:
        raise ctx.error("the signal must be [batch, length, 1 or 2]")
    step = int(ctx.const(1, "frame_step").reshape(-1)[0])
    if step < 1:
        raise ctx.error(f"frame_step must be positive, got {step}")
    window = ctx.optional_input(2)
    frame_length = ctx.optional_const(3, "frame_length")
    if frame_length is not None:
        frame_length = int(frame_length.reshape(-1)[0])
    elif window is not None and static_shape(window) and static_shape(window)[0] is not None:
        frame_length = int(static_shape(window)[0])
    else:
        raise ctx.error("needs frame_length, or a window of known length")
    if frame_length < 1:
        raise ctx.error(f"frame_length must be positive, got {frame_length}")
    if window is not None and static_shape(window) not in (None, [frame_length], [None]):
        raise ctx.error(f"the window has shape {static_shape(window)}, not [{frame_length}]")
    # frame f is signal[:, f * step : f * step + frame_length]
    frames = binary("FloorDiv", binary("Sub", _dim(signal, 1), index_scalar(frame_length)),
                    index_scalar(step))
    frames = binary("AddV2", frames, index_scalar(1))
    starts = binary("Mul", apply_op("Range", [index_scalar(0), frames, index_scalar(1)]),
                    index_scalar(step))
    index = binary("AddV2", apply_op("ExpandDims", [starts, index_scalar(1)]),
                   index_const(list(range(frame_length))))
    x = apply_op("GatherV2", [signal, index, index_scalar(1)])     # [batch, frames, length, c]
    if window is not None:
        w = apply_op("Reshape", [fl.cast(window, signal.dtype), index_const([1, 1, -1, 1])])
        x = binary("Mul", x, w)
    onesided = bool(ctx.attr("onesided", 1))
    return dft(x, fl.constant(np.int64(frame_length), dtype=fl.int64), 2, False, onesided)


def mel_weight_matrix(num_mel_bins: int, dft_length: int, sample_rate: int, lower: float,
                      upper: float) -> np.ndarray:
    """[dft_length // 2 + 1, num_mel_bins] triangular filters, as the ONNX reference builds
    them: bin edges evenly spaced in mel (2595 log10(1 + f / 700)), floored to DFT bins."""
    bins = np.arange(0, num_mel_bins + 2)
    low_mel = 2595 * np.log1p(lower / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper / 700) / np.log(10)
    step = (high_mel - low_mel) / bins.shape[0]
    hertz = 700 * np.expm1((bins * step + low_mel) / 2595 * np.log(10))
    edges = (((dft_length + 1) * hertz) // sample_rate).astype(int)
    out = np.zeros((dft_length // 2 + 1, num_mel_bins))
    for i in range(num_mel_bins):
        left, centre, right = edges[i], edges[i + 1], edges[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            for j in range(left, centre + 1):
                out[j, i] = (j - left) / (centre - left)
        for j in range(centre, right):
            out[j, i] = (right - j) / (right - centre)
    return out


def lower_mel_weight_matrix(ctx):
    def value(i, what):
        return ctx.const(i, what).reshape(-1)[0]
    num_mel_bins, dft_length = int(value(0, "num_mel_bins")), int(value(1, "dft_length"))
    sample_rate = int(value(2, "sample_rate"))
    lower, upper = value(3, "lower_edge_hertz"), value(4, "upper_edge_hertz")
    if num_mel_bins < 1 or dft_length < 1 or sample_rate < 1:
        raise ctx.error("num_mel_bins, dft_length and sample_rate must be positive")
    if not 0 <= lower < upper:
        raise ctx.error(f"need 0 <= lower_edge_hertz < upper_edge_hertz, got {lower}, {upper}")
    try:
        matrix = mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower, upper)
    except IndexError:
        raise ctx.error(f"upper_edge_hertz {upper} is past the DFT's bins (sample_rate "
                        f"{sample_rate})") from None
    elem = ctx.attr("output_datatype", 1)
    dtype = flowc_dtype(elem)
    if dtype is None:
        raise ctx.error(f"output_datatype {elem} is not a flowc element type")
    return fl.constant(matrix.astype(dtype.np), dtype=dtype)


LOWERINGS = {
    "DFT": [(17, None, lower_dft)],
    "STFT": [(17, None, lower_stft)],
    "MelWeightMatrix": [(17, None, lower_mel_weight_matrix)],
}
