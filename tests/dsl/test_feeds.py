"""Feed errors on both backends (FeedError with clear messages, never a crash), and kernel
errors raised by generated C (RuntimeExecutionError naming the node and its source line)."""
import inspect
import os

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from runtime.errors import FeedError, RuntimeExecutionError

BACKENDS = ("interpreter", "c")


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno


@pytest.fixture
def model(graph):
    x = fl.placeholder(fl.float32, [None, 3], name="x"); x_line = _line()  # noqa: E702
    n = fl.placeholder(fl.int32, [2], name="n")
    y = fl.multiply(x, 2.0, name="y")
    m = fl.add(n, 1, name="m")
    return graph, x, x_line, n, y, m


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_dtypes_are_feed_errors(model, backend):
    graph, x, _, n, y, m = model
    xv = np.ones((1, 3), np.float32)
    bad_n = [
        (np.array([1.5, 2.0]), "holds floats (float64) but the placeholder is i32"),
        (np.array([1.0, 2.0], np.float32), "holds floats (float32)"),
        ([1.0, 2.0], "holds floats"),
        (np.array([True, False]), "dtype bool but the placeholder is i32"),
        (np.array([2**40, 1]), "out of range for i32"),
        (np.array(["a", "b"]), "is not numeric"),
        ([object(), 1], "is not numeric"),
        ([[1, 2], [3]], "is not a tensor"),
    ]
    with fl.Session(graph=graph, backend=backend) as s:
        for value, words in bad_n:
            with pytest.raises(FeedError, match="feed for 'n'") as info:
                s.run(m, {n: value})
            assert words in str(info.value), (value, str(info.value))
        with pytest.raises(FeedError, match="dtype int32 but the placeholder is f32|booleans"):
            s.run(y, {x: np.ones((1, 3), bool)})
        # Conversions that keep every value are fine.
        np.testing.assert_array_equal(s.run(m, {n: np.array([1, 2], np.int64)}), [2, 3])
        np.testing.assert_array_equal(s.run(m, {n: [3, 4]}), [4, 5])
        assert s.run(y, {x: np.ones((1, 3), np.float64)}).dtype == np.float32
        assert s.run(y, {x: [[1, 2, 3]]}).dtype == np.float32
        np.testing.assert_array_equal(s.run(y, {x: xv}), xv * 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_shapes_are_feed_errors(model, backend):
    graph, x, _, n, y, m = model
    with fl.Session(graph=graph, backend=backend) as s:
        cases = [(x, np.ones((2, 4), np.float32), y, "shape [2, 4] but the placeholder has shape [?,3]"),
                 (x, np.ones(3, np.float32), y, "shape [3] but the placeholder has shape [?,3]"),
                 (x, np.float32(1), y, "shape [] but"),
                 (n, np.ones((1, 2), np.int32), m, "shape [1, 2] but the placeholder has shape [2]"),
                 (n, [1, 2, 3], m, "shape [3] but")]
        for key, value, fetch, words in cases:
            with pytest.raises(FeedError) as info:
                s.run(fetch, {key: value})
            assert f"feed for '{key.op.name}'" in str(info.value) and words in str(info.value)
        assert s.run(y, {x: np.ones((0, 3), np.float32)}).shape == (0, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_placeholder_names_it_and_where_it_was_defined(model, backend):
    graph, x, x_line, n, y, m = model
    with fl.Session(graph=graph, backend=backend) as s:
        with pytest.raises(FeedError) as info:
            s.run([y, m], {n: [1, 2]})
    msg = str(info.value)
    assert "you must feed a value for placeholder 'x'" in msg and "f32[?,3]" in msg
    assert f"test_feeds.py:{x_line}:" in msg
    assert os.path.join("tests", "dsl", "test_feeds.py") in msg


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_feed_keys_and_values(model, backend):
    graph, x, _, n, y, m = model
    other = fl.Graph()
    with other.as_default():
        foreign = fl.placeholder(fl.float32, [None, 3], name="x")
    xv = np.ones((1, 3), np.float32)
    cases = [({"nope:0": xv}, "cannot feed 'nope:0': no node named 'nope'"),
             ({"y:1": xv}, "cannot feed 'y:1'"),
             ({x.op: xv}, "cannot feed operation 'x'"),
             ({3: xv}, "feed_dict keys must be fl.Tensor or tensor names"),
             ({foreign: xv}, "another graph"),
             ({x: xv, "x:0": xv}, "is fed twice"),
             ({x: y}, "the value fed to 'x:0' is a symbolic Tensor (y:0)"),
             ({x: xv, n: m}, "symbolic Tensor (m:0)"),
             ({x: y.op}, "symbolic Operation")]
    with fl.Session(graph=graph, backend=backend) as s:
        for feed, words in cases:
            with pytest.raises(FeedError) as info:
                s.run(y, feed)
            assert words in str(info.value), str(info.value)
        np.testing.assert_array_equal(s.run(y, {x: xv}), xv * 2)    # still fine afterwards


# --- kernel errors from generated code ------------------------------------------------------
def _fail_kernel(ctx, x):
    if np.any(x < 0):
        raise ValueError(f"negative value {x[x < 0][0]}")
    return x.copy()


def _fail_c_kernel(kc):
    x, out = kc.inputs[0], kc.out
    i = kc.tmp("i")
    return (f"for (int64_t {i} = 0; {i} < {x.size}; {i}++) {{\n"
            f"    if ({x.data}[{i}] < 0) "
            + kc.fail("negative value %g at index %lld", f"(double){x.data}[{i}]", f"(long long){i}")
            + f"\n    {out.data}[{i}] = {x.data}[{i}];\n}}")


register_op("_TestCheckNonNegative", inputs=["x: T"], outputs=["y: T"], attrs=["T: {float}"],
            shape=lambda ctx: [ctx.input_shape(0)], kernel=_fail_kernel,
            c_kernel=_fail_c_kernel, c_output_dims=lambda kc: [kc.inputs[0].dims],
            replace=True, doc="Copies its input; a negative element is an error (for tests).")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_kernel_errors_name_the_node_and_keep_the_process_working(graph):
    x = fl.placeholder(fl.float32, [None], name="x")
    big = fl.negative(fl.negative(x))                  # buffers that the failing step must free
    checked = fl.raw_ops._TestCheckNonNegative(x=big, name="checked"); line = _line()  # noqa: E702
    out = fl.multiply(checked, 1.0)
    good = np.ones(1 << 18, np.float32)
    bad = good.copy()
    bad[12345] = -2.0

    with fl.Session(graph=graph, backend="interpreter") as s:
        with pytest.raises(ExecutionError, match="node 'checked'.*negative value -2"):
            s.run(out, {x: bad})

    with fl.Session(graph=graph) as s:
        np.testing.assert_array_equal(s.run(out, {x: good}), good)
        with pytest.raises(RuntimeExecutionError) as info:
            s.run(out, {x: bad})
        err = info.value
        assert err.node == "checked" and err.location.endswith(f"test_feeds.py:{line}:15")
        assert str(err) == f"{err.location}: node 'checked': negative value -2 at index 12345"
        before = _rss_bytes()
        for i in range(300):                           # 3 MB allocated per failing run
            with pytest.raises(RuntimeExecutionError):
                s.run(out, {x: bad})
            if i % 10 == 0:
                np.testing.assert_array_equal(s.run(out, {x: good}), good)
        grown = _rss_bytes() - before
        assert grown < 200 << 20, f"resident memory grew by {grown >> 20} MB: failing steps leak"
        assert s.compile_count == 1
