"""DynamicPartition / DynamicStitch (both backends against numpy, errors, gradients) and
fl.nn.embedding_lookup over sharded tables, including sparse training on several devices."""
from __future__ import annotations

import numpy as np
import pytest

import dsl as fl
from runtime.errors import FlowcError

BACKENDS = ["interpreter", "c"]


def run(graph, fetches, feeds=None, backend="c", init=None, config=None):
    with fl.Session(graph=graph, backend=backend, config=config) as sess:
        if init is not None:
            sess.run(init)
        return sess.run(fetches, feeds or {})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(4))
def test_partition_then_stitch_against_numpy(backend, seed):
    r = np.random.RandomState(seed)
    n, parts = r.randint(0, 9), r.randint(1, 5)
    data = r.randn(n, 2, 3).astype(np.float32)
    where = r.randint(0, parts, size=n).astype(np.int32)
    g = fl.Graph()
    with g.as_default():
        d = fl.placeholder(fl.f32, [None, 2, 3], name="d")
        p = fl.placeholder(fl.i32, [None], name="p")
        outs = fl.dynamic_partition(d, p, parts)
        pos = fl.dynamic_partition(fl.range(0, fl.size(p)), p, parts)
        back = fl.dynamic_stitch(pos, outs)
    got = run(g, outs + [back], {d: data, p: where}, backend)
    for k in range(parts):
        np.testing.assert_array_equal(got[k], data[where == k])
    np.testing.assert_array_equal(got[-1], data)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stitch_later_pieces_win_and_unnamed_rows_are_zero(backend):
    g = fl.Graph()
    with g.as_default():
        merged = fl.dynamic_stitch([fl.constant([0, 3], dtype=fl.i32),
                                    fl.constant([[3, 5]], dtype=fl.i32)],
                                   [fl.constant([[1.0, 1.0], [2.0, 2.0]]),
                                    fl.constant([[[7.0, 7.0], [9.0, 9.0]]])])
    got = run(g, merged, backend=backend)
    np.testing.assert_array_equal(got, [[1, 1], [0, 0], [0, 0], [7, 7], [0, 0], [9, 9]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_partitions_and_indices_are_errors_naming_the_node(backend):
    g = fl.Graph()
    with g.as_default():
        d = fl.placeholder(fl.f32, [None], name="d")
        p = fl.placeholder(fl.i32, [None], name="p")
        out = fl.dynamic_partition(d, p, 2, name="split")
        i = fl.placeholder(fl.i32, [None], name="i")
        st = fl.dynamic_stitch([i], [d], name="stitch")
    with pytest.raises(FlowcError, match=r"partitions\[1\] = 2 is not in \[0, 2\)") as e:
        run(g, out, {d: np.ones(3, np.float32), p: np.array([0, 2, 1], np.int32)}, backend)
    assert "split" in str(e.value)
    with pytest.raises(FlowcError, match="negative") as e:
        run(g, st, {d: np.ones(2, np.float32), i: np.array([1, -1], np.int32)}, backend)
    assert "stitch" in str(e.value)
    with pytest.raises(FlowcError, match="prefix"):
        with g.as_default():
            fl.dynamic_partition(fl.constant(np.ones((2, 3), np.float32)),
                                 fl.constant([0, 1, 0], dtype=fl.i32), 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_route_back_through_partition_and_stitch(backend):
    r = np.random.RandomState(7)
    data = r.randn(6, 2).astype(np.float32)
    where = np.array([1, 0, 2, 1, 1, 0], np.int32)
    weights = [r.randn(*s).astype(np.float32) for s in [(2, 2), (3, 2), (1, 2)]]
    g = fl.Graph()
    with g.as_default():
        d = fl.placeholder(fl.f32, [6, 2], name="d")
        outs = fl.dynamic_partition(d, fl.constant(where), 3)
        loss = sum(fl.reduce_sum(o * o * w) for o, w in zip(outs, weights))
        (grad,) = fl.gradients(loss, [d])
    got = run(g, grad, {d: data}, backend)
    want = np.zeros_like(data)
    for k, w in enumerate(weights):
        want[where == k] = 2 * data[where == k] * w
    np.testing.assert_allclose(got, want, rtol=1e-6)


def numpy_lookup(table, ids):
    return table[ids]


def sharded(table, parts, strategy):
    if strategy == "mod":
        return [table[k::parts] for k in range(parts)]
    per, extra = divmod(len(table), parts)
    bounds = np.cumsum([0] + [per + (k < extra) for k in range(parts)])
    return [table[bounds[k]:bounds[k + 1]] for k in range(parts)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_embedding_lookup_matches_numpy(backend, strategy, parts):
    table = np.arange(11 * 4, dtype=np.float32).reshape(11, 4)
    ids = np.array([[0, 10, 3], [5, 5, 7]], np.int64)
    g = fl.Graph()
    with g.as_default():
        shards = [fl.Variable(s, name=f"emb_{k}") for k, s in enumerate(sharded(table, parts,
                                                                                  strategy))]
        x = fl.placeholder(fl.i64, [None, 3], name="ids")
        rows = fl.nn.embedding_lookup(shards, x, partition_strategy=strategy)
        init = fl.global_variables_initializer()
    assert rows.shape == (None, 3, 4) or rows.shape is None or len(rows.shape) == 3
    got = run(g, rows, {x: ids}, backend, init)
    np.testing.assert_array_equal(got, numpy_lookup(table, ids))


def test_sharded_training_on_three_devices_updates_only_the_rows_used():
    """Shards on CPU:0..2, a sparse SGD step: the same result as one unsharded table, and rows
    no id named are untouched (the gradient reaches each shard as IndexedSlices)."""
    r = np.random.RandomState(3)
    table = r.randn(12, 3).astype(np.float32)
    ids = np.array([1, 4, 4, 9, 11], np.int64)
    target = r.randn(5, 3).astype(np.float32)

    def build(parts):
        g = fl.Graph()
        with g.as_default():
            shards = []
            for k, s in enumerate(sharded(table, parts, "mod")):
                with fl.device(f"/cpu:{k % 3}"):
                    shards.append(fl.Variable(s, name=f"shard_{k}"))
            x = fl.placeholder(fl.i64, [None], name="ids")
            y = fl.nn.embedding_lookup(shards, x)
            loss = fl.reduce_sum(fl.square(y - target))
            step = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = fl.global_variables_initializer()
            reads = [s.read_value() for s in shards]
        return g, reads, x, step, init

    results = []
    for parts in (1, 3):
        g, reads, x, step, init = build(parts)
        config = fl.ConfigProto(device_count={"CPU": 3})
        with fl.Session(graph=g, config=config) as sess:
            sess.run(init)
            sess.run(step, {x: ids})
            values = sess.run(reads)
        full = np.zeros_like(table)
        for k, v in enumerate(values):
            full[k::parts] = v
        results.append(full)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-6)
    untouched = np.setdiff1d(np.arange(12), ids)
    np.testing.assert_array_equal(results[1][untouched], table[untouched])
    assert not np.allclose(results[1][ids], table[ids])
    expected = table.copy()
    np.add.at(expected, ids, -0.1 * 2 * (table[ids] - target))
    np.testing.assert_allclose(results[1], expected, rtol=1e-5, atol=1e-6)


def test_each_shard_is_read_on_its_own_device():
    g = fl.Graph()
    with g.as_default():
        shards = []
        for k in range(2):
            with fl.device(f"/cpu:{k}"):
                shards.append(fl.Variable(np.ones((4, 2), np.float32), name=f"s{k}"))
        x = fl.placeholder(fl.i64, [None], name="ids")
        fl.nn.embedding_lookup(shards, x)
    gathers = [n for n in g if n.op == "ResourceGather"]
    assert len(gathers) == 2
    assert sorted(n.attrs.get("_class", [""])[0] for n in gathers) == ["loc:@s0", "loc:@s1"]
