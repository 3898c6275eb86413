"""Dynamic control flow: Switch/Merge/Enter/Exit/NextIteration/LoopCond, fl.cond,
fl.while_loop and fl.case — interpreter semantics (dead values, frames), compiled C against
the interpreter, and gradients through cond."""
import re

import numpy as np
import pytest

import dsl as fl
from compiler.passes.place import PlacementError
from compiler.codegen.emitter import emit_c
from compiler.errors import CodegenError, ExecutionError, OpError
from compiler.ops import get_op
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter

CF_OPS = ("Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond")


def _run(g, fetches, feeds=None, backend="interpreter"):
    with fl.Session(graph=g, backend=backend) as s:
        return s.run(fetches, feeds or {})


def _c_source(g, fetches, feeds=()):
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step)
    return emit_c(step.graph, step.feeds, step.retvals).source


# --- ops ---------------------------------------------------------------------------------------
def test_control_flow_ops_are_registered_with_shapes(graph):
    for name in CF_OPS:
        assert get_op(name).is_control_flow, name
    x = fl.placeholder(fl.f32, [2, None])
    p = fl.placeholder(fl.bool_, [])
    f, t = fl.raw_ops.Switch(data=x, pred=p)
    assert f.shape == (2, None) and t.shape == (2, None) and t.dtype is fl.f32
    m, vi = fl.raw_ops.Merge(inputs=[f, fl.placeholder(fl.f32, [2, 3])])
    assert m.shape == (2, None) and vi.dtype is fl.i32 and vi.shape == ()
    e = fl.raw_ops.Enter(data=x, frame_name="loop", is_constant=True)
    assert e.op.node.attrs["parallel_iterations"] == 10 and e.shape == (2, None)
    with pytest.raises(fl.FlowcError, match="scalar"):
        fl.raw_ops.Switch(data=x, pred=fl.placeholder(fl.bool_, [2]))


def test_switch_sends_a_dead_value_down_the_untaken_output(graph):
    x = fl.placeholder(fl.f32, [2], name="x")
    p = fl.placeholder(fl.bool_, [], name="p")
    f, t = fl.raw_ops.Switch(data=x, pred=p, name="sw")
    doubled = fl.multiply(t, 2.0, name="doubled")       # dead when p is false
    m, vi = fl.raw_ops.Merge(inputs=[f, doubled])
    xv = np.array([1.0, -2.0], np.float32)
    got = _run(graph, [m, vi, doubled], {x: xv, p: True})
    np.testing.assert_array_equal(got[0], xv * 2)
    assert got[1] == 1
    got = _run(graph, [m, vi], {x: xv, p: False})
    np.testing.assert_array_equal(got[0], xv)
    assert got[1] == 0
    with pytest.raises(ExecutionError, match="'doubled:0' is dead"):
        _run(graph, doubled, {x: xv, p: False})
    with pytest.raises(ExecutionError, match="'sw:1' is dead"):
        _run(graph, t, {x: xv, p: False})
    for pv in (True, False):
        check_against_interpreter(graph, {"m": m, "vi": vi}, {x: xv, p: pv})


# --- cond --------------------------------------------------------------------------------------
def test_cond_with_a_data_dependent_predicate_compiled_equals_interpreter(graph, rng):
    x = fl.placeholder(fl.f32, [4], name="x")
    w = fl.constant(rng.normal(size=4).astype(np.float32))
    pred = fl.reduce_sum(x) > 0.0
    y = fl.cond(pred, lambda: fl.tanh(x * w) + 1.0, lambda: fl.square(x) - w)
    k = fl.cond(pred, lambda: fl.constant(7), lambda: fl.constant(-7))       # constants only
    pair = fl.cond(x[0] > x[1], lambda: (x[0], [x * 2.0]), lambda: (x[1], [x * 3.0]))
    for sign in (1.0, -1.0):
        xv = (np.abs(rng.normal(size=4)) * sign).astype(np.float32)
        got = check_against_interpreter(graph, {"y": y, "k": k, "p0": pair[0], "p1": pair[1][0]},
                                        {x: xv})
        assert got["k"] == (7 if sign > 0 else -7)


def test_nested_conds_and_case(graph):
    a = fl.placeholder(fl.i32, [], name="a")
    x = fl.placeholder(fl.f32, [3], name="x")
    nested = fl.cond(a > 0, lambda: fl.cond(a > 5, lambda: x * 100.0, lambda: x * 10.0),
                     lambda: -x)
    branch = fl.case([(fl.equal(a, 1), lambda: x + 1.0), (fl.equal(a, 2), lambda: x + 2.0)],
                     default=lambda: x * 0.0)
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    for av, want_n, want_c in [(7, 100, 0), (1, 10, "+1"), (2, 10, "+2"), (-3, -1, 0)]:
        got = check_against_interpreter(graph, {"nested": nested, "case": branch}, {a: av, x: xv})
        np.testing.assert_allclose(got["nested"], xv * want_n)
        np.testing.assert_allclose(got["case"], xv + 1 if want_c == "+1" else
                                   xv + 2 if want_c == "+2" else xv * 0)


def test_ops_created_outside_a_branch_run_regardless(graph):
    """TensorFlow 1.x's rule: only ops created inside true_fn/false_fn belong to the branch."""
    p = fl.placeholder(fl.bool_, [], name="p")
    outside = fl.Variable(0.0, name="outside")
    inside = fl.Variable(0.0, name="inside")
    bump_outside = outside.assign_add(1.0)

    def true_fn():
        return bump_outside + 0.0

    def false_fn():
        return inside.assign_add(1.0) + 0.0

    y = fl.cond(p, true_fn, false_fn)
    init = fl.global_variables_initializer()
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(init)
            s.run(y, {p: False})
            s.run(y, {p: False})
            s.run(y, {p: True})
            # bump_outside ran in every step; the inside assign only when its branch ran
            assert s.run([outside.read_value() if hasattr(outside, "read_value") else outside,
                          inside]) == [3.0, 2.0], backend


def test_cond_branch_structures_must_match(graph):
    p = fl.placeholder(fl.bool_, [])
    with pytest.raises(OpError, match="different structures"):
        fl.cond(p, lambda: (fl.constant(1.0), fl.constant(2.0)), lambda: fl.constant(1.0))
    with pytest.raises(OpError, match="f32.*i32|i32.*f32"):
        fl.cond(p, lambda: fl.constant(1), lambda: fl.constant(1.0))
    with pytest.raises(OpError, match="scalar bool"):
        fl.cond(fl.constant([True, False]), lambda: 1.0, lambda: 2.0)


def test_fetching_a_dead_tensor_is_an_error_naming_it_in_c(graph):
    x = fl.placeholder(fl.f32, [2], name="x")
    p = fl.placeholder(fl.bool_, [], name="p")
    _, t = fl.raw_ops.Switch(data=x, pred=p, name="gate")
    y = fl.multiply(t, 3.0, name="tripled")
    with fl.Session(graph=graph, backend="c") as s:
        np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0], p: True}), [3.0, 6.0])
        with pytest.raises(fl.FlowcError, match="tripled.*dead"):
            s.run(y, {x: [1.0, 2.0], p: False})


# --- while_loop ----------------------------------------------------------------------------------
def test_while_loop_fixed_and_data_dependent_trip_counts(graph, rng):
    n = fl.placeholder(fl.i32, [], name="n")
    x = fl.placeholder(fl.f32, [3, 2], name="x")
    w = fl.constant(rng.normal(size=(2, 2)).astype(np.float32) * 0.5)
    # fixed trip count, loop-invariant external tensor (w) and a big-ish carried matrix
    _, fixed = fl.while_loop(lambda i, h: i < 5, lambda i, h: (i + 1, fl.tanh(fl.matmul(h, w))),
                             [0, x])
    # data-dependent: count from the feed, and a condition on the carried value
    count, acc = fl.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 2.0 + 1.0),
                               [fl.constant(0), x])
    steps, halved = fl.while_loop(lambda i, v: v > 1.0, lambda i, v: (i + 1, v / 2.0),
                                  [0, fl.reduce_sum(fl.abs(x)) * 10.0])
    big = fl.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v + fl.cast(i, fl.f32)),
                        [0, fl.zeros([1000])])[1]
    xv = rng.normal(size=(3, 2)).astype(np.float32)
    for nv in (0, 1, 7):                      # 0: the loop body never runs
        got = check_against_interpreter(graph, {"fixed": fixed, "count": count, "acc": acc,
                                                "steps": steps, "halved": halved, "big": big},
                                        {n: nv, x: xv})
        assert got["count"] == nv
        np.testing.assert_allclose(got["acc"], xv * 2 ** nv + (2 ** nv - 1), rtol=1e-5)
        np.testing.assert_allclose(got["big"], np.full(1000, nv * (nv - 1) / 2))


def test_nested_loops_loop_in_cond_and_cond_in_loop(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    p = fl.placeholder(fl.bool_, [], name="p")
    x = fl.placeholder(fl.f32, [2], name="x")

    def outer(i, s):
        _, s2 = fl.while_loop(lambda j, t: j < i, lambda j, t: (j + 1, t + x), [0, s])
        return i + 1, s2

    _, tri = fl.while_loop(lambda i, s: i < n, outer, [0, fl.zeros([2])])
    _, alt = fl.while_loop(
        lambda i, s: i < n,
        lambda i, s: (i + 1, fl.cond(fl.equal(i % 2, 0), lambda: s + x, lambda: s * 2.0)),
        [0, x])
    loop_in_cond = fl.cond(
        p, lambda: fl.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * x), [0, x])[1],
        lambda: x - 1.0)
    xv = np.array([1.5, -0.5], np.float32)
    for pv in (True, False):
        for nv in (0, 1, 4):
            got = check_against_interpreter(graph, {"tri": tri, "alt": alt, "lic": loop_in_cond},
                                            {n: nv, p: pv, x: xv})
            np.testing.assert_allclose(got["tri"], xv * nv * (nv - 1) / 2, rtol=1e-6)
            want = xv ** (nv + 1) if pv else xv - 1
            np.testing.assert_allclose(got["lic"], want, rtol=1e-6)


def test_maximum_iterations_stops_the_loop(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    forever = fl.while_loop(lambda i: i >= 0, lambda i: i + 2, [n], maximum_iterations=5)[0]
    short = fl.while_loop(lambda i: i < 3, lambda i: i + 1, [n], maximum_iterations=n + 10)[0]
    for nv in (0, 1, 4):
        got = check_against_interpreter(graph, {"forever": forever, "short": short}, {n: nv})
        assert got["forever"] == nv + 10 and got["short"] == max(nv, 3)


def test_stateful_ops_in_a_loop_run_once_per_iteration(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    v = fl.Variable(0.0, name="counter")

    def body(i, s):
        with fl.control_dependencies([v.assign_add(1.0)]):
            return i + 1, s + 1.0

    _, s = fl.while_loop(lambda i, s: i < n, body, [0, fl.constant(0.0)])
    init = fl.global_variables_initializer()
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as sess:
            sess.run(init)
            assert sess.run(s, {n: 4}) == 4.0
            assert sess.run(s, {n: 3}) == 3.0
            assert sess.run(v.value() if hasattr(v, "value") else v) == 7.0, backend


def test_compiled_loop_is_a_c_while_not_an_unrolled_body(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    _, y = fl.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, fl.exp(s) * 0.5),
                         [0, fl.constant([0.1, 0.2])])
    src = _c_source(graph, [y], [n])
    assert "while (1) {" in src and re.search(r"\bk[0-9a-f]{12}_\w+\(flowc_T", src)
    assert src.count("/* loop frame while */") == 1


def test_while_loop_errors(graph):
    x = fl.placeholder(fl.f32, [2])
    with pytest.raises(OpError, match="shape"):
        fl.while_loop(lambda v: True, lambda v: fl.concat([v, v], 0), [x])
    with pytest.raises(OpError, match="f32.*i32"):
        fl.while_loop(lambda v: True, lambda v: fl.cast(v, fl.i32), [x])
    with pytest.raises(OpError, match="scalar bool"):
        fl.while_loop(lambda v: v > 0.0, lambda v: v, [x])


def test_codegen_names_the_node_of_an_unsupported_pattern(graph):
    x = fl.placeholder(fl.f32, [], name="x")
    p = fl.placeholder(fl.bool_, [], name="p")
    q = fl.placeholder(fl.bool_, [], name="q")
    f, t = fl.raw_ops.Switch(data=x, pred=p)
    m, _ = fl.raw_ops.Merge(inputs=[x, t], name="odd_merge")     # x is live either way
    with pytest.raises(CodegenError, match="odd_merge"):
        _c_source(graph, [m], [x, p, q])


# --- gradients ------------------------------------------------------------------------------------
def _numeric(loss, feeds, x, eps=1e-6):
    base = {k: np.array(v) for k, v in feeds.items()}
    out = np.zeros_like(base[x])
    with fl.Session(graph=loss.graph, backend="interpreter") as s:
        for idx in np.ndindex(out.shape):
            up, down = dict(base), dict(base)
            up[x] = base[x].copy()
            up[x][idx] += eps
            down[x] = base[x].copy()
            down[x][idx] -= eps
            out[idx] = (s.run(loss, up) - s.run(loss, down)) / (2 * eps)
    return out


def test_gradients_through_cond_match_finite_differences(graph, rng):
    x = fl.placeholder(fl.f64, [3], name="x")
    z = fl.placeholder(fl.f64, [3], name="z")
    p = fl.placeholder(fl.bool_, [], name="p")
    # z is used in one branch only (its other gradient is a zero) and outside the cond too
    y = fl.cond(p, lambda: fl.tanh(x * z), lambda: fl.square(x) + 1.0)
    nested = fl.cond(p, lambda: fl.cond(fl.reduce_sum(x) > 0.0, lambda: x * 3.0, lambda: x * x),
                     lambda: fl.exp(x))
    loss = fl.reduce_sum(y * y) + fl.reduce_sum(z * nested) + fl.reduce_sum(z)
    gx, gz = fl.gradients(loss, [x, z])
    for pv in (True, False):
        for sign in (1.0, -1.0):
            xv = np.abs(rng.normal(size=3)) * sign
            feeds = {x: xv, z: rng.normal(size=3), p: np.bool_(pv)}
            got = _run(graph, [gx, gz], feeds)
            np.testing.assert_allclose(got[0], _numeric(loss, feeds, x), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got[1], _numeric(loss, feeds, z), rtol=1e-5, atol=1e-6)
            check_against_interpreter(graph, {"gx": gx, "gz": gz}, feeds)


def test_gradients_through_while_loop_match_unrolled_finite_differences_and_c(graph, rng):
    """Gradients w.r.t. loop-invariant inputs (W, xs) and the initial loop variable (h0), with a
    cond in the body, agree with the unrolled graph's, with finite differences and in C."""
    T, B, H = 4, 2, 3
    xs = fl.placeholder(fl.f64, [T, B, H], name="xs")
    h0 = fl.placeholder(fl.f64, [B, H], name="h0")
    W = fl.placeholder(fl.f64, [H, H], name="W")
    n = fl.placeholder(fl.i32, [], name="n")

    def step(h, x):
        h2 = fl.tanh(fl.matmul(h, W) + x)
        return fl.cond(fl.reduce_sum(h2) > 0.0, lambda: h2 * 2.0, lambda: h2 - 1.0)

    _, hT = fl.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, step(h, fl.gather(xs, i))),
                          [0, h0])
    loss = fl.reduce_sum(hT * hT)
    grads = fl.gradients(loss, [xs, h0, W])
    h, unrolled = h0, []
    for t in range(T):
        h = step(h, xs[t])
        unrolled.append(fl.gradients(fl.reduce_sum(h * h), [xs, h0, W]))
    feeds = {xs: rng.normal(size=(T, B, H)) * 0.5, h0: rng.normal(size=(B, H)),
             W: rng.normal(size=(H, H)) * 0.5}
    for nv in (0, 1, T):                               # 0: the loop never runs
        got = _run(graph, grads, {**feeds, n: nv})
        if nv:
            for a, b in zip(got, _run(graph, unrolled[nv - 1], feeds)):
                np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        full = {**feeds, n: np.int32(nv)}
        for x, gx in zip((xs, h0, W), got):
            np.testing.assert_allclose(gx, _numeric(loss, full, x), rtol=1e-5, atol=1e-6)
        check_against_interpreter(graph, {"gxs": grads[0], "gh0": grads[1], "gW": grads[2]},
                                  full)


def test_gradient_of_a_loop_with_maximum_iterations_and_a_variable(graph):
    w = fl.Variable(np.array([0.5, -0.25]), name="w")
    x = fl.placeholder(fl.f64, [2], name="x")
    y = fl.while_loop(lambda v: fl.reduce_sum(v) < 100.0, lambda v: v * 1.5 + w, [x],
                      maximum_iterations=3)[0]
    gw, gx = fl.gradients(fl.reduce_sum(y), [w, x])
    init = fl.global_variables_initializer()
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(init)
            got = s.run([gw, gx], {x: [1.0, 2.0]})
        np.testing.assert_allclose(got[1], [1.5 ** 3] * 2)
        np.testing.assert_allclose(got[0], [1 + 1.5 + 1.5 ** 2] * 2)


def test_gradients_through_nested_while_loops_match_finite_differences_and_c(graph, rng):
    """An inner loop whose trip count changes with the outer iteration, reading the outer
    loop's variable and a loop invariant: values saved per inner iteration of every outer one."""
    x = fl.placeholder(fl.f64, [2], name="x")
    W = fl.placeholder(fl.f64, [2, 2], name="W")
    n = fl.placeholder(fl.i32, [], name="n")
    m = fl.placeholder(fl.i32, [], name="m")

    def outer(i, v):
        def inner(j, u):
            return j + 1, fl.tanh(fl.reshape(fl.matmul(fl.reshape(u, [1, 2]), W), [2]) + v * 0.5)
        _, u = fl.while_loop(lambda j, u: j < m + i, inner, [0, v])
        return i + 1, u * 1.5

    _, y = fl.while_loop(lambda i, v: i < n, outer, [0, x])
    loss = fl.reduce_sum(y * y)
    gx, gW = fl.gradients(loss, [x, W])
    feeds = {x: rng.normal(size=2), W: rng.normal(size=(2, 2)) * 0.5, m: np.int32(1)}
    for nv in (0, 3):
        full = {**feeds, n: np.int32(nv)}
        got = check_against_interpreter(graph, {"gx": gx, "gW": gW}, full)
        np.testing.assert_allclose(got["gx"], _numeric(loss, full, x), rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(got["gW"], _numeric(loss, full, W), rtol=1e-5, atol=1e-8)


def test_a_loop_spanning_devices_is_a_clear_error(graph):
    n = fl.placeholder(fl.i32, [], name="n")

    def body(i, v):
        with fl.device("/cpu:1"):
            w = v * 2.0
        return i + 1, w

    with fl.device("/cpu:0"):
        _, y = fl.while_loop(lambda i, v: i < n, body, [0, fl.constant([1.0, 2.0])])
    with fl.Session(graph=graph, backend="c",
                    config=fl.ConfigProto(device_count={"CPU": 2})) as s:
        # placement keeps a loop on one device, so the two requests conflict, both named
        with pytest.raises(PlacementError, match=r"conflicting devices: node 'while/\S+' asks "
                           r"for /device:CPU:[01] \(at .*test_control_flow.py:\d+:\d+\), but "
                           r"node 'while/\S+' asks for /device:CPU:[01] .*the nodes of loop "
                           r"'while' run on one device\)"):
            s.run(y, {n: 2})


def test_loop_in_cond_in_loop_and_variable_reads_per_iteration(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    x = fl.placeholder(fl.f32, [2], name="x")

    def body(i, s):
        def inner():
            return fl.while_loop(
                lambda j, t: j < i,
                lambda j, t: (j + 1, fl.cond(t[0] > 3.0, lambda: t - 1.0, lambda: t + x)),
                [0, s])[1]
        return i + 1, fl.cond(fl.equal(i % 3, 1), inner, lambda: s * 1.5)

    _, y = fl.while_loop(lambda i, s: i < n, body, [0, x])
    v = fl.Variable(1.0, name="v")

    def doubling(i, s):
        with fl.control_dependencies([v.assign(v.read_value() * 2.0)]):
            r = v.read_value()              # created in the body: read every iteration
        return i + 1, s + r

    _, z = fl.while_loop(lambda i, s: i < n, doubling, [0, fl.constant(0.0)])
    init = fl.global_variables_initializer()
    xv = np.array([1.0, 2.0], np.float32)
    got = [check_against_interpreter(graph, {"y": y}, {n: nv, x: xv})["y"] for nv in (0, 2, 5, 8)]
    np.testing.assert_allclose(got[1], xv * 2.5)
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            s.run(init)
            assert [s.run(z, {n: 3}), s.run(z, {n: 2})] == [14.0, 48.0], backend


def test_shape_invariants_let_a_loop_variable_grow(graph):
    n = fl.placeholder(fl.i32, [], name="n")
    _, grown = fl.while_loop(lambda i, v: i < n,
                             lambda i, v: (i + 1, fl.concat([v, fl.cast(fl.reshape(i, [1]), fl.f32)], 0)),
                             [0, fl.constant([7.0])],
                             shape_invariants=[fl.constant(0).shape, [None]])
    assert grown.shape == (None,)
    for nv in (0, 3):
        got = check_against_interpreter(graph, {"grown": grown}, {n: nv})
        np.testing.assert_array_equal(got["grown"], [7.0] + list(range(nv)))


def test_gradients_through_three_nested_while_loops(graph):
    x = fl.placeholder(fl.f64, [2], name="x")

    def innermost(v):
        return fl.while_loop(lambda k, w: k < 2, lambda k, w: (k + 1, fl.tanh(w) + v * 0.1),
                             [0, v])[1]

    def middle(v):
        return fl.while_loop(lambda j, u: j < 2, lambda j, u: (j + 1, innermost(u) * 1.1),
                             [0, v])[1]

    _, y = fl.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, middle(v) * 0.9), [0, x])
    loss = fl.reduce_sum(y * y)
    (gx,) = fl.gradients(loss, [x])
    full = {x: np.array([0.3, 0.7])}
    got = check_against_interpreter(graph, {"gx": gx}, full)
    np.testing.assert_allclose(got["gx"], _numeric(loss, full, x), rtol=1e-5, atol=1e-8)
