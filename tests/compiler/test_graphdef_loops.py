"""TensorFlow 1.x ``tf.while_loop`` GraphDefs import, compile and run: loops written by hand
the way TensorFlow lays them out (Enter, Merge, ..., NextIteration, Exit, so a Merge comes
before its back edge) and in shuffled node orders, loops whose shape changes, nested loops, a
loop inside a cond, and flowc's own while_loop exported and imported back."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorboardX", reason="GraphDef support needs the tensorboard extra")

import dsl as fl  # noqa: E402
from compiler.interop.graphdef import (GraphDefImportError, graph_to_graphdef,  # noqa: E402
                                       graphdef_to_graph)
from compiler.interop.protos import tf_protos  # noqa: E402
from dsl.tensor import Tensor  # noqa: E402

PB = tf_protos()
DT_FLOAT, DT_INT32, DT_BOOL = 1, 3, 10
_DT = {np.float32: DT_FLOAT, np.int32: DT_INT32, np.bool_: DT_BOOL}


def attr(**kw):
    a = PB.attr_value_pb2.AttrValue()
    for k, v in kw.items():
        if k == "shape":
            if v is None:
                a.shape.unknown_rank = True
            for d in v or ():
                a.shape.dim.add(size=d)
        elif k == "tensor":
            a.tensor.CopyFrom(v)
        else:
            setattr(a, k, v)
    return a


class TF1Graph:
    """A GraphDef written node by node with TensorFlow 1.x's names, attrs and control inputs."""

    def __init__(self):
        self.gd = PB.graph_pb2.GraphDef()
        self.gd.versions.producer = 1087

    def node(self, name, op, inputs=(), **attrs):
        nd = self.gd.node.add(name=name, op=op)
        nd.input.extend(inputs)
        for k, v in attrs.items():
            nd.attr[k].CopyFrom(v)
        return name

    def placeholder(self, name, dtype, shape):
        return self.node(name, "Placeholder", dtype=attr(type=dtype), shape=attr(shape=shape))

    def const(self, name, value, control=()):
        value = np.asarray(value)
        dt = _DT[value.dtype.type]
        t = PB.tensor_pb2.TensorProto(dtype=dt, tensor_content=value.tobytes())
        for d in value.shape:
            t.tensor_shape.dim.add(size=d)
        return self.node(name, "Const", ["^" + c for c in control], value=attr(tensor=t),
                         dtype=attr(type=dt))

    def op(self, name, op, inputs, dtype=DT_FLOAT, **attrs):
        return self.node(name, op, inputs, T=attr(type=dtype), **attrs)


class TF1Loop:
    """The nodes of one ``tf.while_loop`` as TensorFlow 1.x writes them, in its order: Enters,
    Merges (whose second input, the NextIteration, comes later), the condition, LoopCond,
    Switches, Identities, the body, NextIterations, Exits."""

    def __init__(self, g: TF1Graph, scope: str, loop_vars, parallel_iterations=10):
        self.g, self.scope = g, scope
        self.frame = f"{scope}/while_context"
        self.parallel = parallel_iterations
        self.dtypes = [dt for _, dt in loop_vars]
        self.enters, self.merges = [], []
        for k, (src, dt) in enumerate(loop_vars):
            self.enters.append(self._enter(src, dt, False, f"Enter{self._sfx(k)}"))
        for k, dt in enumerate(self.dtypes):
            m = g.node(f"{scope}/Merge{self._sfx(k)}", "Merge",
                       [self.enters[k], f"{scope}/NextIteration{self._sfx(k)}"],
                       T=attr(type=dt), N=attr(i=2))
            self.merges.append(m)

    @staticmethod
    def _sfx(k):
        return "" if k == 0 else f"_{k}"

    def _enter(self, src, dtype, is_constant, name):
        return self.g.node(f"{self.scope}/{name}", "Enter", [src], T=attr(type=dtype),
                           frame_name=attr(s=self.frame.encode()),
                           is_constant=attr(b=is_constant),
                           parallel_iterations=attr(i=self.parallel))

    def invariant(self, src, dtype, name):
        """A tensor from outside the loop, read in every iteration (``is_constant`` Enter)."""
        return self._enter(src, dtype, True, name)

    def condition(self, pred):
        g, s = self.g, self.scope
        lc = g.node(f"{s}/LoopCond", "LoopCond", [pred])
        self.switches = [g.op(f"{s}/Switch{self._sfx(k)}", "Switch", [m, lc], dt)
                         for k, (m, dt) in enumerate(zip(self.merges, self.dtypes))]
        self.identities = [g.op(f"{s}/Identity{self._sfx(k)}", "Identity", [sw + ":1"], dt)
                           for k, (sw, dt) in enumerate(zip(self.switches, self.dtypes))]
        return self.identities

    def body_done(self, results):
        g, s = self.g, self.scope
        for k, (r, dt) in enumerate(zip(results, self.dtypes)):
            g.op(f"{s}/NextIteration{self._sfx(k)}", "NextIteration", [r], dt)
        return [g.op(f"{s}/Exit{self._sfx(k)}", "Exit", [sw], dt)
                for k, (sw, dt) in enumerate(zip(self.switches, self.dtypes))]


def counter_loop(g: TF1Graph, scope: str, i0: str, x0: str, limit: str, c: str):
    """``while i < limit: i, x = i + 1, x * 2 + c`` (``limit`` and ``c`` from outside)."""
    loop = TF1Loop(g, scope, [(i0, DT_INT32), (x0, DT_FLOAT)])
    lim = loop.invariant(limit, DT_INT32, "Less/Enter")
    less = g.op(f"{scope}/Less", "Less", [loop.merges[0], lim], DT_INT32)
    i, x = loop.condition(less)
    one = g.const(f"{scope}/add/y", np.int32(1), control=[i])
    two = g.const(f"{scope}/mul/y", np.float32(2), control=[i])
    cc = loop.invariant(c, DT_FLOAT, "add_1/Enter")
    i1 = g.op(f"{scope}/add", "AddV2", [i, one], DT_INT32)
    x1 = g.op(f"{scope}/mul", "Mul", [x, two])
    x2 = g.op(f"{scope}/add_1", "AddV2", [x1, cc])
    return loop.body_done([i1, x2])


def counter_graph() -> TF1Graph:
    g = TF1Graph()
    g.placeholder("x", DT_FLOAT, [3])
    g.placeholder("n", DT_INT32, [])
    g.const("c", np.array([0.5, -1.0, 2.0], np.float32))
    g.const("zero", np.int32(0))
    _, x_out = counter_loop(g, "while", "zero", "x", "n", "c")
    g.op("y", "Identity", [x_out])
    return g


def counter_want(x, n):
    for _ in range(n):
        x = x * 2 + np.array([0.5, -1.0, 2.0], np.float32)
    return x


def shuffled(g: TF1Graph, seed: int) -> TF1Graph:
    out = TF1Graph()
    nodes = list(g.gd.node)
    for k in np.random.RandomState(seed).permutation(len(nodes)):
        out.gd.node.add().CopyFrom(nodes[k])
    return out


def run(graph, fetch, feeds, backend="c"):
    with fl.Session(graph=graph, backend=backend) as sess:
        return sess.run(Tensor(graph.output(fetch)),
                        {Tensor(graph.output(k)): v for k, v in feeds.items()})


def test_merge_before_its_back_edge_imports_and_matches_flowcs_own_loop():
    graph = graphdef_to_graph(counter_graph().gd)
    assert graph.node("while/Merge_1").output_types[0].shape == (3,)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    got = run(graph, "y", {"x": x, "n": np.int32(4)})
    np.testing.assert_allclose(got, counter_want(x, 4), rtol=1e-6)
    np.testing.assert_allclose(run(graph, "y", {"x": x, "n": np.int32(0)}), x)
    ref = run(graph, "y", {"x": x, "n": np.int32(4)}, backend="interpreter")
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    g = fl.Graph()
    with g.as_default():
        xt = fl.placeholder(fl.f32, [3], name="x")
        n = fl.placeholder(fl.i32, [], name="n")
        c = fl.constant(np.array([0.5, -1.0, 2.0], np.float32))
        _, yt = fl.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 2.0 + c),
                              [fl.constant(0), xt])
    with fl.Session(graph=g) as sess:
        np.testing.assert_allclose(got, sess.run(yt, {xt: x, n: np.int32(4)}), rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_loop_imports_in_any_node_order(seed):
    graph = graphdef_to_graph(shuffled(counter_graph(), seed).gd)
    x = np.array([-1.0, 0.25, 4.0], np.float32)
    np.testing.assert_allclose(run(graph, "y", {"x": x, "n": np.int32(3)}), counter_want(x, 3),
                               rtol=1e-6)


def growing_graph() -> TF1Graph:
    """``while tf.size(x) < n: x = concat([x, x * 2])`` (shape_invariants [None])."""
    g = TF1Graph()
    g.placeholder("x", DT_FLOAT, [2])
    g.placeholder("n", DT_INT32, [])
    loop = TF1Loop(g, "grow", [("x", DT_FLOAT)])
    lim = loop.invariant("n", DT_INT32, "Less/Enter")
    size = g.node("grow/Size", "Size", [loop.merges[0]], T=attr(type=DT_FLOAT),
                  out_type=attr(type=DT_INT32))
    less = g.op("grow/Less", "Less", [size, lim], DT_INT32)
    (x,) = loop.condition(less)
    two = g.const("grow/mul/y", np.float32(2), control=[x])
    axis = g.const("grow/concat/axis", np.int32(0), control=[x])
    dbl = g.op("grow/mul", "Mul", [x, two])
    cat = g.op("grow/concat", "ConcatV2", [x, dbl, axis], N=attr(i=2), Tidx=attr(type=DT_INT32))
    (out,) = loop.body_done([cat])
    g.op("y", "Identity", [out])
    return g


@pytest.mark.parametrize("seed", [None, 3])
def test_a_loop_variable_whose_shape_changes_gets_the_relaxed_type(seed):
    g = growing_graph()
    graph = graphdef_to_graph((shuffled(g, seed) if seed is not None else g).gd)
    assert graph.node("grow/Merge").output_types[0].shape == (None,)
    assert graph.node("grow/concat").output_types[0].shape == (None,)
    x = np.array([1.0, -3.0], np.float32)
    want = x
    while want.size < 11:
        want = np.concatenate([want, want * 2])
    got = run(graph, "y", {"x": x, "n": np.int32(11)})
    assert got.shape == (16,)
    np.testing.assert_allclose(got, want)


def nested_graph() -> TF1Graph:
    """``acc = 0; for i in range(n): for j in range(m): acc += i * j + x`` written as two TF1
    loops, the inner one reading the outer's ``i`` and the outside ``x`` and ``m``."""
    g = TF1Graph()
    g.placeholder("x", DT_FLOAT, [])
    g.placeholder("n", DT_INT32, [])
    g.placeholder("m", DT_INT32, [])
    g.const("zero", np.int32(0))
    g.const("acc0", np.float32(0))
    outer = TF1Loop(g, "outer", [("zero", DT_INT32), ("acc0", DT_FLOAT)])
    n = outer.invariant("n", DT_INT32, "Less/Enter")
    less = g.op("outer/Less", "Less", [outer.merges[0], n], DT_INT32)
    i, acc = outer.condition(less)
    m_out = outer.invariant("m", DT_INT32, "inner/Less/Enter_outer")
    x_out = outer.invariant("x", DT_FLOAT, "inner/add/Enter_outer")
    zero_j = g.const("outer/inner/Const", np.int32(0), control=[i])
    inner = TF1Loop(g, "outer/inner", [(zero_j, DT_INT32), (acc, DT_FLOAT)])
    m = inner.invariant(m_out, DT_INT32, "Less/Enter")
    less_j = g.op("outer/inner/Less", "Less", [inner.merges[0], m], DT_INT32)
    j, acc_in = inner.condition(less_j)
    i_in = inner.invariant(i, DT_INT32, "mul/Enter")
    x_in = inner.invariant(x_out, DT_FLOAT, "add/Enter")
    ij = g.op("outer/inner/mul", "Mul", [i_in, j], DT_INT32)
    ijf = g.node("outer/inner/Cast", "Cast", [ij], SrcT=attr(type=DT_INT32),
                 DstT=attr(type=DT_FLOAT), Truncate=attr(b=False))
    t = g.op("outer/inner/add", "AddV2", [ijf, x_in])
    acc1 = g.op("outer/inner/add_1", "AddV2", [acc_in, t])
    one_j = g.const("outer/inner/add_2/y", np.int32(1), control=[j])
    j1 = g.op("outer/inner/add_2", "AddV2", [j, one_j], DT_INT32)
    _, acc_exit = inner.body_done([j1, acc1])
    one_i = g.const("outer/add/y", np.int32(1), control=[i])
    i1 = g.op("outer/add", "AddV2", [i, one_i], DT_INT32)
    _, acc_done = outer.body_done([i1, acc_exit])
    g.op("y", "Identity", [acc_done])
    return g


@pytest.mark.parametrize("seed", [None, 4, 5])
def test_nested_loops_import_and_run(seed):
    g = nested_graph()
    graph = graphdef_to_graph((shuffled(g, seed) if seed is not None else g).gd)
    feeds = {"x": np.float32(0.5), "n": np.int32(3), "m": np.int32(4)}
    want = sum(i * j + 0.5 for i in range(3) for j in range(4))
    np.testing.assert_allclose(run(graph, "y", feeds), want, rtol=1e-6)
    np.testing.assert_allclose(run(graph, "y", feeds, backend="interpreter"), want, rtol=1e-6)


def loop_in_cond_graph() -> TF1Graph:
    """``y = tf.cond(p, lambda: <counter loop on x>, lambda: x - 1)`` as TF1 writes it."""
    g = TF1Graph()
    g.placeholder("x", DT_FLOAT, [3])
    g.placeholder("n", DT_INT32, [])
    g.placeholder("p", DT_BOOL, [])
    g.const("c", np.array([0.5, -1.0, 2.0], np.float32))
    g.op("cond/Switch", "Switch", ["p", "p"], DT_BOOL)
    t = g.op("cond/switch_t", "Identity", ["cond/Switch:1"], DT_BOOL)
    f = g.op("cond/switch_f", "Identity", ["cond/Switch"], DT_BOOL)
    g.op("cond/pred_id", "Identity", ["p"], DT_BOOL)
    g.op("cond/Switch_1", "Switch", ["x", "cond/pred_id"])
    g.op("cond/Switch_2", "Switch", ["n", "cond/pred_id"], DT_INT32)
    g.op("cond/Switch_3", "Switch", ["c", "cond/pred_id"])
    zero = g.const("cond/zero", np.int32(0), control=[t])
    _, x_out = counter_loop(g, "cond/while", zero, "cond/Switch_1:1", "cond/Switch_2:1",
                            "cond/Switch_3:1")
    one = g.const("cond/sub/y", np.float32(1), control=[f])
    sub = g.op("cond/sub", "Sub", ["cond/Switch_1", one])
    g.node("cond/Merge", "Merge", [sub, x_out], T=attr(type=DT_FLOAT), N=attr(i=2))
    g.op("y", "Identity", ["cond/Merge"])
    return g


@pytest.mark.parametrize("seed", [None, 6])
def test_a_loop_inside_a_cond_imports_and_runs(seed):
    g = loop_in_cond_graph()
    graph = graphdef_to_graph((shuffled(g, seed) if seed is not None else g).gd)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for p in (True, False):
        feeds = {"x": x, "n": np.int32(3), "p": np.bool_(p)}
        want = counter_want(x, 3) if p else x - 1
        np.testing.assert_allclose(run(graph, "y", feeds), want, rtol=1e-6)
        np.testing.assert_allclose(run(graph, "y", feeds, backend="interpreter"), want, rtol=1e-6)


def test_flowcs_own_while_loop_round_trips():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [2, 3], name="x")
        w = fl.constant(np.random.RandomState(0).randn(3, 3).astype(np.float32) * 0.5)

        def body(i, h, hist):
            h = fl.tanh(fl.matmul(h, w) + x)
            return i + 1, h, fl.concat([hist, fl.reduce_sum(h, axis=1)], 0)

        _, h, hist = fl.while_loop(lambda i, h, hist: i < 5, body,
                                   [fl.constant(0), x, fl.zeros([0])],
                                   shape_invariants=[[], [2, 3], [None]])
        fl.identity(h, name="h")
        fl.identity(hist, name="hist")
    xv = np.random.RandomState(1).randn(2, 3).astype(np.float32)
    with fl.Session(graph=g) as sess:
        want_h, want_hist = sess.run([h, hist], {x: xv})
    back = graphdef_to_graph(graph_to_graphdef(g))
    assert [n.op for n in back] == [n.op for n in g]
    for name, want in (("h", want_h), ("hist", want_hist)):
        np.testing.assert_allclose(run(back, name, {"x": xv}), want, rtol=1e-5, atol=1e-6)
    assert run(back, "hist", {"x": xv}).shape == (10,)


def test_a_merge_fed_only_by_back_edges_is_a_clear_error():
    g = TF1Graph()
    g.placeholder("x", DT_FLOAT, [])
    g.node("m", "Merge", ["ni"], T=attr(type=DT_FLOAT), N=attr(i=1))
    g.op("ni", "NextIteration", ["m"])
    with pytest.raises(GraphDefImportError, match="'m' \\(Merge\\): no input outside"):
        graphdef_to_graph(g.gd)


def test_a_back_edge_of_another_dtype_is_a_clear_error():
    g = counter_graph()
    for nd in g.gd.node:
        if nd.name == "while/NextIteration_1":
            nd.input[0] = "while/add"
            nd.attr["T"].type = DT_INT32
    with pytest.raises(GraphDefImportError, match="while/Merge_1"):
        graphdef_to_graph(g.gd)
