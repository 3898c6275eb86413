"""The compiled step's feed binding (runtime/module.py, runtime/feeds.py): scalars fed as numpy
scalars or Python floats, the C struct fields written once for static feeds, and feeds of a
dynamic shape that change from call to call, all against the interpreter;
wrong dtypes and shapes stay FeedErrors, also when an array reaches the compiled call
without its check."""
from __future__ import annotations

import numpy as np
import pytest

import dsl as fl
from runtime.errors import FeedError

BACKENDS = ("interpreter", "c")


@pytest.fixture
def scalars(graph):
    f32 = fl.placeholder(fl.float32, [], name="f32")
    f64 = fl.placeholder(fl.float64, [], name="f64")
    i32 = fl.placeholder(fl.int32, [], name="i32")
    flag = fl.placeholder(fl.bool_, [], name="flag")
    return f32, f64, i32, flag, [f32 * 2.0, f64 + 1.0, i32 * 3, fl.logical_not(flag)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalars_feed_as_numpy_scalars_and_python_numbers(scalars, backend):
    f32, f64, i32, flag, outs = scalars
    cases = [(np.float32(1.5), np.float64(2.5), np.int32(4), np.bool_(True)),
             (1.5, 2.5, 4, True),
             (np.float64(1.5), np.float32(2.5), np.int64(4), np.array(True))]
    with fl.Session(backend=backend) as s:
        for a, b, c, d in cases:
            got = s.run(outs, {f32: a, f64: b, i32: c, flag: d})
            assert [type(v) for v in got] == [np.float32, np.float64, np.int32, np.bool_]
            assert [v.item() for v in got] == [3.0, 3.5, 12, False]


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_scalar_feeds_are_feed_errors(scalars, backend):
    f32, f64, i32, flag, outs = scalars
    good = {f32: np.float32(1), f64: 1.0, i32: 1, flag: False}
    bad = [(i32, np.float32(1.5), "holds floats"), (i32, 2.5, "holds floats"),
           (flag, 1.0, "booleans|placeholder is bool"), (f32, np.ones(2, np.float32), "shape"),
           (f32, "x", "not numeric")]
    with fl.Session(backend=backend) as s:
        for key, value, match in bad:
            with pytest.raises(FeedError, match=match):
                s.run(outs, {**good, key: value})
        assert s.run(outs[0], good) == 2.0            # the session still works


@pytest.mark.parametrize("backend", BACKENDS)
def test_feeds_of_open_shape_change_between_calls(graph, backend):
    rows = fl.placeholder(fl.float32, [None, 3], name="rows")
    anything = fl.placeholder(fl.float32, [None, None], name="anything")
    fixed = fl.placeholder(fl.int64, [2, 2], name="fixed")
    outs = [rows * 2.0, anything + 1.0, fixed - 1]
    fixed_value = np.array([[1, 2], [3, 4]], np.int64)
    with fl.Session(backend=backend) as s:
        call = s.make_callable(outs, [rows, anything, fixed])
        for n, shape in ((4, (2, 5)), (0, (0, 3)), (1, (5, 1)), (7, (1, 2))):
            r = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
            a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
            for got in (s.run(outs, {rows: r, anything: a, fixed: fixed_value}),
                        call(r, a, fixed_value)):
                np.testing.assert_array_equal(got[0], r * 2)
                np.testing.assert_array_equal(got[1], a + 1)
                np.testing.assert_array_equal(got[2], fixed_value - 1)


def test_an_unchecked_array_of_the_wrong_shape_is_refused_by_the_compiled_call(graph):
    fixed = fl.placeholder(fl.float32, [2, 3], name="fixed")
    rows = fl.placeholder(fl.float32, [None, 3], name="rows")
    y = fl.reduce_sum(fixed) + fl.reduce_sum(rows)
    with fl.Session() as s:
        good = [np.ones((2, 3), np.float32), np.ones((1, 3), np.float32)]
        s.run(y, dict(zip((fixed, rows), good)))
        exe = next(iter(s._steps.values()))
        assert exe.call(good, store=s.store)[0] == 9.0
        # (the C run path checks the values itself, with the feed's own message)
        with pytest.raises(FeedError, match=r"shape \[3, 2\](; the step takes shape \[2, 3\]"
                                            r"| but the placeholder has shape \[2,3\])"):
            exe.call([np.ones((3, 2), np.float32), good[1]], store=s.store)
        with pytest.raises(FeedError, match="the step takes rank 2|placeholder has shape"):
            exe.call([good[0], np.ones(3, np.float32)], store=s.store)
        assert exe.call(good, store=s.store)[0] == 9.0
