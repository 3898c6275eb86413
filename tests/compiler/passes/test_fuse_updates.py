"""The fuse-updates pass and ``_MatMulAssignSub``: a dense SGD step on a weight matrix becomes
one gemm into the variable; training gives the same variables as the unfused program and the
interpreter, and what must not fuse does not."""
import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize

UNFUSED = PipelineOptions(disable=("fuse-updates", "fuse-accumulate", "fuse-conv",
                                   "fuse-matmul-bias"))


def _optimized(targets, feeds, fetches=(), **options):
    step = make_step_graph(fl.get_default_graph(), [f.output for f in feeds],
                           [f.output for f in fetches], [t.node for t in targets])
    optimize(step, PipelineOptions(**options))
    return step.graph


def _mlp(dtype):
    rng = np.random.default_rng(0)
    x = fl.placeholder(dtype, [None, 6], name="x")
    y = fl.placeholder(dtype, [None, 3], name="y")
    w1 = fl.Variable(rng.normal(size=(6, 5)).astype(dtype.np), name="w1")
    b1 = fl.Variable(np.zeros(5, dtype.np), name="b1")
    w2 = fl.Variable(rng.normal(size=(5, 3)).astype(dtype.np), name="w2")
    h = fl.nn.relu(x @ w1 + b1)
    loss = fl.reduce_mean(fl.square(h @ w2 - y))
    step = fl.train.GradientDescentOptimizer(0.05).minimize(loss)
    feed = {x: rng.normal(size=(8, 6)).astype(dtype.np), y: rng.normal(size=(8, 3)).astype(dtype.np)}
    return x, (w1, b1, w2), loss, step, feed


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_sgd_on_weight_matrices_fuses_and_trains_like_the_unfused_program(graph, dtype):
    x, variables, loss, step, feed = _mlp(dtype)
    g = _optimized([step], [x, *[k for k in feed if k is not x]])
    fused = sorted(n.name for n in g if n.op == "_MatMulAssignSub")
    assert len(fused) == 2                                   # w1 and w2; b1's step is no matmul
    assert not [n for n in g if n.op == "AssignSubVariableOp"
                and "w" in n.inputs[0].node.name]
    init = fl.global_variables_initializer()
    runs = []
    for kind in ("fused", "unfused", "interpreter"):
        kwargs = {"options": UNFUSED} if kind == "unfused" else (
            {"backend": "interpreter"} if kind == "interpreter" else {})
        with fl.Session(**kwargs) as s:
            s.run(init)
            losses = [s.run([loss, step], feed)[0] for _ in range(4)]
            runs.append(losses + s.run(list(variables)))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype is fl.float32 else dict(rtol=1e-12, atol=1e-13)
    for a, b, c in zip(*runs):
        np.testing.assert_allclose(a, b, **tol)
        np.testing.assert_allclose(a, c, **tol)


def test_a_gradient_used_elsewhere_or_without_a_scalar_rate_does_not_fuse(graph):
    a = fl.placeholder(fl.float32, [4, 3], name="a")
    b = fl.placeholder(fl.float32, [4, 2], name="b")
    v = fl.Variable(np.zeros((3, 2), np.float32), name="v")
    u = fl.Variable(np.zeros((3, 2), np.float32), name="u")
    grad = fl.matmul(a, b, transpose_a=True, name="grad")
    shared = v.assign_sub(grad * 0.5, read_value=False)      # grad is fetched too: no fusion
    rates = fl.constant(np.full((3, 2), 0.5, np.float32))
    per_element = u.assign_sub(fl.matmul(a, b, transpose_a=True) * rates, read_value=False)
    step = make_step_graph(fl.get_default_graph(), [a.output, b.output], [grad.output],
                           [shared.node, per_element.node])
    optimize(step, PipelineOptions())
    assert not [n for n in step.graph if n.op == "_MatMulAssignSub"]


def test_control_edges_of_the_replaced_nodes_move_to_the_fused_update(graph):
    a = fl.placeholder(fl.float32, [4, 3], name="a")
    b = fl.placeholder(fl.float32, [4, 2], name="b")
    v = fl.Variable(np.ones((3, 2), np.float32), name="v")
    marker = fl.Variable(np.zeros((), np.float32), name="marker")
    first = marker.assign(1.0, read_value=False)
    with fl.control_dependencies([first]):
        grad = fl.matmul(a, b, transpose_a=True)
    update = v.assign_sub(grad * 2.0, read_value=False)
    with fl.control_dependencies([update]):
        after = v.read_value() + 0.0
    g = _optimized([], [a, b], [after])
    (fused,) = [n for n in g if n.op == "_MatMulAssignSub"]
    assert first.node.name in {c.name for c in fused.control_inputs}
    av = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    bv = np.arange(8, dtype=np.float32).reshape(4, 2) / 10
    with fl.Session() as s:
        s.run([v.initializer, marker.initializer])
        got = s.run(after, {a: av, b: bv})
        assert s.run(marker) == 1.0
    np.testing.assert_allclose(got, 1.0 - 2.0 * av.T @ bv, rtol=1e-6)


def test_a_wrong_shaped_variable_is_a_located_error(graph):
    a = fl.placeholder(fl.float32, [4, 3], name="a")
    b = fl.placeholder(fl.float32, [4, 2], name="b")
    v = fl.Variable(np.zeros((3, 2), np.float32), name="v", validate_shape=False)
    update = v.assign_sub(fl.matmul(a, b, transpose_a=True) * 0.1, read_value=False)
    with fl.Session() as s:
        s.run(v.assign(np.zeros((2, 2), np.float32), read_value=False))
        with pytest.raises(Exception, match="variable 'v' has dim 0 = 2; the update has 3"):
            s.run(update, {a: np.ones((4, 3), np.float32), b: np.ones((4, 2), np.float32)})
