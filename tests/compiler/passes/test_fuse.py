"""The fuse pass and the Fused kernel: chains become one node, compiled results equal the
interpreter's (broadcasting, dynamic dims, f32 and f64), and what must not fuse does not."""
import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter

UNFUSED = PipelineOptions(disable=("fuse",))


def optimized(fetches, feeds=(), **options):
    step = make_step_graph(fl.get_default_graph(), [f.output for f in feeds],
                           [f.output for f in fetches])
    optimize(step, PipelineOptions(**options))
    return step.graph


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_chains_fuse_and_match_the_interpreter(graph, dtype):
    x = fl.placeholder(dtype, [None, 5], name="x")
    row = fl.placeholder(dtype, [5], name="row")
    col = fl.placeholder(dtype, [None, 1], name="col")
    chain = fl.nn.relu(x * 1.5 + 0.5) * fl.sigmoid(x)               # the benchmark chain
    broadcast = fl.tanh(col - row) / (fl.exp(row) + 1.0)           # [?,1] against [5]
    long = x
    for k in range(12):
        long = fl.square(long * 0.5) - fl.abs(long) + float(k)
    g = optimized([chain, broadcast, long], [x, row, col])
    ops = [n.op for n in g]
    assert not {"Relu", "Sigmoid", "Tanh", "Square"} & set(ops)
    fused = [n for n in g if n.op == "Fused"]
    # the chain and the broadcast are one kernel each; the long chain reads each step's
    # value twice, so inlining doubles its expression per step: it is cut into kernels whose
    # expressions stay within MAX_FUSED_OPS ops per element
    from compiler.ops.fused import parse_expr
    from compiler.passes.fuse import MAX_FUSED_OPS, _expr_size
    assert 3 <= len(fused) <= 8
    assert all(_expr_size(parse_expr(f.attrs["expr"])) <= MAX_FUSED_OPS for f in fused)
    assert max(len(f.attrs["expr"]) for f in fused) < 4000
    rng = np.random.default_rng(0)
    for rows in (4, 1, 0):
        feeds = {x: rng.normal(size=(rows, 5)).astype(dtype.np),
                 row: rng.normal(size=5).astype(dtype.np),
                 col: rng.normal(size=(rows, 1)).astype(dtype.np)}
        check_against_interpreter(graph, {"chain": chain, "broadcast": broadcast, "long": long},
                                  feeds)


def test_fused_nodes_list_their_sources_and_keep_the_chain_name(graph):
    x = fl.placeholder(fl.float32, [3], name="x")
    y = fl.exp(fl.negative(x, name="neg"), name="out")
    (fused,) = [n for n in optimized([y], [x]) if n.op == "Fused"]
    assert fused.name == "out" and fused.attrs["fused_from"] == ["neg", "out"]
    assert fused.attrs["expr"] == "Exp(Neg($0))"
    assert fused.location is not None and "test_fuse.py" in str(fused.location)


def test_what_must_not_fuse_does_not(graph):
    x = fl.placeholder(fl.float32, [4], name="x")
    shared = fl.exp(x, name="shared")                 # two users: materialized once
    a = fl.negative(shared, name="a")
    b = fl.square(shared, name="b")
    fetched = fl.sqrt(fl.abs(x), name="fetched")      # fetched: kept as a value
    after = fl.tanh(fetched, name="after")
    i = fl.placeholder(fl.int32, [4], name="i")
    idiv = fl.floordiv(i, i + 1, name="idiv")         # integer division: a data error to report
    with fl.device("/cpu:1"):
        other = fl.sigmoid(a, name="other")           # another device
    g = optimized([b, other, fetched, after, idiv], [x, i], cpu_devices=2)
    names = {n.name for n in g}
    assert {"shared", "fetched", "after", "idiv", "other"} <= names
    assert all(n.op != "Fused" or n.assigned_device == g.node("shared").assigned_device
               for n in g)
    g2 = optimized([b], [x], disable=("fuse",))
    assert not any(n.op == "Fused" for n in g2)


def test_training_fused_and_unfused_agree(graph):
    rng = np.random.default_rng(2)
    x = fl.placeholder(fl.float32, [None, 6], name="x")
    w = fl.Variable(rng.normal(size=(6, 3)).astype(np.float32), name="w")
    h = fl.tanh(x @ w) * 2.0 - fl.sigmoid(x @ w)
    loss = fl.reduce_mean(fl.square(h - 0.5))
    step = fl.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    init = fl.global_variables_initializer()
    xv = rng.normal(size=(8, 6)).astype(np.float32)
    runs = []
    for options in (PipelineOptions(), UNFUSED):
        with fl.Session(options=options) as s:
            s.run(init)
            runs.append([s.run([loss, step], {x: xv})[0] for _ in range(5)] + [s.run(w)])
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_control_uses_of_a_fused_chain_move_to_the_fused_node(graph):
    x = fl.placeholder(fl.float32, [3], name="x")
    y = fl.exp(fl.negative(x, name="neg"), name="out")
    with fl.control_dependencies([y]):
        z = fl.identity(fl.constant([1.0, 2.0, 3.0]), name="z")
    g = optimized([z, y], [x])
    fused = [n for n in g if n.op == "Fused"]
    assert len(fused) == 1
    check_against_interpreter(graph, {"y": y, "z": z}, {x: np.array([0.5, -1, 2], np.float32)})


def test_a_very_long_chain_becomes_several_bounded_kernels(graph):
    from compiler.passes.fuse import MAX_FUSED_OPS
    x = fl.placeholder(fl.float32, [], name="x")
    y = x
    for _ in range(1000):
        y = fl.add(y, x)
    g = optimized([y], [x])
    fused = [n for n in g if n.op == "Fused"]
    assert len(fused) >= 1000 // MAX_FUSED_OPS
    assert all(len(n.attrs["fused_from"]) <= MAX_FUSED_OPS for n in fused)
    with fl.Session() as s:
        assert s.run(y, {x: np.float32(1.0)}) == 1001.0


def test_bias_add_fuses_as_a_broadcasting_add(graph):
    """bias_add + relu (NHWC, the default) is one kernel; an NCHW BiasAdd of rank 4 is not
    an add over the last dim and keeps its own kernel (unless the layout pass has made it an
    NHWC one)."""
    x = fl.placeholder(fl.float32, [None, 2, 3, 4], name="x")
    b = fl.placeholder(fl.float32, [4], name="b")
    c = fl.placeholder(fl.float32, [2], name="c")
    nhwc = fl.nn.relu(fl.nn.bias_add(x, b))
    nchw = fl.nn.relu(fl.nn.bias_add(fl.transpose(x, [0, 3, 1, 2])[:, 0:2], c,
                                     data_format="NCHW"))
    g = optimized([nhwc, nchw], [x, b, c], disable=("layout",))
    fused = [n for n in g if n.op == "Fused"]
    assert [f.attrs["expr"] for f in fused] == ["Relu(AddV2($0, $1))"]
    assert [n.op for n in g].count("BiasAdd") == 1
    g = optimized([nhwc, nchw], [x, b, c])
    assert [n.op for n in g].count("Fused") == 2 and "BiasAdd" not in [n.op for n in g]
    rng = np.random.default_rng(1)
    for rows in (3, 0):
        check_against_interpreter(graph, {"nhwc": nhwc, "nchw": nchw},
                                  {x: rng.normal(size=(rows, 2, 3, 4)).astype(np.float32),
                                   b: rng.normal(size=4).astype(np.float32),
                                   c: rng.normal(size=2).astype(np.float32)})
