"""``fl.data`` datasets and iterators as graph ops, on both backends: element order and
structure, batching, repeat/take/skip/zip/range/filter/prefetch, map functions run as steps,
seeded shuffles, one-shot, initializable and reinitializable iterators, ``OutOfRangeError`` at
the end, errors, and the IR text of a dataset graph."""
import numpy as np
import pytest

import dsl as fl
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph

BACKENDS = ("interpreter", "c")


def drain(sess, fetch, limit=1000):
    """Every value ``fetch`` gives until OutOfRangeError (at most ``limit``)."""
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(fetch))
        except fl.errors.OutOfRangeError:
            return out
    raise AssertionError(f"no OutOfRangeError after {limit} elements")


X = np.arange(14, dtype=np.float32).reshape(7, 2)
Y = np.arange(7, dtype=np.int32) * 10


@pytest.mark.parametrize("backend", BACKENDS)
def test_slices_map_batch_in_order_then_out_of_range(graph, backend):
    ds = fl.data.Dataset.from_tensor_slices((X, Y))
    ds = ds.map(lambda a, b: (a * 2.0 + 1.0, b - 1)).batch(3)
    assert ds.output_types == (fl.float32, fl.int32)
    assert ds.output_shapes == ((None, 2), (None,))
    a, b = ds.make_one_shot_iterator().get_next()
    with fl.Session(backend=backend) as sess:
        got = drain(sess, [a, b])
        with pytest.raises(fl.errors.OutOfRangeError):      # stays at the end
            sess.run(a)
    assert [len(g[0]) for g in got] == [3, 3, 1]
    np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), X * 2 + 1)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), Y - 1)
    assert got[0][0].dtype == np.float32 and got[0][1].dtype == np.int32


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_elements_and_map_returning_a_dict(graph, backend):
    ds = fl.data.Dataset.from_tensor_slices({"x": X, "y": Y})
    ds = ds.map(lambda d: {"sum": fl.reduce_sum(d["x"]), "y": d["y"]})
    elem = fl.data.make_one_shot_iterator(ds).get_next()
    assert sorted(elem) == ["sum", "y"]
    with fl.Session(backend=backend) as sess:
        got = drain(sess, elem)
    np.testing.assert_allclose([g["sum"] for g in got], X.sum(1))
    np.testing.assert_array_equal([g["y"] for g in got], Y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_reads_a_variable_of_the_graph(graph, backend):
    scale = fl.Variable(3.0, name="scale")
    ds = fl.data.Dataset.from_tensor_slices(X[:, 0]).map(lambda v: v * scale)
    nxt = ds.make_one_shot_iterator().get_next()
    with fl.Session(backend=backend) as sess:
        sess.run(fl.global_variables_initializer())
        got = drain(sess, nxt)
    np.testing.assert_allclose(got, X[:, 0] * 3.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeat_take_skip_zip_range_filter_prefetch(graph, backend):
    r = fl.data.Dataset.range(10)
    evens = r.filter(lambda i: fl.equal(i % 2, 0))
    pipeline = fl.data.Dataset.zip((r.skip(2).take(5).repeat(2), evens.repeat())).prefetch(2)
    a, b = pipeline.make_one_shot_iterator().get_next()
    counted = fl.data.Dataset.range(3, 12, 4).repeat(3).batch(4, drop_remainder=True)
    c = counted.make_one_shot_iterator().get_next()
    assert c.shape == (4,) and c.dtype == fl.int64
    with fl.Session(backend=backend) as sess:
        got = drain(sess, [a, b])
        batches = drain(sess, c)
    assert [int(x) for x, _ in got] == [2, 3, 4, 5, 6] * 2
    assert [int(y) for _, y in got] == [0, 2, 4, 6, 8, 0, 2, 4, 6, 8]
    np.testing.assert_array_equal(batches, [[3, 7, 11, 3], [7, 11, 3, 7]])   # 9 made, 1 dropped


@pytest.mark.parametrize("backend", BACKENDS)
def test_shuffle_is_a_seeded_permutation_that_reshuffles_each_epoch(graph, backend):
    def orders(reshuffle):
        ds = fl.data.Dataset.range(20).shuffle(8, seed=7, reshuffle_each_iteration=reshuffle)
        nxt = ds.repeat(3).make_one_shot_iterator().get_next()
        with fl.Session(backend=backend) as sess:
            got = [int(v) for v in drain(sess, nxt)]
        return [got[0:20], got[20:40], got[40:60]]

    first, again = orders(True), orders(True)
    assert first == again                                   # deterministic for the seed
    for epoch in first:
        assert sorted(epoch) == list(range(20)) and epoch != list(range(20))
    assert first[0] != first[1] != first[2]                 # a new order each epoch
    fixed = orders(False)
    assert fixed[0] == fixed[1] == fixed[2]


def test_shuffle_order_is_the_same_on_both_backends(graph):
    nxt = fl.data.Dataset.range(30).shuffle(5, seed=3).make_one_shot_iterator().get_next()
    got = {}
    for backend in BACKENDS:
        with fl.Session(backend=backend) as sess:
            got[backend] = [int(v) for v in drain(sess, nxt)]
    assert got["interpreter"] == got["c"]
    assert sorted(got["c"]) == list(range(30))


@pytest.mark.parametrize("backend", BACKENDS)
def test_initializable_iterator_is_fed_and_restarted_each_epoch(graph, backend):
    features = fl.placeholder(fl.float32, [None, 2], name="features")
    labels = fl.placeholder(fl.int32, [None], name="labels")
    ds = fl.data.Dataset.from_tensor_slices((features, labels)).batch(4)
    it = ds.make_initializable_iterator()
    fx, fy = it.get_next()
    total = fl.reduce_sum(fx)
    with fl.Session(backend=backend) as sess:
        with pytest.raises(fl.errors.FailedPreconditionError, match="not been initialized"):
            sess.run(total)
        for epoch in range(3):
            n = 3 + epoch
            sess.run(it.initializer, {features: X[:n], labels: Y[:n]})
            sums = []
            while True:
                try:
                    sums.append(sess.run(total))
                except fl.errors.OutOfRangeError:
                    break
            assert len(sums) == (n + 3) // 4
            np.testing.assert_allclose(sum(sums), X[:n].sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_reinitializable_iterator_switches_datasets(graph, backend):
    train = fl.data.Dataset.range(5)
    valid = fl.data.Dataset.range(100, 103)
    it = fl.data.Iterator.from_structure(train.output_types, train.output_shapes)
    nxt = it.get_next()
    init_train, init_valid = it.make_initializer(train), it.make_initializer(valid)
    with fl.Session(backend=backend) as sess:
        sess.run(init_train)
        assert [int(v) for v in drain(sess, nxt)] == [0, 1, 2, 3, 4]
        sess.run(init_valid)
        assert [int(v) for v in drain(sess, nxt)] == [100, 101, 102]
    with pytest.raises(TypeError):
        it.make_initializer(fl.data.Dataset.from_tensor_slices(X))


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_loop_idiom_reads_a_dataset_in_a_compiled_step(graph, backend):
    w = fl.Variable(np.zeros((2,), np.float32), name="w")
    x, y = fl.data.Dataset.from_tensor_slices((X, Y.astype(np.float32))).repeat(2).batch(
        5).make_one_shot_iterator().get_next()
    loss = fl.reduce_mean(fl.square(fl.reduce_sum(x * w, axis=1) - y))
    train_op = fl.train.GradientDescentOptimizer(1e-3).minimize(loss)
    steps = 0
    with fl.Session(backend=backend) as sess:
        sess.run(fl.global_variables_initializer())
        while True:
            try:
                sess.run(train_op)
            except fl.errors.OutOfRangeError:
                break
            steps += 1
        assert np.all(sess.run(w) != 0)
    assert steps == 3                                       # 14 elements in batches of 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_datasets_fail_with_tf_errors(graph, backend):
    n = fl.placeholder(fl.int64, [], name="n")
    shuffled = fl.data.Dataset.range(4).shuffle(n).make_initializable_iterator()
    ragged = fl.data.Dataset.range(1, 4).map(lambda i: fl.fill(fl.reshape(fl.cast(i, fl.int32), [1]), 1.0))
    batched = ragged.batch(3).make_one_shot_iterator().get_next()
    with fl.Session(backend=backend) as sess:
        with pytest.raises(fl.errors.InvalidArgumentError, match="buffer_size"):
            sess.run(shuffled.initializer, {n: 0})
        with pytest.raises(fl.errors.InvalidArgumentError, match="different shapes"):
            sess.run(batched)


def test_the_step_reading_a_dataset_is_compiled_and_its_map_function_too(graph):
    nxt = fl.data.Dataset.from_tensor_slices(X).map(lambda v: fl.tanh(v)).batch(7) \
        .make_one_shot_iterator().get_next()
    with fl.Session() as sess:
        before = sess.compile_count
        np.testing.assert_allclose(sess.run(nxt), np.tanh(X), rtol=1e-6)
        # the main step, the one-shot iterator's dataset step, the map function
        assert sess.compile_count - before == 3


def test_dataset_graph_ir_round_trips(graph):
    ds = fl.data.Dataset.from_tensor_slices((X, Y)).shuffle(4, seed=1).map(
        lambda a, b: (a + 1.0, b)).batch(2, drop_remainder=True).prefetch(1)
    it = ds.make_initializable_iterator()
    it.get_next()
    text = print_graph(graph)
    assert "MapDataset" in text and "f_args=" in text and "IteratorGetNext" in text
    assert print_graph(parse_graph(text)) == text


def test_api_shapes_and_errors(graph):
    ds = fl.data.Dataset.from_tensor_slices(np.zeros((6, 3, 2), np.float32))
    assert ds.batch(2, drop_remainder=True).output_shapes == (2, 3, 2)
    assert ds.batch(2).output_shapes == (None, 3, 2)
    with pytest.raises(ValueError, match="different numbers of rows"):
        fl.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(TypeError, match="in a session"):
        iter(ds)
    with pytest.raises(ValueError, match="no initializer"):
        ds.make_one_shot_iterator().initializer


@pytest.mark.parametrize("backend", BACKENDS)
def test_reinitializing_mid_epoch_restarts_a_prefetched_map(graph, backend):
    n = fl.placeholder(fl.int64, [], name="n")
    it = fl.data.Dataset.range(n).map(lambda i: i * 3).prefetch(3).make_initializable_iterator()
    nxt = it.get_next()
    with fl.Session(backend=backend) as sess:
        sess.run(it.initializer, {n: 50})
        assert [int(sess.run(nxt)) for _ in range(4)] == [0, 3, 6, 9]
        sess.run(it.initializer, {n: 3})
        assert [int(v) for v in drain(sess, nxt)] == [0, 3, 6]


def test_concurrent_steps_share_one_iterator_without_losing_elements(graph):
    import threading
    nxt = fl.data.Dataset.range(400).make_one_shot_iterator().get_next()
    got, lock = [], threading.Lock()
    with fl.Session() as sess:
        sess.run(nxt)                                  # element 0, and the step compiled

        def worker():
            mine = drain(sess, nxt)
            with lock:
                got.extend(int(v) for v in mine)
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sorted(got) == list(range(1, 400))


@pytest.mark.parametrize("backend", BACKENDS)
def test_half_precision_elements_pass_through_unchanged(graph, backend):
    x = (np.arange(6) / 4).astype(np.float16).reshape(3, 2)
    nxt = fl.data.Dataset.from_tensor_slices(x).batch(3).make_one_shot_iterator().get_next()
    with fl.Session(backend=backend) as sess:
        v = sess.run(nxt)
    assert v.dtype == np.float16
    np.testing.assert_array_equal(v, x)


def test_one_shot_iterator_refuses_a_fed_placeholder(graph):
    p = fl.placeholder(fl.float32, [None], name="p")
    with pytest.raises(ValueError, match="make_initializable_iterator"):
        fl.data.Dataset.from_tensor_slices(p).batch(2).make_one_shot_iterator()


def test_a_gpu_session_reads_the_dataset_on_the_cpu_and_computes_on_the_gpu(graph):
    from compiler.options import PipelineOptions
    from compiler.passes.manager import PassContext, PassManager
    from compiler.step import make_step_graph
    from dsl.session_devices import placement_options
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    x, y = fl.data.Dataset.from_tensor_slices((X, Y.astype(np.float32))).batch(4) \
        .make_one_shot_iterator().get_next()
    w = fl.Variable(np.ones((2, 1), np.float32), name="w")
    loss = fl.reduce_mean(fl.square(fl.matmul(x, w)[:, 0] - y))
    train = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
    step = make_step_graph(graph, [], [loss.output], [train.node])
    opts = placement_options(PipelineOptions(), [gpu])
    PassManager(opts).run(step.graph, PassContext(opts))
    devices = {n.op: n.assigned_device for n in step.graph}
    assert "CPU:0" in devices["IteratorGetNext"] and "CPU:0" in devices["OneShotIterator"]
    assert devices["MatMul"] == gpu


def test_without_a_session_a_map_function_cannot_run():
    from runtime.datasets import dataset_state, get_next
    from runtime.resources import ResourceStore
    state = dataset_state(ResourceStore())
    state.define("r", "RangeDataset", {}, [], [np.int64(0), np.int64(3), np.int64(1)])
    state.define("m", "MapDataset", {"f_args": ["arg0"], "f_rets": ["out:0"],
                                     "output_types": ["i64"]}, ["r"], [])
    state.make_iterator("it", "r")
    assert int(get_next(state.store, "it", [fl.int64])[0]) == 0
    state.make_iterator("it", "m")
    with pytest.raises(fl.errors.FailedPreconditionError, match="needs a session"):
        get_next(state.store, "it", [fl.int64])
