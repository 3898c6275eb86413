"""The TensorArray ops (TensorArrayV3, Write, Read, Gather, Scatter, Grad, Size, Close) and
``fl.TensorArray``: the interpreter's arrays and the C arrays agree, in and out of loops, with
shapes known only at run time; every misuse TensorFlow refuses is an error naming the node in
both backends; gradients flow through them (and through the loops that write them)."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from runtime.errors import FlowcError
from oracle import check_against_interpreter


def _both(graph, fetch, feed=None):
    """Run ``fetch`` with the interpreter and with C; both must fail alike or agree."""
    out = []
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            out.append(s.run(fetch, feed or {}))
    return out


def test_a_loop_writes_one_element_per_iteration_and_stack_gives_them_in_order(graph, rng):
    x = fl.placeholder(fl.f32, [None, 3], name="x")          # the batch size: run time
    n = fl.placeholder(fl.i32, [], name="n")
    ta = fl.TensorArray(fl.f32, size=0, dynamic_size=True)

    def body(i, ta):
        return i + 1, ta.write(i, x * fl.cast(i + 1, fl.f32))

    count, ta = fl.while_loop(lambda i, ta: i < n, body, [0, ta])
    stacked = ta.stack()
    assert stacked.shape == (None, None, 3)
    size = ta.size()
    xv = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    for nv in (1, 4):
        got = check_against_interpreter(graph, {"stacked": stacked, "size": size},
                                        {x: xv, n: np.int32(nv)})
        want = np.stack([xv * (i + 1) for i in range(nv)])
        np.testing.assert_allclose(got["stacked"], want, rtol=1e-6)
        assert got["size"] == nv


def test_zero_iterations_stack_to_an_empty_tensor_when_the_element_shape_is_known(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    x = fl.placeholder(fl.f32, [2, 3], name="x")
    ta = fl.TensorArray(fl.f32, size=0, dynamic_size=True, element_shape=[2, 3])
    _, ta = fl.while_loop(lambda i, ta: i < n, lambda i, ta: (i + 1, ta.write(i, x)), [0, ta])
    got = check_against_interpreter(graph, {"s": ta.stack()},
                                    {n: np.int32(0), x: np.ones((2, 3), np.float32)})
    assert got["s"].shape == (0, 2, 3) and got["s"].dtype == np.float32


def test_zero_elements_of_an_unknown_shape_cannot_be_stacked(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    x = fl.placeholder(fl.f32, [None], name="x")
    ta = fl.TensorArray(fl.f32, size=0, dynamic_size=True)
    _, ta = fl.while_loop(lambda i, ta: i < n, lambda i, ta: (i + 1, ta.write(i, x)), [0, ta])
    stacked = ta.stack(name="stack_empty")
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            with pytest.raises(FlowcError, match="size zero, but element shape .* is not fully "
                                                 "defined"):
                s.run(stacked, {n: 0, x: [1.0, 2.0]})
            assert s.run(stacked, {n: 2, x: [1.0, 2.0]}).shape == (2, 2)


def test_unstack_then_read_each_element_in_a_loop_in_reverse(graph, rng):
    """dynamic_rnn's pattern: the inputs unstacked into an array before the loop, one read
    per iteration (here last to first), the outputs written into another."""
    xs = fl.placeholder(fl.f32, [None, 4], name="xs")
    steps = fl.shape(xs)[0]
    inputs = fl.TensorArray(fl.f32, size=steps).unstack(xs)
    outputs = fl.TensorArray(fl.f32, size=steps)

    def body(t, acc, out):
        v = inputs.read(steps - 1 - t)
        acc = acc + v
        return t + 1, acc, out.write(t, acc * 2.0)

    _, acc, out = fl.while_loop(lambda t, a, o: t < steps, body,
                                [0, fl.zeros([4], fl.f32), outputs])
    ys = out.stack()
    assert ys.shape == (None, 4)
    xv = rng.uniform(-1, 1, (5, 4)).astype(np.float32)
    got = check_against_interpreter(graph, {"ys": ys, "acc": acc}, {xs: xv})
    want = np.cumsum(xv[::-1], axis=0) * 2.0
    np.testing.assert_allclose(got["ys"], want, rtol=1e-5)
    np.testing.assert_allclose(got["acc"], xv.sum(0), rtol=1e-5)


def test_scatter_gather_and_unwritten_elements_read_as_zeros(graph):
    v = fl.placeholder(fl.i64, [2, 3], name="v")
    ta = fl.TensorArray(fl.int64, size=5, element_shape=[3], clear_after_read=False)
    ta = ta.scatter([3, 0], v)
    picked = ta.gather([0, 1, 3])           # element 1 was never written: zeros
    one = ta.read(3)
    again = ta.read(3)                      # clear_after_read=False: read as often as wanted
    vv = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    got = check_against_interpreter(graph, {"picked": picked, "one": one, "again": again},
                                    {v: vv})
    np.testing.assert_array_equal(got["picked"], [[4, 5, 6], [0, 0, 0], [1, 2, 3]])
    np.testing.assert_array_equal(got["one"], [1, 2, 3])
    np.testing.assert_array_equal(got["again"], [1, 2, 3])


def test_an_array_made_in_each_iteration_of_an_outer_loop(graph, rng):
    """A fresh TensorArray per outer iteration (an inner loop's scan outputs): each is
    released at the end of its iteration, and the outer loop writes the inner stacks."""
    x = fl.placeholder(fl.f32, [None], name="x")
    n = fl.placeholder(fl.i32, [], name="n")
    outer = fl.TensorArray(fl.f32, size=n)

    def outer_body(i, ta):
        inner = fl.TensorArray(fl.f32, size=0, dynamic_size=True)
        _, inner = fl.while_loop(lambda j, t: j < 3,
                                 lambda j, t: (j + 1, t.write(j, x * fl.cast(i * 3 + j, fl.f32))),
                                 [0, inner])
        return i + 1, ta.write(i, inner.stack())

    _, outer = fl.while_loop(lambda i, ta: i < n, outer_body, [0, outer])
    stacked = outer.stack()
    xv = rng.uniform(-1, 1, (4,)).astype(np.float32)
    got = check_against_interpreter(graph, {"s": stacked}, {x: xv, n: np.int32(3)})
    want = np.array([[xv * (i * 3 + j) for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(got["s"], want, rtol=1e-6)


def test_misuse_is_an_error_naming_the_node_in_both_backends(graph):
    x = fl.placeholder(fl.f32, [2], name="x")
    y = fl.placeholder(fl.f32, [None], name="y")
    fixed = fl.TensorArray(fl.f32, size=2, infer_shape=False, element_shape=[None])
    past_end = fixed.write(2, x, name="write_past_end").stack()
    twice = fixed.write(0, x).write(0, x, name="write_twice").stack()
    once = fixed.write(0, x).write(1, x)
    read_twice = once.read(0) + once.read(0, name="read_again")
    ragged = fixed.write(0, x).write(1, y).stack(name="ragged_stack")
    unwritten = fl.TensorArray(fl.f32, size=2, infer_shape=False,
                               element_shape=[None]).gather([1], name="unwritten")
    closed = fl.TensorArray(fl.f32, size=2)
    with fl.control_dependencies([closed.close()]):
        after_close = closed.size(name="size_after_close")
    feed = {x: [1.0, 2.0], y: [1.0, 2.0, 3.0]}
    cases = [(past_end, "write_past_end.*index 2 but array is not resizeable and size is: 2"),
             (twice, "write_twice.*already been written to"),
             (read_twice, "read_again.*cleared after a previous read"),
             (ragged, "inconsistent shapes. Index 0 has shape: \\[2\\] but index 1 has shape: "
                      "\\[3\\]"),
             (unwritten, "unwritten.*has not been written to"),
             (after_close, "size_after_close.*closed")]
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            for fetch, pattern in cases:
                with pytest.raises(FlowcError, match=pattern):
                    s.run(fetch, feed)


def test_hostile_indices_fail_with_the_interpreters_error(graph):
    """Indices fed at run time: negative or past the end, for reads, gathers and scatters,
    and a scatter whose rows do not match its indices. Each step makes its own arrays, so the
    next step (elements not scattered read as zeros) sees nothing of a failed one."""
    idx = fl.placeholder(fl.i32, [], name="idx")
    many = fl.placeholder(fl.i32, [None], name="many")
    rows = fl.placeholder(fl.f32, [None, 2], name="rows")
    base = fl.TensorArray(fl.f32, size=3, element_shape=[2], clear_after_read=False)
    full = base.scatter([0, 1, 2], fl.ones([3, 2], fl.f32))
    read = full.read(idx, name="read_at")
    gathered = full.gather(many, name="gather_at")
    scattered = base.scatter(many, rows, name="scatter_at").gather([0, 1, 2])
    cases = [(read, {idx: -1}, "read_at.*index -1 but array size is: 3"),
             (read, {idx: 3}, "read_at.*index 3 but array size is: 3"),
             (gathered, {many: [0, 7]}, "gather_at.*index 7 but array size is: 3"),
             (scattered, {many: [0, 5], rows: np.ones((2, 2), np.float32)},
              "scatter_at.*index 5 but array is not resizeable and size is: 3"),
             (scattered, {many: [0, 1], rows: np.ones((3, 2), np.float32)},
              "scatter_at.*(len\\(indices\\) == values.shape\\[0\\]|2 vs. 3|2 != 3)")]
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            for fetch, feed, pattern in cases:
                with pytest.raises(FlowcError, match=pattern):
                    s.run(fetch, feed)
            np.testing.assert_array_equal(s.run(read, {idx: 2}), [1.0, 1.0])
            got = s.run(scattered, {many: [2, 0], rows: np.array([[1, 2], [3, 4]], np.float32)})
            np.testing.assert_array_equal(got, [[3, 4], [0, 0], [1, 2]])


def _numeric_grad(f, x, eps=1e-3):
    out = np.zeros(x.shape, np.float64)
    for i in np.ndindex(*x.shape):
        d = np.zeros(x.shape, np.float64)
        d[i] = eps
        out[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return out


def test_gradients_flow_through_writes_and_stack(graph, rng):
    """TensorFlow's rule: the gradient of a stack is scattered into the gradient array and
    each write's value reads its element back; the gradients of two reads of one element (and
    of the stack) add up in that element."""
    x = fl.placeholder(fl.f32, [2, 3], name="x")
    ta = fl.TensorArray(fl.f32, size=2, clear_after_read=False).write(0, x * 3.0)
    ta = ta.write(1, x * x)
    both = ta.read(1) * ta.read(1)                     # element 1 read twice
    loss = fl.reduce_sum(ta.stack() ** 2) + fl.reduce_sum(both)
    (gx,) = fl.gradients(loss, [x])
    xv = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    got = check_against_interpreter(graph, {"gx": gx}, {x: xv})
    want = 2 * (3 * xv) * 3 + 2 * (xv * xv) * 2 * xv + 4 * xv ** 3
    np.testing.assert_allclose(got["gx"], want, rtol=1e-5)


def test_gradients_of_a_recurrence_over_unstacked_inputs(graph, rng):
    """dynamic_rnn's pattern (inputs unstacked, one read and one write per iteration, the
    outputs stacked) differentiated through the while loop, against finite differences."""
    xs = fl.placeholder(fl.f32, [5, 4], name="xs")
    w = fl.placeholder(fl.f32, [4, 4], name="w")
    steps = fl.shape(xs)[0]
    inputs = fl.TensorArray(fl.f32, size=steps).unstack(xs)
    outputs = fl.TensorArray(fl.f32, size=steps)

    def body(t, h, out):
        h = fl.tanh(fl.matmul(fl.reshape(inputs.read(t) + h, [1, 4]), w)[0])
        return t + 1, h, out.write(t, h)

    _, h, out = fl.while_loop(lambda t, h, o: t < steps, body,
                              [0, fl.zeros([4], fl.f32), outputs])
    loss = fl.reduce_sum(out.stack() ** 2) + fl.reduce_sum(h)
    gxs, gw = fl.gradients(loss, [xs, w])
    xv = rng.uniform(-1, 1, (5, 4)).astype(np.float32)
    wv = rng.uniform(-1, 1, (4, 4)).astype(np.float32)
    got = check_against_interpreter(graph, {"gxs": gxs, "gw": gw}, {xs: xv, w: wv})

    def f(xv, wv):
        h, total = np.zeros(4), 0.0
        for t in range(5):
            h = np.tanh((xv[t] + h) @ wv)
            total += (h * h).sum()
        return total + h.sum()
    np.testing.assert_allclose(got["gxs"], _numeric_grad(lambda v: f(v, wv), xv.astype(np.float64)),
                               atol=2e-4)
    np.testing.assert_allclose(got["gw"], _numeric_grad(lambda v: f(xv, v), wv.astype(np.float64)),
                               atol=2e-4)


def test_shapes_come_from_the_array_and_writes_are_checked_when_built(graph):
    x = fl.placeholder(fl.f32, [None, 4], name="x")
    ta = fl.TensorArray(fl.f32, size=3)
    assert ta.element_shape is None
    ta = ta.write(0, x)                     # infer_shape: the array learns [?, 4]
    assert ta.element_shape == (None, 4)
    assert ta.read(0).shape == (None, 4)
    assert ta.stack().shape == (None, None, 4)
    with pytest.raises(ShapeError, match=r"\[2,5\] is incompatible with the TensorArray's "
                                         r"element shape \[\?,4\]"):
        ta.write(1, fl.zeros([2, 5], fl.f32))
    with pytest.raises(ShapeError, match="dtype is f32 but the op is trying to write dtype i32"):
        fl.raw_ops.TensorArrayWriteV3(handle=ta.handle, index=1, value=fl.constant([1, 2]),
                                      flow_in=ta.flow)
    for name in ("TensorArrayV3", "TensorArrayWriteV3", "TensorArrayReadV3",
                 "TensorArrayGatherV3", "TensorArrayScatterV3", "TensorArraySizeV3",
                 "TensorArrayCloseV3"):
        from compiler.ops import get_op
        assert get_op(name).stateful, name
