"""``_MatMulAccumulate`` and ``_SegmentSumAccumulate`` add into their accumulator's buffer. A
graph written with raw ops may hand them one that is not theirs to write: a constant (read-only
memory), a feed (the caller's array) or a value another node reads too. The kernel then adds
into a copy: the constant, the feed and the other reader see the values they had, and the sum
equals the interpreter's. An accumulator that only the op reads is still written in place."""
import numpy as np

import dsl as fl
from oracle import NO_FOLDING, check_against_interpreter


def _matmul_operands(rng):
    a = fl.constant(rng.standard_normal((3, 2)).astype(np.float32))
    b = fl.constant(rng.standard_normal((2, 4)).astype(np.float32))
    return a, b


def test_a_constant_accumulator_is_copied_not_written(graph, rng):
    a, b = _matmul_operands(rng)
    start = rng.standard_normal((3, 4)).astype(np.float32)
    acc = fl.constant(start)
    summed = fl.raw_ops._MatMulAccumulate(acc=acc, a=a, b=b)
    segments = fl.raw_ops._SegmentSumAccumulate(
        acc=acc, data=fl.constant(np.ones((2, 4), np.float32)),
        segment_ids=fl.constant(np.array([0, 2], np.int32)))
    got = check_against_interpreter(graph, {"sum": summed, "segments": segments, "acc": acc},
                                    rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["acc"], start)


def test_a_fed_accumulator_leaves_the_callers_array_alone(graph, rng):
    a, b = _matmul_operands(rng)
    acc = fl.placeholder(fl.float32, [3, 4], name="acc")
    summed = fl.raw_ops._MatMulAccumulate(acc=acc, a=a, b=b)
    fed = rng.standard_normal((3, 4)).astype(np.float32)
    before = fed.copy()
    with fl.Session(graph=graph, options=NO_FOLDING) as s:
        got = s.run(summed, {acc: fed})
    with fl.Session(graph=graph, backend="interpreter") as s:
        want = s.run(summed, {acc: fed})
    np.testing.assert_array_equal(fed, before)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_accumulator_another_node_reads_is_copied(graph, rng):
    a, b = _matmul_operands(rng)
    x = fl.placeholder(fl.float32, [3, 4], name="x")
    acc = x * 2.0                                     # an op's result, read twice
    summed = fl.raw_ops._MatMulAccumulate(acc=acc, a=a, b=b)
    other = fl.reshape(acc, [12]) + 1.0               # through a view, after the accumulation
    feed = {x: rng.standard_normal((3, 4)).astype(np.float32)}
    check_against_interpreter(graph, {"sum": summed, "other": other}, feed, rtol=1e-5, atol=1e-6)


def test_an_accumulator_only_the_op_reads_is_written_in_place(graph, rng):
    from compiler.passes.memory_plan import in_place_copies
    from compiler.step import make_step_graph, optimize

    a, b = _matmul_operands(rng)
    x = fl.placeholder(fl.float32, [3, 4], name="x")
    summed = fl.raw_ops._MatMulAccumulate(acc=x * 2.0, a=a, b=b)
    step = make_step_graph(graph, [x.output], [summed.output], [])
    optimize(step, NO_FOLDING)
    order = list(step.graph)
    root = {o: o for n in order for o in n.outputs}
    assert not in_place_copies(order, root)
    check_against_interpreter(graph, {"sum": summed},
                              {x: rng.standard_normal((3, 4)).astype(np.float32)},
                              rtol=1e-5, atol=1e-6)
