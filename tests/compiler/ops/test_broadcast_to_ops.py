"""BroadcastTo and LinSpace: compiled C against the numpy interpreter (static and run-time
shapes, int and float types), and their errors for bad arguments."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op


def test_broadcast_to_matches_numpy(graph, rng):
    xs = {"f32": rng.normal(size=(3, 1)).astype(np.float32),
          "i64": rng.integers(-9, 9, (1, 4)).astype(np.int64),
          "bool": np.array([True, False]), "scalar": np.float64(2.5)}
    targets = {"f32": [2, 3, 4], "i64": [3, 4], "bool": [3, 1, 2], "scalar": [2, 2]}
    fetches, feeds = {}, {}
    for name, value in xs.items():
        value = np.asarray(value)
        for static in (True, False):
            x = fl.placeholder(fl.DType.from_numpy(value.dtype),
                               list(value.shape) if static else [None] * value.ndim)
            feeds[x] = value
            fetches[f"{name}{static}"] = A("BroadcastTo", [x, np.array(targets[name],
                                                                        np.int32)])
        shape = fl.placeholder(fl.int64, [len(targets[name])])
        feeds[shape] = np.array(targets[name], np.int64)
        fetches[f"{name}fed"] = A("BroadcastTo", [x, shape])
    got = check_against_interpreter(graph, fetches, feeds)
    for name, value in xs.items():
        for suffix in ("True", "False", "fed"):
            np.testing.assert_array_equal(got[name + suffix],
                                          np.broadcast_to(value, targets[name]))


def test_broadcast_to_errors():
    with pytest.raises(ShapeError, match="Unable to broadcast"):
        A("BroadcastTo", [fl.constant(np.zeros((2, 3))), np.array([4, 3], np.int32)])
    with pytest.raises(ShapeError, match="must be no greater"):
        A("BroadcastTo", [fl.constant(np.zeros((2, 3))), np.array([3], np.int32)])
    g = fl.Graph()
    with g.as_default():
        s = fl.placeholder(fl.int32, [2], name="s")
        y = A("BroadcastTo", [fl.placeholder_with_default(np.ones(2), [None]), s], name="b")
        for backend in ("interpreter", "c"):
            with fl.Session(graph=g, backend=backend) as sess:
                with pytest.raises(FlowcError, match="node 'b'.*broadcast"):
                    sess.run(y, {s: [3, 3]})
                with pytest.raises(FlowcError, match="must be >= 0"):
                    sess.run(y, {s: [-1, 2]})


def test_lin_space_matches_numpy(graph):
    fetches, feeds = {}, {}
    for dtype in (np.float32, np.float64):
        start = fl.placeholder(fl.DType.from_numpy(np.dtype(dtype)), [])
        stop = fl.placeholder(fl.DType.from_numpy(np.dtype(dtype)), [])
        num = fl.placeholder(fl.int64, [])
        feeds.update({start: dtype(-2.0), stop: dtype(5.0)})
        feeds[num] = 8
        fetches[f"{dtype.__name__}"] = A("LinSpace", [start, stop, num])
        fetches[f"{dtype.__name__}1"] = A("LinSpace", [start, stop, np.int32(1)])
        fetches[f"{dtype.__name__}down"] = A("LinSpace", [stop, start, np.int32(4)])
    got = check_against_interpreter(graph, fetches, feeds, rtol=1e-6, atol=1e-6)
    for dtype in ("float32", "float64"):
        np.testing.assert_allclose(got[dtype], np.linspace(-2, 5, 8), rtol=1e-6)
        assert got[dtype][-1] == 5.0                       # the last one is stop exactly
        np.testing.assert_array_equal(got[dtype + "1"], [-2.0])
        np.testing.assert_allclose(got[dtype + "down"], np.linspace(5, -2, 4), rtol=1e-6)
    with pytest.raises(ShapeError, match="num > 0"):
        A("LinSpace", [np.float32(0), np.float32(1), np.int32(0)])
