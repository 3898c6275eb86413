"""StackV2/StackPushV2/StackPopV2/StackCloseV2: the interpreter's stack and the C stack
(one growable buffer) agree; elements pop in reverse order and may differ in shape; popping
an empty stack and pushing onto a full one are errors naming the node."""
import numpy as np
import pytest

import dsl as fl
from runtime.errors import FlowcError
from oracle import check_against_interpreter


def _push_then_pop(x, n, make_elem, elem_shape, max_size=-1):
    """Push make_elem(i) for i < n in one loop, pop them all in a second loop; returns the
    pops combined in an order-sensitive way (acc * 10 + pop) and the push count."""
    h = fl.raw_ops.StackV2(max_size=max_size, elem_type=fl.f32)

    def push(i):
        p = fl.raw_ops.StackPushV2(handle=h, elem=make_elem(i))
        with fl.control_dependencies([p]):
            return i + 1

    (pushed,) = fl.while_loop(lambda i: i < n, push, [0])

    def pop(j, acc):
        with fl.control_dependencies([j]):
            v = fl.raw_ops.StackPopV2(handle=h, elem_type=fl.f32, elem_shape=elem_shape)
        with fl.control_dependencies([v]):
            nj = j + 1
        return nj, acc * 10.0 + fl.reduce_sum(v)

    _, acc = fl.while_loop(lambda j, a: j < pushed, pop, [0, fl.constant(0.0)])
    return acc, pushed


def test_stack_pops_in_reverse_order_with_run_time_shapes_in_both_backends(graph, rng):
    x = fl.placeholder(fl.f32, [None, 3], name="x")        # the batch size is known at run time
    n = fl.placeholder(fl.i32, [], name="n")
    same, count = _push_then_pop(x, n, lambda i: x * fl.cast(i + 1, fl.f32), [None, 3])
    # elements of different shapes: i + 1 copies of i
    ragged, _ = _push_then_pop(x, n, lambda i: fl.fill(fl.reshape(i + 1, [1]),
                                                         fl.cast(i, fl.f32)), [None])
    xv = rng.integers(0, 3, size=(2, 3)).astype(np.float32)
    for nv in (0, 1, 4):
        got = check_against_interpreter(graph, {"same": same, "ragged": ragged, "count": count},
                                        {x: xv, n: np.int32(nv)})
        want_same = np.float32(0)
        want_ragged = np.float32(0)
        for i in reversed(range(nv)):
            want_same = want_same * 10 + xv.sum() * (i + 1)
            want_ragged = want_ragged * 10 + i * (i + 1)
        np.testing.assert_allclose(got["same"], want_same, rtol=1e-6)
        np.testing.assert_allclose(got["ragged"], want_ragged, rtol=1e-6)
        assert got["count"] == nv


def test_stack_errors_name_the_node_in_both_backends(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    h = fl.raw_ops.StackV2(max_size=-1, elem_type=fl.f32)
    empty = fl.raw_ops.StackPopV2(handle=h, elem_type=fl.f32, elem_shape=[2], name="pop_empty")
    x = fl.placeholder(fl.f32, [2], name="x")
    full, _ = _push_then_pop(x, n, lambda i: x, [2], max_size=2)
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError, match="pop_empty.*empty|empty.*pop_empty"):
                s.run(empty)
            assert s.run(full, {x: [1.0, 2.0], n: 2}) == pytest.approx(33.0)
            with pytest.raises(FlowcError, match="full"):
                s.run(full, {x: [1.0, 2.0], n: 3})


def test_stack_ops_are_stateful_and_not_differentiable(graph):
    from compiler.ops import get_op
    for name in ("StackV2", "StackPushV2", "StackPopV2", "StackCloseV2"):
        assert get_op(name).stateful, name
    h = fl.raw_ops.StackV2(max_size=-1, elem_type=fl.f32)
    x = fl.placeholder(fl.f32, [2], name="x")
    p = fl.raw_ops.StackPushV2(handle=h, elem=x)
    assert p.shape == (2,) and p.dtype is fl.f32
    v = fl.raw_ops.StackPopV2(handle=h, elem_type=fl.f32, elem_shape=[None, 4])
    assert v.shape == (None, 4)
    assert fl.gradients(fl.reduce_sum(p), [x])[0] is None
