"""A while_loop gradient sums each weight's gradient in a loop variable; fuse-updates makes that
``acc + MatMul(a, b)`` one gemm into the variable's buffer (``_MatMulAccumulate``). The
gradients equal the interpreter's (the oracle) and the unfused program's, for f32 and f64,
transposed or not, odd sizes and zero iterations; an accumulator that something else reads
is not written in place."""
import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from compiler.passes.memory_plan import in_place_copies
from compiler.step import make_step_graph, optimize
from runtime.errors import RuntimeExecutionError

UNFUSED = PipelineOptions(disable=("fuse-updates", "fuse-accumulate", "fuse-conv",
                                   "fuse-matmul-bias"))


def _optimized(fetches, feeds):
    step = make_step_graph(fl.get_default_graph(), [f.output for f in feeds],
                           [f.output for f in fetches], [])
    optimize(step, PipelineOptions())
    return step.graph


def _recurrence(dtype, batch, width, rng, transpose):
    """h_{t+1} = tanh(h_t @ w (or w^T) + x_t): the gradient of w sums one product a step."""
    steps = fl.placeholder(fl.int32, [], name="steps")
    xs = fl.placeholder(dtype, [None, batch, width], name="xs")
    w0 = rng.uniform(-0.5, 0.5, (width, width)).astype(dtype.np)
    w = fl.Variable(w0, name="w")

    def body(t, h):
        return t + 1, fl.tanh(fl.matmul(h, w, transpose_b=transpose) + fl.gather(xs, t))
    _, h = fl.while_loop(lambda t, h: t < steps, body,
                         [0, fl.ones([batch, width], dtype)])
    loss = fl.reduce_sum(h * h)
    return steps, xs, w, loss


@pytest.mark.parametrize("dtype,transpose", [(fl.float32, False), (fl.float32, True),
                                             (fl.float64, False)])
def test_loop_weight_gradients_accumulate_in_place_and_match(graph, rng, dtype, transpose):
    steps, xs, w, loss = _recurrence(dtype, 5, 7, rng, transpose)
    (grad,) = fl.gradients(loss, [w])
    g = _optimized([grad, loss], [steps, xs])
    # the weight gradient's sum in the backward loop's variable (its Identity), and the forward
    # step's gather(xs, t) + h @ w, a gemm into the gathered row (fuse-matmul-bias)
    started = sorted(n.inputs[0].node.op for n in g if n.op == "_MatMulAccumulate")
    assert started == ["GatherV2", "Identity"]
    assert not in_place_copies(list(g), {})
    init = fl.global_variables_initializer()
    tol = dict(rtol=2e-5, atol=1e-5) if dtype is fl.float32 else dict(rtol=1e-11, atol=1e-12)
    for n in (4, 1, 0):
        feed = {steps: np.int32(n), xs: rng.standard_normal((max(n, 1), 5, 7)).astype(dtype.np)}
        results = []
        for kwargs in ({}, {"options": UNFUSED}, {"backend": "interpreter"}):
            with fl.Session(**kwargs) as s:
                s.run(init)
                results.append(s.run([grad, loss], feed))
        for got in results[:2]:
            for a, b in zip(got, results[2]):
                np.testing.assert_allclose(a, b, **tol)
        if n == 0:
            assert not np.any(results[0][0])


def test_an_accumulator_read_elsewhere_is_not_written_in_place(graph, rng):
    a = fl.placeholder(fl.float32, [3, 4], name="a")
    b = fl.placeholder(fl.float32, [4, 2], name="b")

    def body(t, acc, seen):
        new = acc + fl.matmul(a * fl.cast(t, fl.float32), b)
        return t + 1, new, seen + fl.reduce_sum(acc)       # acc is read twice
    _, acc, seen = fl.while_loop(lambda t, acc, seen: t < 3, body,
                                 [0, fl.zeros([3, 2]), fl.constant(0.0)])
    g = _optimized([acc, seen], [a, b])
    # fuse-accumulate leaves it; fuse-matmul-bias starts the gemm from acc, into a copy of it
    fused = [n for n in g if n.op == "_MatMulAccumulate"]
    assert fused and set(fused) <= in_place_copies(list(g), {})
    av = rng.standard_normal((3, 4)).astype(np.float32)
    bv = rng.standard_normal((4, 2)).astype(np.float32)
    with fl.Session() as s:
        got_acc, got_seen = s.run([acc, seen], {a: av, b: bv})
    np.testing.assert_allclose(got_acc, 3 * av @ bv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_seen, np.sum(av @ bv), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_gather_gradients_in_a_loop_add_their_rows_in_place_and_match(graph, rng, dtype):
    """The gradient of gather(xs, t) (and of a gather with repeated ids) w.r.t. the loop
    invariant xs adds the iteration's rows into the accumulator."""
    steps = fl.placeholder(fl.int32, [], name="steps")
    xs = fl.placeholder(dtype, [6, 3, 5], name="xs")

    def body(t, h):
        rows = fl.gather(xs, fl.stack([t, 0, t]))                       # t twice, and row 0
        return t + 1, fl.tanh(h * fl.gather(xs, t) + fl.reduce_sum(rows, axis=0))
    _, h = fl.while_loop(lambda t, h: t < steps, body, [0, fl.ones([3, 5], dtype)])
    loss = fl.reduce_sum(h * h)
    (grad,) = fl.gradients(loss, [xs])
    g = _optimized([grad], [steps, xs])
    # the two gathers' gradients are one segment sum with ids [t, t, 0, t]: t has three rows
    assert [n.op for n in g if n.op.endswith("Accumulate")] == ["_SegmentSumAccumulate"]
    tol = dict(rtol=2e-5, atol=1e-5) if dtype is fl.float32 else dict(rtol=1e-11, atol=1e-12)
    xv = rng.standard_normal((6, 3, 5)).astype(dtype.np) * 0.5
    for n in (6, 2, 0):
        results = []
        for kwargs in ({}, {"options": UNFUSED}, {"backend": "interpreter"}):
            with fl.Session(**kwargs) as s:
                results.append(s.run(grad, {steps: np.int32(n), xs: xv}))
        np.testing.assert_allclose(results[0], results[2], **tol)
        np.testing.assert_allclose(results[1], results[2], **tol)


def test_a_segment_id_out_of_range_in_a_fused_loop_is_an_error(graph):
    ids = fl.placeholder(fl.int32, [2], name="ids")
    data = fl.placeholder(fl.float32, [2, 3], name="data")

    def body(t, acc):
        return t + 1, acc + fl.unsorted_segment_sum(data, ids, 4)
    _, acc = fl.while_loop(lambda t, acc: t < 2, body, [0, fl.zeros([4, 3])])
    assert [n.op for n in _optimized([acc], [ids, data]) if n.op.endswith("Accumulate")] == \
        ["_SegmentSumAccumulate"]
    dv = np.arange(6, dtype=np.float32).reshape(2, 3)
    with fl.Session() as s:
        np.testing.assert_array_equal(s.run(acc, {ids: [1, -1], data: dv}),
                                      [[0] * 3, 2 * dv[0], [0] * 3, [0] * 3])
        with pytest.raises(RuntimeExecutionError, match=r"segment_ids\[1\] = 4 is out of range"):
            s.run(acc, {ids: [1, 4], data: dv})
