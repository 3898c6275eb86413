"""GRUBlockCell and GRUBlockCellGrad (TensorFlow's fused GRU cell): the interpreter against
the GRU formulas in numpy, compiled C against the interpreter (float32 and float64, static
and fed shapes, no input columns, no rows), TensorFlow's shape checks at graph time and at
run time in both backends, the gradient of h against finite differences (TensorFlow's
graph: GRUBlockCellGrad plus two products and two bias sums), and, where TensorFlow is
installed, a GraphDef it wrote against its own results and one flowc wrote run by it."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
NAMES = ("x", "h_prev", "w_ru", "w_c", "b_ru", "b_c")


def _shapes(b, i, c):
    return [(b, i), (b, c), (i + c, 2 * c), (i + c, c), (2 * c,), (c,)]


def _values(rng, b, i, c, dtype=np.float32):
    return [rng.standard_normal(s).astype(dtype) for s in _shapes(b, i, c)]


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def np_gru(x, h, w_ru, w_c, b_ru, b_c):
    """The GRU step as TF1's GRUCell writes it (gates r, u, then the candidate)."""
    r, u = np.split(_sigmoid(np.concatenate([x, h], 1) @ w_ru + b_ru), 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ w_c + b_c)
    return r, u, c, u * h + (1 - u) * c


def test_the_interpreter_follows_the_gru_formulas(graph, rng):
    vals = _values(rng, 3, 4, 5, np.float64)
    got = fl.Session(graph=graph, backend="interpreter").run(
        A("GRUBlockCell", [fl.constant(v) for v in vals]))
    for name, a, b in zip("ruch", got, np_gru(*vals)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)


def test_compiled_c_matches_the_interpreter(graph, rng):
    fetches, feed = {}, {}
    # (dtype, batch, input size, cell size, shapes known when the graph is built)
    for dt, b, i, c, static in [(np.float32, 3, 4, 5, True), (np.float64, 2, 3, 6, False),
                                (np.float32, 5, 0, 3, True), (np.float32, 0, 2, 3, False),
                                (np.float32, 33, 40, 24, False)]:
        phs = [fl.placeholder(dt, s if static else [None] * len(s))
               for s in _shapes(b, i, c)]
        feed.update(zip(phs, _values(rng, b, i, c, dt)))
        outs = A("GRUBlockCell", phs)
        d_h = fl.placeholder(dt, (b, c) if static else [None, None])
        feed[d_h] = rng.standard_normal((b, c)).astype(dt)
        grads = A("GRUBlockCellGrad", phs + outs[:3] + [d_h])
        key = f"{np.dtype(dt).name}_{b}_{i}_{c}"
        for name, t in zip(("r", "u", "c", "h", "d_x", "d_h_prev", "d_c_bar",
                            "d_r_bar_u_bar"), outs + grads):
            fetches[f"{key}_{name}"] = t
    got = check_against_interpreter(graph, fetches, feed, rtol=2e-5, atol=2e-5)
    assert got["float32_3_4_5_d_r_bar_u_bar"].shape == (3, 10)
    assert got["float32_5_0_3_d_x"].shape == (5, 0)
    assert got["float32_0_2_3_h"].shape == (0, 3)
    assert got["float32_33_40_24_d_x"].any()


@pytest.mark.parametrize("which, shape, message", [
    (0, (3,), "Rank of x must be 2, got 1"),
    (1, (4, 5), r"h_prev.dims\(0\) != batch_size: 4 vs. 3"),
    (2, (8, 10), r"w_ru.dim_size\(0\) != input_size \+ cell_size: 8 vs. 9"),
    (2, (9, 9), r"w_ru.dim_size\(1\) != cell_size \* 2: 9 vs. 10"),
    (3, (9, 4), r"w_c.dim_size\(1\) != cell_size: 4 vs. 5"),
    (4, (10, 1), "Rank of b_ru must be 1, got 2"),
    (5, (6,), r"b_c.dim_size\(0\) != cell_size: 6 vs. 5"),
])
def test_shape_errors_name_the_node_when_the_graph_is_built(graph, which, shape, message):
    inputs = [fl.zeros(s) for s in _shapes(3, 4, 5)]
    inputs[which] = fl.zeros(shape)
    with pytest.raises(ShapeError, match="node 'cell' \\(GRUBlockCell\\): " + message):
        A("GRUBlockCell", inputs, name="cell")


def test_the_gradient_op_checks_its_gradient_inputs(graph):
    inputs = [fl.zeros(s) for s in _shapes(3, 4, 5)]
    r = fl.zeros((3, 5))
    with pytest.raises(ShapeError, match=r"d_h.dims\(1\) != cell_size: 4 vs. 5"):
        A("GRUBlockCellGrad", inputs + [r, r, r, fl.zeros((3, 4))])


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_shapes_known_only_at_run_time_are_checked(graph, backend):
    phs = [fl.placeholder(fl.float32, [None] * len(s)) for s in _shapes(3, 4, 5)]
    y = A("GRUBlockCell", phs, name="cell")[3]
    vals = _values(np.random.default_rng(0), 3, 4, 5)
    vals[3] = np.zeros((9, 4), np.float32)
    with fl.Session(graph=graph, backend=backend) as sess:
        with pytest.raises(FlowcError, match=r"cell.*w_c.dim_size\(1\) != cell_size: 4 vs. 5"):
            sess.run(y, dict(zip(phs, vals)))


def test_the_gradient_of_h_is_tensorflows_graph_and_matches_finite_differences(graph, rng):
    vals = _values(rng, 2, 3, 4, np.float64)
    phs = [fl.placeholder(fl.float64, v.shape, name=n) for n, v in zip(NAMES, vals)]
    h = A("GRUBlockCell", phs)[3]
    weights = fl.constant(rng.uniform(0.5, 1.5, (2, 4)))
    loss = fl.reduce_sum(h * weights)
    grads = fl.gradients(loss, phs)
    ops = [n.op for n in graph]
    assert ops.count("GRUBlockCellGrad") == 1 and "SplitV" not in ops   # no extra terms
    feed = dict(zip(phs, vals))
    with fl.Session(graph=graph, backend="interpreter") as s:
        got = s.run(grads, feed)
        eps = 1e-6
        for k, (ph, g) in enumerate(zip(phs, got)):
            want = np.zeros_like(vals[k])
            for idx in np.ndindex(*vals[k].shape):
                moved = [dict(feed), dict(feed)]
                for sign, m in zip((1, -1), moved):
                    m[ph] = vals[k].copy()
                    m[ph][idx] += sign * eps
                want[idx] = (s.run(loss, moved[0]) - s.run(loss, moved[1])) / (2 * eps)
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8, err_msg=NAMES[k])
    check_against_interpreter(graph, dict(zip(NAMES, grads)), feed)


def test_a_graphdef_written_by_tensorflow_imports_and_matches(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from compiler.interop.graphdef import load_graphdef_model
    from dsl.tensor import Tensor
    tf1 = tf.compat.v1
    rng = np.random.default_rng(7)
    b, i, c = 3, 4, 5
    vals = _values(rng, b, i, c)
    d_h = rng.standard_normal((b, c)).astype(np.float32)
    g = tf1.Graph()
    with g.as_default():
        phs = [tf1.placeholder(tf.float32, [None, i] if n == "x" else None, name=n)
               for n in NAMES]
        r, u, cand, h = tf.raw_ops.GRUBlockCell(**dict(zip(NAMES, phs)), name="cell")
        dh = tf1.placeholder(tf.float32, [None, c], name="d_h")
        grads = tf.raw_ops.GRUBlockCellGrad(**dict(zip(NAMES, phs)), r=r, u=u, c=cand, d_h=dh,
                                            name="cell_grad")
        fetches = [r, u, cand, h] + list(grads)
    feed = dict(zip(NAMES + ("d_h",), vals + [d_h]))
    with tf1.Session(graph=g) as s:
        want = s.run(fetches, {f"{n}:0": v for n, v in feed.items()})
    path = str(tmp_path / "gru.pb")
    with open(path, "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    model = load_graphdef_model(path)
    mg = model.graph
    outs = [Tensor(mg.output(f"cell:{k}")) for k in range(4)]
    outs += [Tensor(mg.output(f"cell_grad:{k}")) for k in range(4)]
    feeds = {Tensor(mg.output(n)): v for n, v in feed.items()}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=mg, backend=backend) as sess:
            got = sess.run(outs, feeds)
        for k, (a, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5, err_msg=f"{backend} {k}")


def test_an_exported_graphdef_is_what_tensorflow_runs(graph):
    tf = pytest.importorskip("tensorflow")
    from compiler.interop.graphdef import graph_to_graphdef
    vals = _values(np.random.default_rng(8), 2, 3, 4)
    phs = [fl.placeholder(fl.float32, v.shape, name=n) for n, v in zip(NAMES, vals)]
    outs = A("GRUBlockCell", phs, name="cell")
    grads = A("GRUBlockCellGrad", phs + outs[:3] + [fl.ones_like(outs[3])], name="cell_grad")
    feed = dict(zip(phs, vals))
    want = fl.Session(graph=graph).run(outs + grads, feed)
    tf_gd = tf.compat.v1.GraphDef()
    tf_gd.ParseFromString(graph_to_graphdef(graph).SerializeToString())
    with tf.Graph().as_default() as tg:
        tf.graph_util.import_graph_def(tf_gd, name="")
    names = [f"cell:{k}" for k in range(4)] + [f"cell_grad:{k}" for k in range(4)]
    with tf.compat.v1.Session(graph=tg) as s:
        got = s.run(names, {f"{n}:0": v for n, v in zip(NAMES, vals)})
    for name, a, w in zip(names, got, want):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5, err_msg=name)
