"""The bitwise ops (``fl.bitwise``) over every integer type: compiled C against the numpy
interpreter with broadcasting and extreme values, TensorFlow's clamping of shift amounts
(negative, the width and more), arithmetic right shifts, and the ``& | ^ ~`` operators."""
import numpy as np
import pytest

import dsl as fl
from compiler.ir.op_registry import TYPE_GROUPS
from oracle import check_against_interpreter
from runtime.dtypes import DType

INT_TYPES = [d for d in TYPE_GROUPS["int"] if d.np.kind in "iu"]


def extremes(np_dtype) -> np.ndarray:
    info = np.iinfo(np_dtype)
    vals = [info.min, info.max, 0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 65, 100,
            info.max - 1, info.min + 1]
    if info.min < 0:
        vals += [-1, -2, -5, -7, -8, -9, -32, -33, -64, -65]
    vals = [v for v in vals if info.min <= v <= info.max]
    pad = (-len(vals)) % 4
    return np.array(vals + vals[:pad], dtype=np_dtype).reshape(-1, 4)


def test_every_integer_type_with_extremes_and_broadcasting(graph):
    fetches, feeds = {}, {}
    for dt in INT_TYPES:
        x = fl.placeholder(dt, [None, 4], name=f"x_{dt}")
        y = fl.placeholder(dt, [None, 1], name=f"y_{dt}")     # each shift amount per row
        row = fl.placeholder(dt, [4], name=f"row_{dt}")
        xs = extremes(dt.np)
        feeds[x] = xs
        feeds[y] = np.resize(extremes(dt.np).reshape(-1), (len(xs), 1)).astype(dt.np)
        feeds[row] = xs[1]
        for name, fn in (("and", fl.bitwise.bitwise_and), ("or", fl.bitwise.bitwise_or),
                         ("xor", fl.bitwise.bitwise_xor), ("left", fl.bitwise.left_shift),
                         ("right", fl.bitwise.right_shift)):
            fetches[f"{name}_{dt}"] = fn(x, y)
            fetches[f"{name}_row_{dt}"] = fn(x, row)
        fetches[f"invert_{dt}"] = fl.bitwise.invert(x)
    got = check_against_interpreter(graph, fetches, feeds)
    empty = {k: v if k.name.startswith("row_") else v[:0] for k, v in feeds.items()}
    assert check_against_interpreter(graph, fetches, empty)["left_i32"].shape == (0, 4)

    for dt in INT_TYPES:
        x = feeds[next(k for k in feeds if k.name.startswith(f"x_{dt}"))]
        bits = 8 * x.dtype.itemsize
        np.testing.assert_array_equal(got[f"invert_{dt}"], ~x)
        y = feeds[next(k for k in feeds if k.name.startswith(f"y_{dt}"))]
        np.testing.assert_array_equal(got[f"xor_{dt}"], x ^ y)
        # amounts clamp into [0, bits - 1]: a negative amount shifts by 0, a large one by
        # bits - 1 (TF's CPU kernel)
        # (through f64, which keeps a u64 amount's magnitude; int64 would wrap 2**64 - 1 to -1)
        amount = np.clip(y.astype(np.float64), 0, bits - 1).astype(np.int64)
        right = np.right_shift(x, amount.astype(x.dtype))
        np.testing.assert_array_equal(got[f"right_{dt}"], right)
        if x.dtype.kind == "i":
            assert (got[f"right_{dt}"][(x < 0) & (y.astype(np.int64) >= bits - 1)] == -1).all()


def test_tensorflows_documented_examples(graph):
    lhs, rhs = [-1, -5, -3, -14], [5, 0, 7, 11]
    fetches = {}
    for dt in (fl.int8, fl.int16, fl.int32, fl.int64):
        fetches[str(dt)] = fl.bitwise.left_shift(fl.constant(np.array(lhs, dt.np)),
                                                 fl.constant(np.array(rhs, dt.np)))
    fetches["neg"] = fl.bitwise.left_shift(fl.constant(np.array([-2, 64, 101, 32], np.int8)),
                                           fl.constant(np.array([-1, -5, -3, -14], np.int8)))
    got = check_against_interpreter(graph, fetches)
    assert got["i8"].tolist() == [-32, -5, -128, 0]
    for dt in ("i16", "i32", "i64"):
        assert got[dt].tolist() == [-32, -5, -384, -28672]
    assert got["neg"].tolist() == [-2, 64, 101, 32]


def test_operators_are_bitwise_on_integers_and_logical_on_bools(graph):
    a = fl.placeholder(fl.int32, [3], name="a")
    b = fl.placeholder(fl.bool_, [3], name="b")
    fetches = {"and": a & 6, "ror": 12 | a, "xor": a ^ a, "inv": ~a, "band": b & True,
               "bnot": ~b, "bxor": b ^ True}
    assert fetches["and"].op.type == "BitwiseAnd" and fetches["inv"].op.type == "Invert"
    assert fetches["bnot"].op.type == "LogicalNot"
    got = check_against_interpreter(graph, fetches, {a: np.array([5, -1, 9], np.int32),
                                                     b: np.array([True, False, True])})
    assert got["and"].tolist() == [4, 6, 0] and got["ror"].tolist() == [13, -1, 13]
    assert got["xor"].tolist() == [0, 0, 0] and got["inv"].tolist() == [-6, 0, -10]
    assert got["bnot"].tolist() == [False, True, False]
    assert got["bxor"].tolist() == [False, True, False]


def test_float_and_bool_inputs_are_refused(graph):
    with pytest.raises(Exception, match="BitwiseAnd"):
        fl.bitwise.bitwise_and(fl.constant([1.0]), fl.constant([2.0]))
    with pytest.raises(Exception, match="Invert"):
        fl.bitwise.invert(fl.constant([True]))
    assert DType.u8 in INT_TYPES and DType.i8 in INT_TYPES
