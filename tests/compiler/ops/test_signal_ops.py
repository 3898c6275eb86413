"""_DFT (ONNX's DFT): compiled C against the numpy interpreter (numpy's FFT in double
precision) along every axis, forward, inverse and onesided (rfft, irfft), with signals cut and
padded to the length, odd and even lengths, a length fed at run time, and the errors of a
length that is not positive."""
import itertools

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op


def _dft(x, n, axis, inverse=False, onesided=False):
    return A("_DFT", [x, n], {"axis": axis, "inverse": inverse, "onesided": onesided})


def test_dft_every_form_matches_numpy(graph, rng):
    x = fl.placeholder(fl.float32, [None, 6, 5, None], name="x")
    n = fl.placeholder(fl.int64, [], name="n")
    fetches = {}
    for axis, inverse, onesided, length in itertools.product([0, 1, 2], [False, True],
                                                             [False, True], [None, 4, 9]):
        size = fl.constant(np.int64(length)) if length is not None else n
        fetches[f"{axis}_{inverse}_{onesided}_{length}"] = _dft(x, size, axis, inverse, onesided)
    assert fetches["1_False_True_9"].shape == (None, 5, 5, 2)
    assert fetches["2_True_True_4"].shape == (None, 6, 4, 1)
    for channels, nv in ((2, 7), (1, 6), (2, 1)):
        xv = rng.standard_normal((3, 6, 5, channels)).astype(np.float32)
        got = check_against_interpreter(graph, fetches, {x: xv, n: np.int64(nv)},
                                        rtol=1e-5, atol=1e-5)
    z = xv[..., 0] + 1j * xv[..., 1]
    np.testing.assert_allclose(got["1_False_False_9"][..., 1], np.fft.fft(z, 9, axis=1).imag,
                               rtol=1e-5, atol=1e-5)
    empty = check_against_interpreter(graph, {"y": fetches["0_True_False_None"]},
                                      {x: np.zeros((0, 6, 5, 2), np.float32), n: np.int64(3)})
    assert empty["y"].shape == (3, 6, 5, 2) and not empty["y"].any()


def test_irfft_inverts_rfft_in_double_precision(graph, rng):
    x = fl.placeholder(fl.float64, [4, None, 1], name="x")
    for length in (8, 7):
        spectrum = _dft(x, fl.constant(np.int32(length)), 1, onesided=True)
        back = _dft(spectrum, fl.constant(np.int32(length)), 1, inverse=True, onesided=True)
        xv = rng.standard_normal((4, length, 1))
        got = check_against_interpreter(graph, {"s": spectrum, "b": back}, {x: xv})
        np.testing.assert_allclose(got["b"], xv, rtol=1e-12, atol=1e-12)


def test_dft_length_must_be_positive(graph):
    x = fl.placeholder(fl.float32, [3, 2], name="x")
    n = fl.placeholder(fl.int64, [], name="n")
    y = _dft(x, n, 0)
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as sess:
            with pytest.raises(FlowcError, match="fft_length must be"):
                sess.run(y, {x: np.zeros((3, 2), np.float32), n: np.int64(0)})
    with pytest.raises(ShapeError, match="fft_length must be positive"):
        _dft(x, fl.constant(np.int64(-2)), 0)
    with pytest.raises(ShapeError, match="must name a dim before the last"):
        _dft(x, n, 1)
