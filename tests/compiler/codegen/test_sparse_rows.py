"""Row gathers and scatters of resource variables (codegen_templates/c/sparse_rows.c.j2) and
the fused sparse gradient-descent step (``_ResourceScatterSubScaled``), compiled against the
numpy interpreter: repeated ids, static and dynamic shapes, rows long and short, integer
tables, and out-of-range ids that fail naming the node and leave the variable unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import dsl as fl
from compiler.step import make_step_graph, optimize
from compiler.options import PipelineOptions
from runtime.errors import InvalidArgumentError

ROWS = 50


def _run_both(build, feeds_of, steps: int = 2):
    """Build the graph, run ``steps`` steps in each backend from the same initial state, and
    return the fetched values and final tables of each (interpreter first)."""
    results = []
    for backend in ("interpreter", "c"):
        g = fl.Graph()
        with g.as_default():
            tables, fetches, feeds = build()
            init = fl.global_variables_initializer()
        with fl.Session(graph=g, backend=backend) as s:
            s.run(init)
            got = [s.run(fetches, feeds_of(feeds, k)) for k in range(steps)]
            results.append((got, s.run(tables)))
    return results


def _assert_same(results) -> None:
    (want, want_tables), (got, got_tables) = results
    for w, g in zip(want_tables, got_tables):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    for w_step, g_step in zip(want, got):
        for w, g in zip(w_step, g_step):
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _ids(rng, shape, rows=ROWS):
    ids = rng.integers(0, rows, shape)
    ids.reshape(-1)[1::3] = ids.reshape(-1)[0]          # repeated ids: their updates add up
    return ids


def test_gathers_and_scatters_match_the_interpreter_with_repeated_ids():
    rng = np.random.default_rng(0)
    short = rng.uniform(-1, 1, (ROWS, 16)).astype(np.float32)        # rows of 64 bytes
    long = rng.uniform(-1, 1, (ROWS, 300)).astype(np.float64)        # rows of 2400 bytes
    cube = rng.uniform(-1, 1, (ROWS, 3, 5)).astype(np.float32)
    ints = rng.integers(-9, 9, (ROWS, 7)).astype(np.int32)
    vector = rng.uniform(-1, 1, ROWS).astype(np.float32)

    def build():
        t_short, t_long = fl.Variable(short, name="short"), fl.Variable(long, name="long")
        t_cube, t_ints = fl.Variable(cube, name="cube"), fl.Variable(ints, name="ints")
        t_vec = fl.Variable(vector, name="vector")
        ids2 = fl.placeholder(fl.int64, [4, 6], name="ids2")         # static shape
        ids = fl.placeholder(fl.int32, [None], name="ids")           # dynamic shape
        upd_short = fl.placeholder(fl.float32, [4, 6, 16], name="upd_short")
        upd_long = fl.placeholder(fl.float64, [None, 300], name="upd_long")
        upd_cube = fl.placeholder(fl.float32, [None, 3, 5], name="upd_cube")
        upd_ints = fl.placeholder(fl.int32, [None, None], name="upd_ints")
        fetches = [t_short.sparse_read(ids2), t_long.sparse_read(ids), t_cube.sparse_read(ids),
                   t_ints.sparse_read(ids2), t_vec.sparse_read(ids)]
        updates = [fl.scatter_sub(t_short, ids2, upd_short),
                   fl.scatter_add(t_long, ids, upd_long),
                   fl.scatter_sub(t_cube, ids, upd_cube),
                   fl.scatter_add(t_ints, ids, upd_ints),
                   fl.scatter_update(t_vec, ids, fl.constant(2.5)),   # one value for every row
                   fl.scatter_sub(t_long, ids, fl.constant(0.25, fl.float64))]
        with fl.control_dependencies(fetches):
            step = fl.group(*updates)
        feeds = (ids2, ids, upd_short, upd_long, upd_cube, upd_ints)
        return [t_short, t_long, t_cube, t_ints, t_vec], fetches + [step], feeds

    def feeds_of(feeds, step):
        ids2, ids, upd_short, upd_long, upd_cube, upd_ints = feeds
        r = np.random.default_rng(10 + step)
        flat = _ids(r, 9).astype(np.int32)
        return {ids2: _ids(r, (4, 6)), ids: flat,
                upd_short: r.uniform(-1, 1, (4, 6, 16)).astype(np.float32),
                upd_long: r.uniform(-1, 1, (9, 300)),
                upd_cube: r.uniform(-1, 1, (9, 3, 5)).astype(np.float32),
                upd_ints: r.integers(-3, 3, (9, 7)).astype(np.int32)}

    _assert_same(_run_both(build, feeds_of))


def test_empty_ids_gather_nothing_and_change_nothing():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)

    def build():
        t = fl.Variable(table, name="t")
        ids = fl.placeholder(fl.int64, [None], name="ids")
        upd = fl.placeholder(fl.float32, [None, 3], name="upd")
        return [t], [t.sparse_read(ids), fl.scatter_sub(t, ids, upd)], (ids, upd)

    results = _run_both(build, lambda f, k: {f[0]: np.zeros(0, np.int64),
                                            f[1]: np.zeros((0, 3), np.float32)})
    _assert_same(results)
    np.testing.assert_array_equal(results[1][1][0], table)


def _sgd_embedding(table: np.ndarray, ids_shape, lr: float = 0.5):
    """An embedding's sparse SGD step as the optimizer builds it (bench_embedding's model)."""
    t = fl.Variable(table, name="table")
    ids = fl.placeholder(fl.int64, ids_shape, name="ids")
    target = fl.placeholder(fl.float32, [ids_shape[0], table.shape[1]], name="target")
    h = fl.reduce_mean(t.sparse_read(ids), axis=1)
    loss = fl.reduce_mean(fl.square(h - target))
    train = fl.train.GradientDescentOptimizer(lr).minimize(loss, var_list=[t])
    return t, ids, target, loss, train


def test_the_sparse_sgd_step_is_one_scaled_scatter_with_static_rows():
    g = fl.Graph()
    with g.as_default():
        _, ids, target, _, train = _sgd_embedding(np.zeros((ROWS, 8), np.float32), [4, 5])
    sg = make_step_graph(g, [ids.output, target.output], [], [train.node])
    optimize(sg, PipelineOptions())
    ops = [n.op for n in sg.graph]
    assert "_ResourceScatterSubScaled" in ops and "ResourceScatterSub" not in ops
    scatter = next(n for n in sg.graph if n.op == "_ResourceScatterSubScaled")
    assert scatter.inputs[2].type.shape == (20, 8)      # folded shape operands: static rows
    unfused = make_step_graph(g, [ids.output, target.output], [], [train.node])
    optimize(unfused, PipelineOptions(disable=("fuse-updates", "fuse-accumulate", "fuse-conv",
                                               "fuse-matmul-bias")))
    assert "ResourceScatterSub" in [n.op for n in unfused.graph]


def test_the_fused_sparse_sgd_step_matches_the_interpreter():
    rng = np.random.default_rng(1)
    table = rng.uniform(-0.5, 0.5, (ROWS, 8)).astype(np.float32)

    def build():
        t, ids, target, loss, train = _sgd_embedding(table, [4, 5])
        return [t], [loss, train], (ids, target)

    def feeds_of(feeds, step):
        r = np.random.default_rng(20 + step)
        return {feeds[0]: _ids(r, (4, 5)),
                feeds[1]: r.uniform(-1, 1, (4, 8)).astype(np.float32)}

    _assert_same(_run_both(build, feeds_of, steps=3))


@pytest.mark.parametrize("backend", ("interpreter", "c"))
@pytest.mark.parametrize("bad", (ROWS, -1, 1 << 40))
def test_an_out_of_range_id_fails_naming_the_node_and_changes_nothing(backend, bad):
    table = np.arange(ROWS * 8, dtype=np.float32).reshape(ROWS, 8)
    g = fl.Graph()
    with g.as_default():
        t, ids, target, _, train = _sgd_embedding(table, [2, 3])
        gather = t.sparse_read(ids, name="lookup")
        init = fl.global_variables_initializer()
    ids_value = np.array([[1, 2, 3], [4, bad, 6]], np.int64)
    feed = {ids: ids_value, target: np.ones((2, 8), np.float32)}
    with fl.Session(graph=g, backend=backend) as s:
        s.run(init)
        errors = InvalidArgumentError                # TensorFlow's class, on both backends
        with pytest.raises(errors, match=rf"indices\[.*\] = {bad} is not in \[0, {ROWS}\)"
                                         r".*'table'") as info:
            s.run(train, feed)
        assert "update_table" in str(info.value) or "Gather" in str(info.value)
        with pytest.raises(errors, match="lookup"):
            s.run(gather, {ids: ids_value})
        np.testing.assert_array_equal(s.run(t), table)
