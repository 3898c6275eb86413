"""``_DFT``: flowc's own discrete Fourier transform on real tensors that hold complex numbers
as a last dim of 2 (real, imaginary), or real numbers as a last dim of 1: ONNX's DFT.
(TensorFlow's FFT ops take complex64/complex128 tensors, which flowc does not have.)

- The transform runs along ``axis`` (not the last dim) with ``fft_length`` points L (a scalar
  input): the signal is cut, or padded with zeros, to L along the axis.
- Forward: ``X[k] = sum_n x[n] exp(-2 pi i k n / L)``, all L bins, or the L // 2 + 1 first
  with ``onesided`` (the rest mirror them for a real signal).
- ``inverse``: ``x[n] = 1/L sum_k X[k] exp(2 pi i k n / L)``; with ``onesided`` too the input
  holds the first bins of a Hermitian spectrum (numpy's ``irfft``: bins past the input are
  0, the imaginary parts of bin 0 and, for even L, of bin L / 2 are ignored) and the output
  is real (a last dim of 1) with L points.

The C kernel (``compiler/codegen/c_ops/signal.py``) sums directly, O(N L) per transform, in
double precision with a table of the L twiddle factors (``exp(2 pi i j / L)``, indexed by
``k n mod L``): exact enough for any length, fast at the lengths of audio frames; no FFT.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op


def dft_out_len(length: Optional[int], inverse: bool, onesided: bool) -> Optional[int]:
    if length is None:
        return None
    return length // 2 + 1 if onesided and not inverse else length


def _length_value(ctx) -> Optional[int]:
    value = ctx.input_value(1)
    if value is None:
        return None
    value = np.reshape(value, -1)
    if value.size != 1:
        raise ctx.error(f"fft_length must be a scalar, got {value.size} values")
    if int(value[0]) < 1:
        raise ctx.error(f"fft_length must be positive, got {int(value[0])}")
    return int(value[0])


def _dft_shape(ctx) -> list:
    s = ctx.input_shape(0)
    inverse, onesided, axis = ctx.attrs["inverse"], ctx.attrs["onesided"], ctx.attrs["axis"]
    length = _length_value(ctx)
    if s is None:
        return [None]
    if len(s) < 2 or not 0 <= axis < len(s) - 1:
        raise ctx.error(f"axis {axis} must name a dim before the last (complex) one of a rank "
                        f"{len(s)} input")
    if s[-1] is not None and s[-1] not in (1, 2):
        raise ctx.error(f"the last dim holds (real) or (real, imaginary): 1 or 2, got {s[-1]}")
    out = list(s)
    out[axis] = dft_out_len(length, inverse, onesided)
    out[-1] = 1 if inverse and onesided else 2
    return [tuple(out)]


def _dft_ref(ctx, x: np.ndarray, fft_length: np.ndarray) -> np.ndarray:
    inverse, onesided, axis = ctx.attrs["inverse"], ctx.attrs["onesided"], ctx.attrs["axis"]
    length = np.reshape(fft_length, -1)
    if length.size != 1 or int(length[0]) < 1:
        raise ExecutionError(f"fft_length must be one positive value, got {length.tolist()}",
                             ctx.node)
    n = int(length[0])
    if x.shape[-1] not in (1, 2):
        raise ExecutionError(f"the last dim holds (real) or (real, imaginary): 1 or 2, got "
                             f"{x.shape[-1]}", ctx.node)
    signal = x[..., 0].astype(np.float64)
    if x.shape[-1] == 2:
        signal = signal + 1j * x[..., 1].astype(np.float64)
    if inverse and onesided:
        out = np.fft.irfft(signal, n=n, axis=axis)[..., None]
    else:
        spectrum = np.fft.ifft(signal, n=n, axis=axis) if inverse else \
            np.fft.fft(signal, n=n, axis=axis)
        if onesided:
            spectrum = np.take(spectrum, np.arange(n // 2 + 1), axis=axis)
        out = np.stack([spectrum.real, spectrum.imag], axis=-1)
    return out.astype(x.dtype)


register_op("_DFT", inputs=["input: T", "fft_length: Tlen"], outputs=["output: T"],
            attrs=["T: {float}", "Tlen: {i32, i64} = i64", "axis: int = 0",
                   "inverse: bool = false", "onesided: bool = false"],
            shape=_dft_shape, kernel=_dft_ref, group="other",
            doc="The DFT of input [..., 1 or 2] (real, or real and imaginary) along axis, with "
                "fft_length points: forward or inverse, onesided (ONNX's DFT).")
