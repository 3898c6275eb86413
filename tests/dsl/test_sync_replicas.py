"""Gradient accumulators and ``fl.train.SyncReplicasOptimizer``.

The accumulator ops run in both backends (the interpreter is the oracle: the compiled C kernels
must give the same results on the same sequence of steps); the optimizer is tested with real
task processes on loopback (``Cluster``): synchronous replicas against one process with the
combined batch, a late backup worker whose gradients are the ones dropped, and the
end-of-input protocol. Every wait is bounded, and no test asserts on time.
"""
import threading

import numpy as np
import pytest

import dsl as fl
from cluster_fixture import Cluster
from compiler.errors import ShapeError

BACKENDS = ("interpreter", "c")
JOIN_S = 120                      # bound on every thread join (a hang fails, it never blocks)


# --- the ops, in one process -------------------------------------------------------------------
def _accumulator_graph(max_accumulated=0):
    g = fl.Graph()
    with g.as_default():
        acc = fl.ConditionalAccumulator(fl.float32, [2], shared_name="acc",
                                        max_accumulated=max_accumulated)
        step = fl.placeholder(fl.int64, [], name="step")
        grad = fl.placeholder(fl.float32, [2], name="grad")
        ops = dict(apply=acc.apply_grad(grad, step), take=acc.take_grad(2),
                   take1=acc.take_grad(1), count=acc.num_accumulated(),
                   counts=acc.dropped_counts(), close=acc.close(),
                   set_step=acc.set_global_step(fl.constant(5, fl.int64)))
    return g, step, grad, ops


def _drop_sequence(backend, max_accumulated):
    """Applies fresh, stale and surplus gradients; returns what a user can fetch after each."""
    g, step, grad, ops = _accumulator_graph(max_accumulated)
    seen = []
    with fl.Session(graph=g, backend=backend) as sess:
        for s, v in ((0, [1, 2]), (0, [3, 4]), (0, [5, 9])):
            sess.run(ops["apply"], {step: s, grad: v})
        seen.append([sess.run(ops["count"]), sess.run(ops["take"])])  # the mean; step 0 -> 1
        sess.run(ops["apply"], {step: 0, grad: [100, 100]})         # stale: computed for step 0
        sess.run(ops["apply"], {step: 1, grad: [7, 8]})
        seen.append([sess.run(ops["count"]), sess.run(ops["take1"]), sess.run(ops["counts"])])
        sess.run(ops["set_step"])                                    # step 5: 2..4 are stale
        sess.run(ops["apply"], {step: 4, grad: [1, 1]})
        sess.run(ops["apply"], {step: 6, grad: [2, 2]})              # ahead: kept
        seen.append(sess.run([ops["count"], ops["counts"]]))
    return seen


@pytest.mark.parametrize("max_accumulated", [0, 2])
def test_accumulator_averages_fresh_gradients_and_counts_the_dropped_ones(max_accumulated):
    runs = {b: _drop_sequence(b, max_accumulated) for b in BACKENDS}
    (count0, mean0), (count1, mean1, counts1), (count2, counts2) = runs["interpreter"]
    if max_accumulated == 0:            # TensorFlow's rule: every fresh gradient counts
        assert count0 == 3
        np.testing.assert_allclose(mean0, [3.0, 5.0])
        dropped = 0
    else:                               # the first two of the step; the third is dropped
        assert count0 == 2
        np.testing.assert_allclose(mean0, [2.0, 3.0])
        dropped = 1
    assert count1 == 1
    np.testing.assert_allclose(mean1, [7.0, 8.0])
    assert [int(c) for c in counts1] == [dropped, 1]
    assert count2 == 1 and [int(c) for c in counts2] == [dropped, 2]
    c = runs["c"]                       # the compiled kernels agree with the oracle
    for got, want in zip(c, runs["interpreter"]):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a, dtype=object).tolist(),
                                          np.asarray(b, dtype=object).tolist())


@pytest.mark.parametrize("backend", BACKENDS)
def test_take_waits_for_num_required_and_times_out_naming_the_node(backend):
    g, step, grad, ops = _accumulator_graph()
    with fl.Session(graph=g, backend=backend) as sess:
        sess.run(ops["apply"], {step: 0, grad: [1, 1]})
        with pytest.raises(fl.DeadlineExceededError) as err:
            sess.run(ops["take"], options=fl.RunOptions(timeout_in_ms=150))
        assert ops["take"].op.name in str(err.value)
        assert "waiting for 2 gradient(s)" in str(err.value) and "holds 1" in str(err.value)
        assert sess.run(ops["count"]) == 1                    # a timed-out take takes nothing

        got = []
        taker = threading.Thread(target=lambda: got.append(sess.run(ops["take"])))
        taker.start()                                         # blocks until a second gradient
        sess.run(ops["apply"], {step: 0, grad: [3, 5]})
        taker.join(JOIN_S)
        assert not taker.is_alive()
        np.testing.assert_allclose(got[0], [2.0, 3.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_closing_ends_a_waiting_take_and_refuses_later_gradients(backend):
    g, step, grad, ops = _accumulator_graph()
    with fl.Session(graph=g, backend=backend) as sess:
        errors = []

        def take():
            try:
                sess.run(ops["take"])
            except fl.OutOfRangeError as e:
                errors.append(e)

        taker = threading.Thread(target=take)
        taker.start()
        sess.run(ops["close"])
        taker.join(JOIN_S)
        assert not taker.is_alive() and len(errors) == 1 and "is closed" in str(errors[0])
        with pytest.raises(fl.AbortedError, match="is closed"):
            sess.run(ops["apply"], {step: 0, grad: [1, 1]})


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_accumulator_averages_rows(backend):
    g = fl.Graph()
    with g.as_default():
        acc = fl.SparseConditionalAccumulator(fl.float32, [5, 2], max_accumulated=2)
        idx = fl.placeholder(fl.int32, [None], name="idx")
        vals = fl.placeholder(fl.float32, [None, 2], name="vals")
        step = fl.placeholder(fl.int64, [], name="step")
        apply = acc.apply_grad(idx, vals, step)
        take = acc.take_grad(2)
        counts = acc.dropped_counts()
    with fl.Session(graph=g, backend=backend) as sess:
        sess.run(apply, {idx: [1, 3], vals: [[1, 1], [2, 2]], step: 0})
        sess.run(apply, {idx: [3, 0, 3], vals: [[4, 4], [5, 5], [6, 6]], step: 0})
        sess.run(apply, {idx: [4], vals: [[9, 9]], step: 0})          # a third: dropped
        rows, mean, shape = sess.run(take)
        np.testing.assert_array_equal(rows, [0, 1, 3])
        np.testing.assert_allclose(mean, [[2.5, 2.5], [0.5, 0.5], [6.0, 6.0]])
        np.testing.assert_array_equal(shape, [5, 2])
        sess.run(apply, {idx: [2], vals: [[1, 1]], step: 0})          # stale
        assert [int(c) for c in sess.run(counts)] == [1, 1]
        with pytest.raises(fl.InvalidArgumentError, match="row index 7 is out of range"):
            sess.run(apply, {idx: [7], vals: [[1, 1]], step: 1})


@pytest.mark.parametrize("backend", BACKENDS)
def test_sync_replicas_keeps_an_embedding_update_sparse(backend):
    """An embedding's IndexedSlices gradient goes through a sparse accumulator: one replica
    (m = n = 1) gives plain SGD's table, and rows no step used are untouched."""
    table0 = np.arange(12, dtype=np.float32).reshape(6, 2)
    ids = [np.int32([0, 2, 2]), np.int32([5, 0])]
    results = []
    for sync in (False, True):
        g = fl.Graph()
        with g.as_default():
            table = fl.Variable(table0, name="table")
            x = fl.placeholder(fl.int32, [None], name="ids")
            loss = fl.reduce_sum(fl.square(fl.nn.embedding_lookup([table], x)))
            gs = fl.train.get_or_create_global_step()
            opt = fl.train.GradientDescentOptimizer(0.1)
            if sync:
                opt = fl.train.SyncReplicasOptimizer(opt, 1)
            train = opt.minimize(loss, global_step=gs)
            init = fl.global_variables_initializer()
        with fl.Session(graph=g, backend=backend) as sess:
            sess.run(init)
            threads = []
            if sync:
                sess.run(opt.local_step_init_op)
                threads = opt.start_chief(sess)
                assert "SparseConditionalAccumulator" in {n.op for n in g}
            for batch in ids:
                sess.run(train, {x: batch})
            results.append(sess.run(table))
            if sync:
                sess.run(opt.end_of_input_op)
                for t in threads:
                    t.join(JOIN_S)
                assert not any(t.is_alive() for t in threads)
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
    np.testing.assert_array_equal(results[1][[1, 3, 4]], table0[[1, 3, 4]])


def test_accumulator_graph_errors_name_the_node():
    g = fl.Graph()
    with g.as_default():
        acc = fl.ConditionalAccumulator(fl.float32, [2], max_accumulated=2)
        with pytest.raises(ShapeError, match="ApplyGradient.*shape \\[3\\]; the accumulator "
                                             "holds \\[2\\]"):
            acc.apply_grad(np.zeros([3], np.float32), 0)
        with pytest.raises(ShapeError, match="greedy_take.*at most 2 gradients a step"):
            acc.take_grad(3, name="greedy_take")
        with pytest.raises(ShapeError, match="num_required must be at least 1"):
            acc.take_grad(0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_of_another_shape_is_refused_at_run_time(backend):
    g = fl.Graph()
    with g.as_default():
        acc = fl.ConditionalAccumulator(fl.float32, [None])
        grad = fl.placeholder(fl.float32, [None], name="grad")
        apply = acc.apply_grad(grad, 0)
        count = acc.num_accumulated()
    with fl.Session(graph=g, backend=backend) as sess:
        sess.run(apply, {grad: [1, 2, 3]})
        with pytest.raises(fl.InvalidArgumentError, match="shape \\[3\\] this step, got \\[2\\]"):
            sess.run(apply, {grad: [1, 2]})
        assert sess.run(count) == 1


def test_sync_replicas_arguments_are_checked():
    sgd = fl.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="replicas_to_aggregate"):
        fl.train.SyncReplicasOptimizer(sgd, replicas_to_aggregate=3, total_num_replicas=2)
    with pytest.raises(ValueError, match="replica_id 2"):
        fl.train.SyncReplicasOptimizer(sgd, 2, 2, replica_id=2)
    with pytest.raises(TypeError):
        fl.train.SyncReplicasOptimizer("sgd", 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_replica_in_one_process_and_a_chief_that_stops(backend):
    """m = n = 1 in one session: each step applies the gradient once (plain SGD's result);
    when the coordinator stops the chief, its queue runner closes everything and the
    replica's next step fails instead of waiting."""
    g = fl.Graph()
    with g.as_default():
        w = fl.Variable(np.zeros([3], np.float32), name="w")
        x = fl.placeholder(fl.float32, [3], name="x")
        gs = fl.train.get_or_create_global_step()
        opt = fl.train.SyncReplicasOptimizer(fl.train.GradientDescentOptimizer(0.5), 1)
        train = opt.minimize(fl.reduce_sum(w * x), global_step=gs)
        init = fl.global_variables_initializer()
    with fl.Session(graph=g, backend=backend) as sess:
        sess.run(init)
        sess.run(opt.local_step_init_op)
        coord = fl.train.Coordinator()
        threads = opt.start_chief(sess, coord)
        for s in range(3):
            sess.run(train, {x: np.float32([1, 2, 3]) * (s + 1)})
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=JOIN_S)
        with pytest.raises((fl.OutOfRangeError, fl.AbortedError), match="is closed"):
            sess.run(train, {x: np.float32([1, 1, 1])})
        np.testing.assert_allclose(sess.run(w), [-3.0, -6.0, -9.0])
        assert sess.run(gs) == 3 and sess.run(opt.local_step.value()) == 3


# --- real task processes -----------------------------------------------------------------------
def _linear_replica(k, m, n, lr):
    """Replica ``k``'s graph: a linear model on the PS task, its gradients computed on worker
    ``k`` and aggregated by a SyncReplicasOptimizer."""
    with fl.device("/job:ps/task:0"):
        w = fl.Variable(np.zeros([3, 1], np.float32), name="w")
        b = fl.Variable(np.zeros([1], np.float32), name="b")
        gs = fl.train.get_or_create_global_step()
    with fl.device(f"/job:worker/task:{k}"):
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        y = fl.placeholder(fl.float32, [None, 1], name="y")
        loss = fl.reduce_mean(fl.square(fl.matmul(x, w) + b - y))
        opt = fl.train.SyncReplicasOptimizer(fl.train.GradientDescentOptimizer(lr), m, n,
                                             replica_id=k)
        train = opt.minimize(loss, global_step=gs)
    return dict(w=w, b=b, gs=gs, x=x, y=y, train=train, opt=opt,
                init=fl.global_variables_initializer())


def _replicas(cluster, build, n):
    reps, sessions = [], []
    for k in range(n):
        g = fl.Graph()
        with g.as_default():
            reps.append(build(k))
        sessions.append(fl.Session(cluster.target("worker", k), graph=g))
    return reps, sessions


def _start(reps, sessions):
    """The chief (replica 0) initializes, every replica sets its local step, the chief's
    sync loop starts."""
    sessions[0].run(reps[0]["init"])
    for r, s in zip(reps, sessions):
        s.run(r["opt"].local_step_init_op)
    return reps[0]["opt"].start_chief(sessions[0])


def _run_threads(targets):
    errors = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as e:              # noqa: BLE001  (reported below)
                errors.append(e)
        return run

    threads = [threading.Thread(target=guard(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads), "a replica did not finish"
    assert not errors, errors


def _stop(reps, sessions, chief_threads):
    sessions[0].run(reps[0]["opt"].end_of_input_op)
    for t in chief_threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in chief_threads), "the chief's sync loop did not stop"
    for s in sessions:
        s.close()


def test_two_synchronous_replicas_equal_one_process_with_twice_the_batch(tmp_path):
    rng = np.random.default_rng(3)
    steps, batch = 4, 8
    data = rng.normal(size=(steps, 2, batch, 3)).astype(np.float32)
    labels = (data @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)

    g = fl.Graph()                                   # the reference: one process, 2x batch
    with g.as_default():
        w = fl.Variable(np.zeros([3, 1], np.float32), name="w")
        b = fl.Variable(np.zeros([1], np.float32), name="b")
        x = fl.placeholder(fl.float32, [None, 3])
        y = fl.placeholder(fl.float32, [None, 1])
        loss = fl.reduce_mean(fl.square(fl.matmul(x, w) + b - y))
        train = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = fl.global_variables_initializer()
    with fl.Session(graph=g) as sess:
        sess.run(init)
        for s in range(steps):
            sess.run(train, {x: data[s].reshape(-1, 3), y: labels[s].reshape(-1, 1)})
        want_w, want_b = sess.run([w, b])

    c = Cluster(tmp_path, {"ps": 1, "worker": 2})
    try:
        reps, sessions = _replicas(c, lambda k: _linear_replica(k, 2, 2, 0.1), 2)
        chief = _start(reps, sessions)

        def work(k):
            def run():
                r = reps[k]
                for s in range(steps):
                    sessions[k].run(r["train"], {r["x"]: data[s, k], r["y"]: labels[s, k]})
            return run

        _run_threads([work(0), work(1)])
        r = reps[1]
        got_w, got_b, step, dropped, stale = sessions[1].run(
            [r["w"], r["b"], r["gs"], r["opt"].num_dropped_gradients,
             r["opt"].num_stale_gradients])
        np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_b, want_b, rtol=1e-5, atol=1e-6)
        assert step == steps and dropped == 0 and stale == 0
        _stop(reps, sessions, chief)
    finally:
        c.stop()


def _one_hot_replica(k, m, n):
    """Loss ``sum(w * x)``: replica k feeds ``x = e_k``, so its gradient is ``e_k`` and, with a
    learning rate of 1, ``-w[k] * m`` counts how many of its gradients were applied."""
    with fl.device("/job:ps/task:0"):
        w = fl.Variable(np.zeros([n], np.float32), name="w")
        gs = fl.train.get_or_create_global_step()
    with fl.device(f"/job:worker/task:{k}"):
        x = fl.placeholder(fl.float32, [n], name="x")
        opt = fl.train.SyncReplicasOptimizer(fl.train.GradientDescentOptimizer(1.0), m, n,
                                             replica_id=k)
        train = opt.minimize(fl.reduce_sum(w * x), global_step=gs)
    return dict(w=w, gs=gs, x=x, train=train, opt=opt, init=fl.global_variables_initializer())


def test_a_late_backup_worker_has_its_gradients_dropped(tmp_path):
    """n = 3 replicas, m = 2: replica 2 starts each step only after the step it computes for
    has been applied (a straggler, ordered by events instead of sleeps), so each of its
    gradients must be the one left out, and the fast two are never held up by it."""
    steps = 4
    c = Cluster(tmp_path, {"ps": 1, "worker": 3})
    try:
        reps, sessions = _replicas(c, lambda k: _one_hot_replica(k, 2, 3), 3)
        chief = _start(reps, sessions)
        applied = [threading.Event() for _ in range(steps)]     # update s+1 is in
        straggled = [threading.Event() for _ in range(steps)]   # the straggler's step s ran
        eye = np.eye(3, dtype=np.float32)

        def fast(k):
            def run():
                r = reps[k]
                for s in range(steps):
                    if s > 0 and not straggled[s - 1].wait(JOIN_S):
                        raise TimeoutError("the straggler never ran")
                    sessions[k].run(r["train"], {r["x"]: eye[k]})
                    applied[s].set()        # its token came: update s+1 is applied
            return run

        def straggler():
            r = reps[2]
            for s in range(steps):
                if not applied[s].wait(JOIN_S):
                    raise TimeoutError("the fast replicas never finished a step")
                sessions[2].run(r["train"], {r["x"]: eye[2]})
                straggled[s].set()

        _run_threads([fast(0), fast(1), straggler])
        r = reps[0]
        w, step, dropped, stale = sessions[0].run(
            [r["w"], r["gs"], r["opt"].num_dropped_gradients, r["opt"].num_stale_gradients])
        assert step == steps
        np.testing.assert_array_equal(w, [-steps / 2, -steps / 2, 0.0])  # never the straggler's
        assert dropped + stale == steps and stale == steps
        _stop(reps, sessions, chief)
    finally:
        c.stop()


def test_replicas_with_different_amounts_of_input_all_end(tmp_path):
    """Replica 0 has 3 batches, replica 1 has 6 (m = n = 2). When replica 0 runs out it runs
    ``end_of_input_op``: replica 1, waiting for a step that can no longer complete, and the
    chief's sync loop both end, and exactly the 3 complete steps were applied."""
    c = Cluster(tmp_path, {"ps": 1, "worker": 2})
    try:
        reps, sessions = _replicas(c, lambda k: _one_hot_replica(k, 2, 2), 2)
        chief = _start(reps, sessions)
        eye = np.eye(2, dtype=np.float32)
        ended = {}

        def work(k, batches):
            def run():
                r = reps[k]
                done = 0
                try:
                    for _ in range(batches):
                        sessions[k].run(r["train"], {r["x"]: eye[k]})
                        done += 1
                except (fl.OutOfRangeError, fl.AbortedError) as e:
                    ended[k] = (done, type(e).__name__)
                    return
                sessions[k].run(r["opt"].end_of_input_op)
                ended[k] = (done, "ran out")
            return run

        _run_threads([work(0, 3), work(1, 6)])
        for t in chief:
            t.join(JOIN_S)
        assert not any(t.is_alive() for t in chief)
        assert ended[0] == (3, "ran out")
        # Its 4th step waited for a token (OutOfRange) or began after the close (Aborted).
        # (Its 3rd can end so too, applied but without its token, if replica 0's close
        # overtakes the chief putting that token in its queue: the tokens of a step go into
        # the queues one after the other.)
        assert ended[1][0] in (2, 3) and ended[1][1] in ("OutOfRangeError", "AbortedError")
        r = reps[0]
        w, step = sessions[0].run([r["w"], r["gs"]])
        assert step == 3
        np.testing.assert_array_equal(w, [-1.5, -1.5])
        for s in sessions:
            s.close()
    finally:
        c.stop()
