"""Bitcast (TensorFlow's): compiled C against the numpy interpreter, to types of the same,
a smaller and a larger size, with empty tensors and dims fed at run time, and the errors of
a last dim that is not the size ratio."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError


def test_bitcast_to_same_smaller_and_larger_types(graph, rng):
    f = fl.placeholder(fl.float32, [None, 3], name="f")
    d = fl.placeholder(fl.float64, [None], name="d")
    b = fl.placeholder(fl.int8, [None, 4], name="b")
    s = fl.placeholder(fl.int64, [], name="s")
    fetches = {"f_i32": fl.bitcast(f, fl.int32), "d_u8": fl.bitcast(d, fl.uint8),
               "d_i16": fl.bitcast(d, fl.int16), "b_f32": fl.bitcast(b, fl.float32),
               "b_u8": fl.bitcast(b, fl.uint8), "s_f64": fl.bitcast(s, fl.float64),
               "s_i32": fl.bitcast(s, fl.int32)}
    assert fetches["d_u8"].shape == (None, 8) and fetches["b_f32"].shape == (None,)
    assert fetches["s_i32"].shape == (2,)
    for n in (3, 0):
        fv = rng.standard_normal((n, 3)).astype(np.float32)
        dv = rng.standard_normal(n)
        bv = rng.integers(-128, 128, (n, 4)).astype(np.int8)
        feed = {f: fv, d: dv, b: bv, s: np.int64(-4611686018427387904)}
        got = check_against_interpreter(graph, fetches, feed)
        np.testing.assert_array_equal(got["f_i32"], fv.view(np.int32))
        np.testing.assert_array_equal(got["d_u8"], dv.view(np.uint8).reshape(n, 8))
        np.testing.assert_array_equal(got["b_f32"], bv.view(np.float32).reshape(n))
        np.testing.assert_array_equal(got["b_u8"], bv.view(np.uint8))
        assert got["s_f64"] == -2.0


def test_bitcast_to_a_larger_type_needs_the_ratio_as_last_dim(graph):
    b = fl.placeholder(fl.uint8, [2, None], name="b")
    y = fl.bitcast(b, fl.int32)
    assert y.shape == (2,)
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as sess:
            np.testing.assert_array_equal(sess.run(y, {b: np.ones((2, 4), np.uint8)}),
                                          [0x01010101] * 2)
            with pytest.raises(FlowcError, match="Cannot bitcast from u8 to i32"):
                sess.run(y, {b: np.ones((2, 3), np.uint8)})
    with pytest.raises(ShapeError, match="last dim of \\[2,3\\] must be 4"):
        fl.bitcast(fl.constant(np.zeros((2, 3), np.uint8)), fl.int32)
    with pytest.raises(ShapeError, match="a scalar has no last dim"):
        fl.bitcast(fl.constant(np.int16(1)), fl.int64)


def test_bitcast_of_halves_is_their_bits(graph):
    """f16 and bf16 are bitcast as stored (Bitcast is half_native: never computed in f32)."""
    h = fl.placeholder(fl.float16, [3], name="h")
    b = fl.placeholder(fl.bfloat16, [3], name="b")
    u = fl.placeholder(fl.uint16, [2, 2], name="u")
    hv = np.array([1.5, -0.0, 65504.0], np.float16)
    bv = np.array([1.5, -2.0, 3e38], fl.bfloat16.np)
    uv = np.array([[0x3c00, 0x7e00], [0x3f80, 0xffc0]], np.uint16)
    fetches = {"h_u16": fl.bitcast(h, fl.uint16), "b_i16": fl.bitcast(b, fl.int16),
               "h_bf16": fl.bitcast(h, fl.bfloat16), "u_f32": fl.bitcast(u, fl.float32),
               "u_f16": fl.bitcast(u, fl.float16)}
    got = check_against_interpreter(graph, fetches, {h: hv, b: bv, u: uv})
    np.testing.assert_array_equal(got["h_u16"], hv.view(np.uint16))
    np.testing.assert_array_equal(got["b_i16"], bv.view(np.int16))
    np.testing.assert_array_equal(got["h_bf16"].view(np.uint16), hv.view(np.uint16))
    np.testing.assert_array_equal(got["u_f32"], uv.view(np.float32).reshape(2))
    np.testing.assert_array_equal(got["u_f16"].view(np.uint16), uv)
