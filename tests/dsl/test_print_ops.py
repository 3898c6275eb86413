"""fl.Print and fl.print, as TF1's tf.Print and tf.print: the text TensorFlow writes, the
same from compiled C as from the interpreter, first_n counted per session, the input passed
through, and Python values and streams."""
import sys

import numpy as np
import pytest

import dsl as fl
from runtime.printing import summarize_v1, summarize_v2

BACKENDS = ("interpreter", "c")


def test_tf1_summaries():
    assert summarize_v1(np.arange(6).reshape(2, 3), 3) == "[0 1 2]..."
    assert summarize_v1(np.arange(6).reshape(2, 3), 6) == "[0 1 2][3 4 5]"
    assert summarize_v1(np.arange(6).reshape(2, 3), 4) == "[0 1 2][3...]..."
    assert summarize_v1(np.arange(5), 3) == "0 1 2..."
    assert summarize_v1(np.arange(5), -1) == "0 1 2 3 4"
    assert summarize_v1(np.float32(0.1), 3) == "0.1"
    assert summarize_v1(np.array([1.0, 2.5, 1e-7], np.float32), 3) == "1 2.5 1e-07"
    assert summarize_v1(np.array([True, False]), 3) == "1 0"
    assert summarize_v1(np.zeros((0,)), 3) == ""


def test_tf2_summaries():
    assert summarize_v2(np.arange(10), 3) == "[0 1 2 ... 7 8 9]"
    assert summarize_v2(np.arange(4).reshape(2, 2), 3) == "[[0 1]\n [2 3]]"
    assert summarize_v2(np.arange(8).reshape(2, 2, 2), 3) == "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]"
    assert summarize_v2(np.float64(2.0), 3) == "2"
    assert summarize_v2(np.arange(10), -1) == "[0 1 2 3 4 5 6 7 8 9]"


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_passes_through_and_writes_stderr(graph, backend, capfd):
    x = fl.placeholder(fl.float32, [None])
    y = fl.Print(x, [x, fl.shape(x)], "x: ", summarize=2) * 2.0
    once = fl.Print(x, [x], message="once ", first_n=1)
    with fl.Session(backend=backend) as s:
        np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.5, 3.0]}), [2.0, 5.0, 6.0])
        s.run(once, {x: [4.0]})
        s.run(once, {x: [5.0]})
    err = capfd.readouterr().err
    assert "x: [1 2.5...][3]\n" in err
    assert err.count("once ") == 1 and "once [4]\n" in err
    with fl.Session(backend=backend) as s:                   # a new session counts again
        s.run(once, {x: [6.0]})
    assert "once [6]\n" in capfd.readouterr().err


@pytest.mark.parametrize("backend", BACKENDS)
def test_print_v2_formats_strings_and_tensors(graph, backend, capfd, tmp_path):
    a = fl.constant(np.arange(10, dtype=np.int32))
    b = fl.constant([[0.5, 1.0], [2.0, -3.0]])
    v = fl.Variable(7, name="v")
    op = fl.print("a:", a, "b =", b, {"v": v}, 4)
    out_op = fl.print("step", v, output_stream=sys.stdout, sep="|", end="!\n")
    path = tmp_path / "log.txt"
    file_op = fl.print("to file {}", a[:2], output_stream=f"file://{path}")
    assert isinstance(op, fl.Operation)
    with fl.Session(backend=backend) as s:
        s.run(fl.global_variables_initializer())
        s.run([op, out_op, file_op])
    captured = capfd.readouterr()
    assert "a: [0 1 2 ... 7 8 9] b = [[0.5 1]\n [2 -3]] {'v': 7} 4\n" in captured.err
    assert "step|7!\n" in captured.out
    assert path.read_text() == "to file {} [0 1]\n"


def test_print_runs_under_control_dependencies(graph, capfd):
    x = fl.constant(3.0)
    p = fl.print("value", x)
    with fl.control_dependencies([p]):
        y = fl.identity(x)
    with fl.Session(backend="c") as s:
        assert s.run(y) == 3.0
    assert "value 3\n" in capfd.readouterr().err


def test_bad_stream_is_refused(graph):
    with pytest.raises(ValueError, match="Unsupported output stream"):
        fl.print("x", output_stream=42)
