"""Cumsum and Cumprod: compiled C against the numpy interpreter over every axis, both attrs,
float and integer types (NaN, inf, wrapping), constant and fed axes, empty dims, and the axis
errors TensorFlow reports."""
import itertools

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from oracle import check_against_interpreter
from runtime.errors import RuntimeExecutionError

TYPES = [(fl.float32, np.float32), (fl.float64, np.float64), (fl.int8, np.int8),
         (fl.int32, np.int32), (fl.int64, np.int64), (fl.uint8, np.uint8)]
FLAGS = list(itertools.product((False, True), repeat=2))        # (exclusive, reverse)


def values(np_dtype, shape, rng) -> np.ndarray:
    if np.dtype(np_dtype).kind == "f":
        v = rng.uniform(-2, 2, size=shape).astype(np_dtype)
        flat = v.reshape(-1)
        flat[[1, 7, 12]] = [np.nan, np.inf, -np.inf]        # propagate along their lines
        flat[[3, 17]] = [0.0, 1e30]
        return v
    info = np.iinfo(np_dtype)
    v = rng.integers(max(info.min, -100), min(info.max, 100), size=shape).astype(np_dtype)
    flat = v.reshape(-1)
    flat[[2, 5]] = [info.max, info.max]                     # sums and products wrap
    return v


def test_every_axis_and_flag_against_the_interpreter(graph, rng):
    fetches, feeds = {}, {}
    for dt, np_dt in TYPES:
        x = fl.placeholder(dt, [None, 3, 4], name=f"x_{dt}")
        feeds[x] = values(np_dt, (2, 3, 4), rng)
        for axis in (0, -2, 2):
            for exclusive, reverse in FLAGS:
                key = f"{dt}_{axis}_{int(exclusive)}{int(reverse)}"
                fetches["sum_" + key] = fl.cumsum(x, axis, exclusive=exclusive, reverse=reverse)
                fetches["prod_" + key] = fl.cumprod(x, axis, exclusive=exclusive,
                                                    reverse=reverse)
    got = check_against_interpreter(graph, fetches, feeds)

    x = feeds[next(iter(feeds))].astype(np.float64)
    np.testing.assert_allclose(got["sum_f32_-2_00"], np.cumsum(x, 1), rtol=1e-5)
    np.testing.assert_allclose(got["prod_f32_2_00"], np.cumprod(x, 2), rtol=1e-5)
    rev = np.flip(np.cumsum(np.flip(x, 0), 0), 0)
    np.testing.assert_allclose(got["sum_f32_0_01"], rev, rtol=1e-5)
    exclusive = got["sum_f32_2_10"]
    assert (exclusive[..., 0] == 0).all()
    np.testing.assert_allclose(exclusive[..., 1:], np.cumsum(x, 2)[..., :-1], rtol=1e-5)
    assert (got["prod_i32_-2_11"][:, -1, :] == 1).all()
    i8 = feeds[list(feeds)[2]]
    wrapped = np.cumsum(i8.astype(np.int64), axis=2).astype(np.int8)   # two's complement
    np.testing.assert_array_equal(got["sum_i8_2_00"], wrapped)

    empty = {k: v[:0] for k, v in feeds.items()}
    assert check_against_interpreter(graph, fetches, empty)["sum_f64_-2_11"].shape == (0, 3, 4)


def test_fed_axis_is_read_and_checked_at_run_time(graph, rng):
    x = fl.placeholder(fl.float32, [None, 5], name="x")
    axis = fl.placeholder(fl.int64, [], name="axis")
    fetches = {f"{e}{r}": fl.cumsum(x, axis, exclusive=e, reverse=r) for e, r in FLAGS}
    fetches["prod"] = fl.cumprod(x, axis, reverse=True)
    data = rng.normal(size=(3, 5)).astype(np.float32)
    for a in (0, 1, -1, -2):
        got = check_against_interpreter(graph, fetches, {x: data, axis: np.int64(a)})
        np.testing.assert_allclose(got["FalseFalse"], np.cumsum(data, a), rtol=1e-5)
    for bad in (2, -3):
        for backend in ("interpreter", "c"):
            with fl.Session(backend=backend) as s:
                with pytest.raises((ExecutionError, RuntimeExecutionError),
                                   match=r"scan axis in the range \[-2, 2\), but got " + str(bad)):
                    s.run(fetches["FalseFalse"], {x: data, axis: np.int64(bad)})


def test_static_axis_errors_name_the_node(graph):
    x = fl.constant(np.ones((2, 3), np.float32))
    with pytest.raises(ShapeError, match=r"range \[-2, 2\), but got 2"):
        fl.cumsum(x, 2)
    with pytest.raises(ShapeError, match="axis must be a scalar"):
        fl.cumprod(x, [0])
    with pytest.raises(ShapeError, match=r"range \[0, 0\)"):
        fl.cumsum(fl.constant(1.0), 0)                  # a scalar has no axis, as in TF
    with pytest.raises(Exception, match="Cumsum"):
        fl.cumsum(fl.constant([True, False]), 0)        # not numeric


def test_long_scan_accumulates_in_order(graph):
    # one line of 10000 f32 values: C must add in the same order as the reference (no
    # reassociation), so the results agree to the last bit, not only within a tolerance
    x = fl.placeholder(fl.float32, [10000], name="x")
    y = fl.cumsum(x, 0)
    data = np.random.default_rng(3).uniform(0, 1, 10000).astype(np.float32)
    got = check_against_interpreter(graph, [y], {x: data}, rtol=0, atol=0)
    np.testing.assert_array_equal(got["0"], np.add.accumulate(data, dtype=np.float32))
