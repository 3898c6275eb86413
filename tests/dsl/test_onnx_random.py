"""ONNX's random ops through flowc (compiled C): shapes, types, ranges and distributions
(ONNX leaves the generator to the backend; flowc draws TensorFlow's Philox numbers, so the
values can only be checked statistically, as for training-mode Dropout)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from onnx_compare import node_model, run_flowc  # noqa: E402

N = 20000


def test_random_uniform_and_normal_have_their_ranges_and_moments(rng):
    x = np.zeros((100, 200), np.float64)
    nodes = [helper.make_node("RandomUniform", [], ["u"], shape=[N], low=-2.0, high=3.0,
                              seed=1.0),
             helper.make_node("RandomNormal", [], ["n"], shape=[N], mean=4.0, scale=0.5,
                              dtype=TensorProto.DOUBLE),
             helper.make_node("RandomUniformLike", ["x"], ["ul"]),
             helper.make_node("RandomNormalLike", ["x"], ["nl"], dtype=TensorProto.FLOAT,
                              seed=2.5)]
    u, n, ul, nl = run_flowc(node_model(nodes, {"x": x}, ["u", "n", "ul", "nl"], 22), {"x": x})
    assert u.dtype == np.float32 and u.shape == (N,) and n.dtype == np.float64
    assert ul.dtype == np.float64 and ul.shape == x.shape and nl.dtype == np.float32
    assert -2 <= u.min() and u.max() < 3 and abs(u.mean() - 0.5) < 6 * 5 / np.sqrt(12 * N)
    assert 0 <= ul.min() and ul.max() < 1 and abs(ul.mean() - 0.5) < 0.01
    assert abs(n.mean() - 4) < 6 * 0.5 / np.sqrt(N) and abs(n.std() - 0.5) < 0.02
    assert abs(nl.mean()) < 0.02 and abs(nl.std() - 1) < 0.02
    assert len(np.unique(u)) > N * 0.99                  # not a constant, not a short cycle


@pytest.mark.parametrize("dtype", [None, TensorProto.DOUBLE, TensorProto.INT32])
def test_bernoulli_draws_one_with_probability_p(dtype, rng):
    p = np.tile(np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32), 4000)
    attrs = {} if dtype is None else {"dtype": dtype}
    node = helper.make_node("Bernoulli", ["p"], ["y"], seed=3.0, **attrs)
    (y,) = run_flowc(node_model(node, {"p": p}, ["y"], 22), {"p": p})
    want = {None: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.INT32: np.int32}
    assert y.dtype == want[dtype] and y.shape == p.shape
    assert set(np.unique(y).tolist()) <= {0, 1}
    for value in (0.0, 0.1, 0.5, 0.9, 1.0):
        freq = y[p == value].mean()
        assert abs(freq - value) < 6 * np.sqrt(value * (1 - value) / 4000) + 1e-9, (value, freq)
