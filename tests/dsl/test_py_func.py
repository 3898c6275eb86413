"""fl.py_func / fl.numpy_function (PyFunc, PyFuncStateless): the function runs with numpy arrays
on both backends, one or several outputs, TF's strict result types and counts, the function's
exceptions as TF's error classes naming the node, never folded at compile time, no gradient,
and refused by a C library."""
import textwrap

import numpy as np
import pytest

import dsl as fl
from cli_runner import flowc


def _sessions(graph):
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            yield backend, s


def test_outputs_on_both_backends(graph):
    x = fl.placeholder(fl.float32, [None], name="x")
    doubled = fl.py_func(lambda a: a * np.float32(2), [x], fl.float32, name="double")
    doubled.set_shape([None])
    total, idx = fl.numpy_function(lambda a, b: (a.sum(), np.arange(b, dtype=np.int64)),
                                   [x, 3], [fl.float32, fl.int64])
    total.set_shape([])
    idx.set_shape([None])
    y = fl.add(doubled, total)                       # the results feed other ops
    half = fl.py_func(lambda a: a.astype(np.float16), [x], [fl.float16])
    assert isinstance(half, list) and len(half) == 1
    half[0].set_shape([None])
    assert doubled.op.type == "PyFunc" and doubled.dtype == fl.float32
    v = np.array([1, 2, 3.5], np.float32)
    for backend, s in _sessions(graph):
        got = s.run([doubled, total, idx, y, half[0]], {x: v})
        np.testing.assert_array_equal(got[0], v * 2, err_msg=backend)
        assert got[1].shape == () and got[1] == 6.5
        np.testing.assert_array_equal(got[2], [0, 1, 2])
        np.testing.assert_array_equal(got[3], v * 2 + 6.5)
        assert got[4].dtype == np.float16
        np.testing.assert_array_equal(s.run(doubled, {x: v[:1]}), [2])     # any length


def test_stateful_and_stateless_run_with_the_step_not_at_compile_time(graph):
    calls = []

    def count(a):
        calls.append(int(a))
        return np.int32(len(calls))

    a = fl.py_func(count, [fl.constant(7)], fl.int32)
    b = fl.py_func(count, [fl.constant(8)], fl.int32, stateful=False)
    assert a.op.type == "PyFunc" and b.op.type == "PyFuncStateless"
    a.set_shape([])
    b.set_shape([])
    side = fl.py_func(lambda: calls.append(0), [], [])
    assert isinstance(side, fl.Operation)
    with fl.Session(graph=graph, backend="c") as s:
        s.run([a, b])
        s.run(b)
        s.run(side)
    assert sorted(calls[:2]) == [7, 8] and calls[2:] == [8, 0]


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_errors_are_tf_classes_naming_the_node(graph, backend):
    x = fl.placeholder(fl.float32, [2], name="x")

    def raises(exc):
        def fn(a):
            raise exc
        return fn

    cases = [(raises(ValueError("bad value")), fl.errors.InvalidArgumentError, "ValueError: bad value"),
             (raises(StopIteration()), fl.errors.OutOfRangeError, "StopIteration"),
             (raises(NotImplementedError("later")), fl.errors.UnimplementedError, "later"),
             (raises(KeyError("k")), fl.errors.UnknownError, "KeyError"),
             (raises(fl.errors.DataLossError(None, None, "torn")), fl.errors.DataLossError,
              "torn"),
             (lambda a: 1.5, fl.errors.InvalidArgumentError,
              "returns f64 values, but expects to see f32"),
             (lambda a: (a, a), fl.errors.InvalidArgumentError,
              "returns 2 values, but expects to see 1 values"),
             (lambda a: a[:1], fl.errors.InvalidArgumentError, r"expects f32\[2\]")]
    outs = []
    for i, (fn, _, _) in enumerate(cases):
        t = fl.py_func(fn, [x], fl.float32, name=f"f{i}")
        t.set_shape([2])
        outs.append(t)
    with fl.Session(graph=graph, backend=backend) as s:
        for i, (t, (_, cls, text)) in enumerate(zip(outs, cases)):
            if backend == "interpreter" and i == 7:
                continue                    # the interpreter does not check declared shapes
            with pytest.raises(cls, match=text) as info:
                s.run(t, {x: [1, 2]})
            assert info.value.node_def.name == f"f{i}", backend
            assert f"f{i}" in str(info.value)


def test_no_gradient(graph):
    v = fl.Variable([1.0, 2.0])
    y = fl.py_func(lambda a: a * 2, [v], fl.float32)
    y.set_shape([2])
    assert fl.gradients(fl.reduce_sum(y), v) == [None]


def test_a_c_library_refuses_it(capsys, tmp_path):
    model = tmp_path / "pyf.py"
    model.write_text("import dsl as fl\nimport numpy as np\n\n\ndef build():\n" + textwrap.indent(
        textwrap.dedent("""
        g = fl.Graph()
        with g.as_default():
            x = fl.placeholder(fl.float32, [2], name="x")
            y = fl.py_func(np.exp, [x], fl.float32, name="y")
            y.set_shape([2])
        return g, {"y": y}
        """), "    "))
    rc, _, err = flowc(capsys, "compile", model, "--emit", "c-library", "-o", tmp_path / "lib")
    assert rc == 1
    assert "needs the Python runtime" in err and "calls a Python function (py_func)" in err
