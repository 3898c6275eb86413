"""fl.nn.sampled_softmax_loss: equal to the full softmax when every class is sampled, gradients
against finite differences (sparse for the weights), the compiled loss against the interpreter,
training that lowers the full-softmax loss, and weights sharded over two PS task processes
training exactly like one table."""
from __future__ import annotations

import numpy as np
import pytest

import dsl as fl
from cluster_fixture import Cluster
from oracle import NO_FOLDING, check_against_interpreter

C, D, B = 12, 5, 4


def _data(seed=0, num_true=1):
    rng = np.random.default_rng(seed)
    labels = np.stack([rng.choice(C, num_true, replace=False) for _ in range(B)]).astype(np.int64)
    return (rng.normal(size=(C, D)), rng.normal(size=C), rng.normal(size=(B, D)), labels)


def _full_softmax_loss(w, b, x, labels):
    logits = x @ w.T + b
    logits = logits - logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -log_p[np.arange(len(x))[:, None], labels].mean(axis=1)


def _split(table, strategy):
    if strategy == "mod":
        return [table[0::2], table[1::2]]
    half = (len(table) + 1) // 2
    return [table[:half], table[half:]]


@pytest.mark.parametrize("num_true", [1, 2])
def test_sampling_every_class_without_correction_is_the_full_softmax(graph, num_true):
    """Every class sampled, expected counts 1 (no correction), accidental hits removed: the
    logits are exactly the full softmax's, for one table and for shards split either way.
    A unique uniform sampler of all classes gives the same loss (its correction is the same
    for every class, and softmax ignores a shift)."""
    w_np, b_np, x_np, labels_np = _data(1, num_true)
    x = fl.placeholder(fl.float64, [B, D], name="x")
    labels = fl.placeholder(fl.int64, [B, num_true], name="labels")
    every_class = (fl.constant(np.arange(C, dtype=np.int64)),
                   fl.constant(np.ones((B, num_true), np.float32)),
                   fl.constant(np.ones(C, np.float32)))
    losses = {"one_table": fl.nn.sampled_softmax_loss(
        fl.constant(w_np), fl.constant(b_np), labels, x, C, C, num_true=num_true,
        sampled_values=every_class)}
    for strategy in ("mod", "div"):
        for colocate in (True, False):
            losses[f"{strategy}/colocate_matmul={colocate}"] = fl.nn.sampled_softmax_loss(
                [fl.constant(s) for s in _split(w_np, strategy)],
                [fl.constant(s) for s in _split(b_np, strategy)], labels, x, C, C,
                num_true=num_true, sampled_values=every_class, partition_strategy=strategy,
                colocate_matmul=colocate)
    sampler = fl.nn.uniform_candidate_sampler(labels, num_true, C, True, C, seed=4)
    losses["sampler"] = fl.nn.sampled_softmax_loss(fl.constant(w_np), fl.constant(b_np), labels,
                                                   x, C, C, num_true=num_true,
                                                   sampled_values=sampler)
    got = check_against_interpreter(graph, losses, {x: x_np, labels: labels_np})
    expected = _full_softmax_loss(w_np, b_np, x_np, labels_np)
    for name, value in got.items():
        np.testing.assert_allclose(value, expected, rtol=1e-10, err_msg=name)


def test_logits_are_corrected_and_accidental_hits_removed(graph):
    w_np, b_np, x_np, _ = _data(2)
    labels_np = np.array([[3], [0], [3], [7]], np.int64)
    sampled_np = np.array([3, 5, 0], np.int64)
    true_ec, samp_ec = np.full((B, 1), 0.5, np.float32), np.array([0.25, 2.0, 4.0], np.float32)
    logits, _ = fl.nn.compute_sampled_logits(
        fl.constant(w_np), fl.constant(b_np), fl.constant(labels_np), fl.constant(x_np), 3, C,
        sampled_values=(sampled_np, true_ec, samp_ec), remove_accidental_hits=True)
    with fl.Session(graph=graph) as s:
        got = s.run(logits)
    full = x_np @ w_np.T + b_np
    np.testing.assert_allclose(got[:, 0], full[np.arange(B), labels_np[:, 0]] - np.log(0.5))
    want = full[:, sampled_np] - np.log(samp_ec.astype(np.float64))
    hits = labels_np == sampled_np[None, :]
    np.testing.assert_allclose(got[:, 1:][~hits], want[~hits])
    assert np.all(got[:, 1:][hits] < -1e38)


@pytest.mark.parametrize("colocate_matmul", [True, False])
def test_gradients_match_finite_differences_and_are_sparse(graph, colocate_matmul):
    """Two shards of weights and biases, a fixed sample with a correction and an accidental
    hit: the gradient of the summed loss against central differences, for every element,
    with each shard's logits computed on the shard or from its gathered rows."""
    w_np, b_np, x_np, labels_np = _data(3)
    sample = (np.array([2, 9, labels_np[0, 0], 4], np.int64), np.full((B, 1), 0.3, np.float32),
              np.array([0.2, 0.7, 1.5, 0.4], np.float32))
    ws = [fl.placeholder(fl.float64, [None, D], name=f"w{k}") for k in range(2)]
    bs = [fl.placeholder(fl.float64, [None], name=f"b{k}") for k in range(2)]
    x = fl.placeholder(fl.float64, [B, D], name="x")
    loss = fl.reduce_sum(fl.nn.sampled_softmax_loss(ws, bs, labels_np, x, 4, C,
                                                    sampled_values=sample,
                                                    colocate_matmul=colocate_matmul))
    grads = fl.gradients(loss, ws + bs + [x])
    assert all(isinstance(g, fl.IndexedSlices) for g in grads[:4])
    values = {"w0": w_np[0::2], "w1": w_np[1::2], "b0": b_np[0::2], "b1": b_np[1::2], "x": x_np}
    phs = dict(zip(["w0", "w1", "b0", "b1", "x"], ws + bs + [x]))
    with fl.Session(graph=graph) as s:
        def run(vals):
            return s.run(loss, {phs[k]: v for k, v in vals.items()})
        fetched = s.run([[g.values, g.indices] for g in grads[:4]] + [grads[4]],
                        {phs[k]: v for k, v in values.items()})
        for name, got in zip(["w0", "w1", "b0", "b1", "x"], fetched):
            if isinstance(got, list):                      # IndexedSlices: add up the rows
                dense = np.zeros_like(values[name])
                np.add.at(dense, got[1], got[0])
                got = dense
            numeric = np.zeros_like(values[name])
            for i in np.ndindex(values[name].shape):
                plus, minus = dict(values), dict(values)
                plus[name] = values[name].copy()
                minus[name] = values[name].copy()
                plus[name][i] += 1e-6
                minus[name][i] -= 1e-6
                numeric[i] = (run(plus) - run(minus)) / 2e-6
            np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-7, err_msg=name)


def test_compiled_loss_with_the_default_sampler_matches_the_interpreter(graph):
    w_np, b_np, x_np, labels_np = _data(4)
    loss = fl.nn.sampled_softmax_loss(fl.constant(w_np.astype(np.float32)),
                                      fl.constant(b_np.astype(np.float32)), labels_np,
                                      fl.constant(x_np.astype(np.float32)), 5, C, seed=3)
    check_against_interpreter(graph, {"loss": loss}, rtol=1e-5, atol=1e-6)


def test_training_with_sampled_softmax_lowers_the_full_softmax_loss(graph):
    """200 classes, 20 sampled per step (log-uniform): SGD on the sampled loss lowers the full
    softmax cross entropy on the training data by more than half."""
    classes, dim, n = 200, 16, 256
    rng = np.random.default_rng(7)
    teacher = rng.normal(size=(dim, classes)).astype(np.float32)
    feats = rng.normal(size=(n, dim)).astype(np.float32)
    labels_np = np.argmax(feats @ teacher, axis=1).astype(np.int64)
    x = fl.placeholder(fl.float32, [None, dim], name="x")
    y = fl.placeholder(fl.int64, [None], name="y")
    w = fl.Variable(fl.zeros_initializer(), shape=[classes, dim], name="softmax_w")
    b = fl.Variable(fl.zeros_initializer(), shape=[classes], name="softmax_b")
    sampled = fl.reduce_mean(fl.nn.sampled_softmax_loss(w, b, fl.reshape(y, [-1, 1]), x, 20,
                                                        classes, seed=1))
    full = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=fl.matmul(x, w, transpose_b=True) + b))
    step = fl.train.AdagradOptimizer(0.5).minimize(sampled)
    feed = {x: feats, y: labels_np}
    with fl.Session(graph=graph) as s:
        s.run(fl.global_variables_initializer())
        before = s.run(full, feed)
        for _ in range(150):
            s.run(step, feed)
        after = s.run(full, feed)
    assert before == pytest.approx(np.log(classes), rel=1e-5)
    assert after < 0.5 * before, (before, after)


def _train_sampled_softmax(target, sharded: bool, steps: int):
    """Build and train a small sampled-softmax model in a fresh graph; returns the table."""
    rng = np.random.default_rng(21)
    table, bias = rng.normal(size=(11, 4)).astype(np.float32), np.zeros(11, np.float32)
    feats = rng.normal(size=(6, 4)).astype(np.float32)
    labels = rng.integers(0, 11, (6, 1)).astype(np.int64)
    with fl.Graph().as_default():
        if sharded:
            ws, bs = [], []
            for k in range(2):
                with fl.device(f"/job:ps/task:{k}"):
                    ws.append(fl.Variable(table[k::2], name=f"w_shard{k}"))
                    bs.append(fl.Variable(bias[k::2], name=f"b_shard{k}"))
        else:
            ws, bs = fl.Variable(table, name="w"), fl.Variable(bias, name="b")
        with fl.device("/job:worker/task:0" if sharded else None):
            x = fl.placeholder(fl.float32, [None, 4], name="x")
            loss = fl.reduce_mean(fl.nn.sampled_softmax_loss(ws, bs, labels, x, 5, 11, seed=8))
            step = fl.train.GradientDescentOptimizer(0.3).minimize(loss)
        with fl.Session(target) as sess:
            sess.run(fl.global_variables_initializer())
            for _ in range(steps):
                sess.run(step, {x: feats})
            if not sharded:
                return sess.run([ws, bs])
            w_shards, b_shards = sess.run([ws, bs])
    w, b = np.zeros_like(table), np.zeros_like(bias)
    for k in range(2):
        w[k::2], b[k::2] = w_shards[k], b_shards[k]
    return [w, b]


def test_weights_sharded_over_two_ps_tasks_train_like_one_table(tmp_path):
    """The softmax weights and biases split over two PS task processes ("mod"): each shard's
    rows are gathered and updated on its own task, and three steps leave exactly the values
    one local table gets (the sampler draws the same candidates in both)."""
    local = _train_sampled_softmax("", sharded=False, steps=3)
    c = Cluster(tmp_path, {"ps": 2, "worker": 1})
    try:
        remote = _train_sampled_softmax(c.target(), sharded=True, steps=3)
        for k in range(2):
            assert f"w_shard{k}" in c.wait_ready("ps", k)["variables"]
    finally:
        c.stop()
    assert not np.allclose(local[0], _train_sampled_softmax("", sharded=False, steps=0)[0])
    np.testing.assert_allclose(remote[0], local[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(remote[1], local[1], rtol=1e-5, atol=1e-6)


def _traffic_of_sampled_steps(cluster, colocate_matmul: bool, steps: int = 3):
    """Bytes the PS tasks and the worker sent each other per sampled-softmax training step
    (RecvTensor responses), from the servers' traffic counters."""
    rng = np.random.default_rng(5)
    with fl.Graph().as_default():
        ws, bs = [], []
        for k in range(2):
            with fl.device(f"/job:ps/task:{k}"):
                ws.append(fl.Variable(rng.normal(size=(BIG_C // 2, BIG_D)).astype(np.float32),
                                      name=f"w{k}"))
                bs.append(fl.Variable(np.zeros(BIG_C // 2, np.float32), name=f"b{k}"))
        with fl.device("/job:worker/task:0"):
            x = fl.placeholder(fl.float32, [BIG_B, BIG_D], name="x")
            y = fl.placeholder(fl.int64, [BIG_B, 1], name="y")
            loss = fl.reduce_mean(fl.nn.sampled_softmax_loss(
                ws, bs, y, x, BIG_S, BIG_C, seed=2, colocate_matmul=colocate_matmul))
            step = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
        feed = {x: rng.normal(size=(BIG_B, BIG_D)).astype(np.float32),
                y: rng.integers(0, BIG_C, (BIG_B, 1))}

        def sent(job, tasks):
            return sum(cluster.wait_ready(job, k)["traffic"].get("RecvTensor", {})
                       .get("response_bytes", 0) for k in range(tasks))

        with fl.Session(cluster.target()) as sess:
            sess.run(fl.global_variables_initializer())
            sess.run(step, feed)
            before = sent("ps", 2), sent("worker", 1)
            for _ in range(steps):
                sess.run(step, feed)
            after = sent("ps", 2), sent("worker", 1)
    return [(a - b) / steps for a, b in zip(after, before)]


BIG_C, BIG_D, BIG_B, BIG_S = 4000, 64, 8, 24


def test_a_sampled_step_moves_rows_or_logits_not_the_table(tmp_path):
    """4,000 classes x 64 over two PS tasks, 8 examples, 24 sampled, as the servers' traffic
    counters (the ``Status`` reply) show per step. Rows: the PS tasks send the 32 gathered rows
    of weights and biases and get their sparse gradient back (plus frame headers). Matmul on
    the shards: they receive the inputs and the logits' gradient and send each shard's logits
    [rows, batch] (the inputs are fed, so no gradient of theirs); the rows' gradient never
    leaves them."""
    c = Cluster(tmp_path, {"ps": 2, "worker": 1})
    try:
        rows_mode = _traffic_of_sampled_steps(c, colocate_matmul=False)
        logits_mode = _traffic_of_sampled_steps(c, colocate_matmul=True)
        traffic = c.wait_ready("worker", 0)["traffic"]
    finally:
        c.stop()
    n = BIG_B + BIG_S
    rows_bytes = n * (BIG_D + 1) * 4
    assert rows_bytes <= rows_mode[0] < rows_bytes + 2048, rows_mode
    assert rows_bytes <= rows_mode[1] < rows_bytes + 2048, rows_mode     # sparse gradients
    logits_bytes, inputs_bytes = n * BIG_B * 4, 2 * BIG_B * BIG_D * 4
    assert logits_bytes <= logits_mode[0] < logits_bytes + 2048, logits_mode
    assert logits_bytes + inputs_bytes <= logits_mode[1] < logits_bytes + inputs_bytes + 2048, \
        logits_mode
    assert max(rows_mode + logits_mode) < BIG_C * BIG_D * 4 / 20
    assert traffic["RunStep"]["calls"] >= 8 and traffic["RunStep"]["request_bytes"] > 0
