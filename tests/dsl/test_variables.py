"""Resource variables in both backends: state that outlives steps, updates in place, errors
that name the variable and leave it unchanged, and one store per session."""
import numpy as np
import pytest

import dsl as fl
from compiler.errors import ExecutionError, ShapeError
from runtime.errors import FlowcError, RuntimeExecutionError

BACKENDS = ("interpreter", "c")
STEP_ERRORS = (ExecutionError, RuntimeExecutionError)


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_persists_across_runs_and_sessions_are_separate(graph, backend):
    v = fl.Variable(np.array([1.0, 2.0], np.float32), name="v")
    inc = v.assign_add([0.5, 0.5])
    dec = v.assign_sub(fl.constant([1.0, 1.0]))
    init = fl.global_variables_initializer()
    with fl.Session(backend=backend) as s:
        s.run(init)
        np.testing.assert_array_equal(s.run(inc), [1.5, 2.5])
        np.testing.assert_array_equal(s.run(inc), [2.0, 3.0])
        np.testing.assert_array_equal(s.run(dec), [1.0, 2.0])
        np.testing.assert_array_equal(s.run(v), [1.0, 2.0])         # fetching a variable
        s.run(v.assign([7.0, 8.0], read_value=False))
        np.testing.assert_array_equal(s.run(v.read_value()), [7.0, 8.0])
        assert s.run(v.is_initialized())
    with fl.Session(backend=backend) as s:                          # a new session: fresh state
        assert not s.run(v.is_initialized())
        with pytest.raises(STEP_ERRORS, match="variable 'v' is not initialized"):
            s.run(v.value() * 2.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_see_the_value_before_later_updates_in_one_step(graph, backend):
    v = fl.Variable(fl.constant(3.0), name="v")
    before = v.value() * 1.0
    update = v.assign_add(1.0, read_value=False)
    with fl.Session(backend=backend) as s:
        s.run(v.initializer)
        got, _ = s.run([before, update])
        assert got == 3.0 and s.run(v) == 4.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_and_scatter_touch_only_the_rows_used(graph, backend):
    table = fl.Variable(np.arange(12, dtype=np.float64).reshape(4, 3), name="table")
    ids = fl.placeholder(fl.int32, [None], name="ids")
    rows = table.sparse_read(ids)
    upd = fl.placeholder(fl.float64, [None, 3], name="upd")
    add = fl.scatter_add(table, ids, upd)
    sub = fl.scatter_sub(table, ids, upd)
    put = fl.scatter_update(table, ids, upd)
    with fl.Session(backend=backend) as s:
        s.run(table.initializer)
        np.testing.assert_array_equal(s.run(rows, {ids: [3, 0, 3]}),
                                      np.arange(12.0).reshape(4, 3)[[3, 0, 3]])
        s.run(add, {ids: [1, 1], upd: np.ones((2, 3))})               # repeated ids add up
        want = np.arange(12.0).reshape(4, 3)
        want[1] += 2
        np.testing.assert_array_equal(s.run(table), want)
        s.run(sub, {ids: [2], upd: np.full((1, 3), 0.5)})
        want[2] -= 0.5
        s.run(put, {ids: [0], upd: [[9.0, 9.0, 9.0]]})
        want[0] = 9
        np.testing.assert_array_equal(s.run(table), want)
        for op in (add, sub, put):                                    # a bad index: no change
            with pytest.raises(STEP_ERRORS, match=r"indices\[1\] = 4 is not in \[0, 4\).*'table'"):
                s.run(op, {ids: [0, 4], upd: np.ones((2, 3))})
            np.testing.assert_array_equal(s.run(table), want)
        with pytest.raises(STEP_ERRORS, match=r"indices\[0\] = -1"):
            s.run(rows, {ids: [-1]})


@pytest.mark.parametrize("backend", BACKENDS)
def test_assigning_a_value_of_the_wrong_shape_is_refused(graph, backend):
    v = fl.Variable(np.zeros([2, 2], np.float32), name="w")
    x = fl.placeholder(fl.float32, [None, 2], name="x")
    assign = v.assign(x, read_value=False)
    with fl.Session(backend=backend) as s:
        s.run(v.initializer)
        with pytest.raises(STEP_ERRORS, match="w"):
            s.run(assign, {x: np.ones([3, 2], np.float32)})
        np.testing.assert_array_equal(s.run(v), np.zeros([2, 2]))
    with pytest.raises(ShapeError, match="does not fit variable 'w'"):
        v.assign(np.zeros([3], np.float32))


def test_backends_agree_on_a_training_like_step(graph):
    """Initializers from Philox, reads, gradient, in-place SGD: identical in both backends."""
    w = fl.Variable(fl.glorot_uniform_initializer(seed=3), shape=[4, 2], name="w")
    b = fl.Variable(fl.zeros_initializer(), shape=[2], name="b")
    x = fl.placeholder(fl.float32, [None, 4], name="x")
    loss = fl.reduce_sum(fl.square(fl.matmul(x, w) + b))
    gw, gb = fl.gradients(loss, [w, b])
    step = fl.group(w.assign_sub(0.01 * gw), b.assign_sub(0.01 * gb))
    init = fl.global_variables_initializer()
    xv = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    results = {}
    for backend in BACKENDS:
        with fl.Session(backend=backend) as s:
            s.run(init)
            losses = [s.run([loss, step], {x: xv})[0] for _ in range(4)]
            results[backend] = (losses, s.run(w), s.run(b))
    for a, b_ in zip(results["interpreter"], results["c"]):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-6)
    assert results["c"][0][-1] < results["c"][0][0]


def test_variables_are_collected_and_named_like_tensorflow(graph):
    w = fl.Variable(fl.ones_initializer(), shape=[2], name="w")
    frozen = fl.Variable(1.0, trainable=False, name="step")
    assert w.name == "w:0" and w.op.type == "VarHandleOp" and w.initializer.name == "w/Assign"
    assert fl.global_variables() == [w, frozen] and fl.trainable_variables() == [w]
    assert w.shape == (2,) and w.dtype == fl.float32
    with pytest.raises(ValueError, match="needs a shape"):
        fl.Variable(fl.zeros_initializer())


def test_a_store_refuses_a_variable_of_another_dtype(graph):
    with fl.Session() as s:
        s.store.variable("v", fl.float64, (2,))
        fl.Variable(np.zeros(2, np.float32), name="v")
        with pytest.raises(FlowcError, match="exists with dtype f64"):
            s.run(fl.global_variables_initializer())


def test_initializers_match_their_definitions(graph):
    shape = [300, 200]
    inits = {"glorot_uniform": fl.glorot_uniform_initializer(seed=1),
             "glorot_normal": fl.glorot_normal_initializer(seed=1),
             "uniform": fl.random_uniform_initializer(-2.0, 3.0, seed=2),
             "normal": fl.random_normal_initializer(1.0, 2.0, seed=2),
             "truncated": fl.truncated_normal_initializer(0.0, 0.5, seed=2),
             "const": fl.constant_initializer(0.25), "zeros": fl.zeros_initializer(),
             "ones": fl.ones_initializer()}
    vars_ = {k: fl.Variable(i, shape=shape, name=k) for k, i in inits.items()}
    with fl.Session() as s:
        s.run(fl.global_variables_initializer())
        got = {k: s.run(v) for k, v in vars_.items()}
    limit = np.sqrt(6 / 500)
    assert np.abs(got["glorot_uniform"]).max() <= limit and got["glorot_uniform"].std() > limit / 2
    assert abs(got["glorot_normal"].std() - np.sqrt(2 / 500)) < 0.1 * np.sqrt(2 / 500)
    assert got["uniform"].min() >= -2 and got["uniform"].max() < 3
    assert abs(got["normal"].mean() - 1) < 0.05 and abs(got["normal"].std() - 2) < 0.05
    assert np.abs(got["truncated"]).max() < 1.0
    assert (got["const"] == 0.25).all() and (got["zeros"] == 0).all() and (got["ones"] == 1).all()


def test_raw_variables_and_queues_without_shared_names_are_distinct():
    """An empty shared_name (the attr's default, written '' in the op's signature) falls back
    to the node's name: two raw VarHandleOps, or two FIFOQueueV2s, are two resources."""
    from compiler.ops.queue import queue_key
    from compiler.ops.state import variable_key
    from dsl.ops import apply_op
    g = fl.Graph()
    with g.as_default():
        a = apply_op("VarHandleOp", [], {"dtype": fl.float32, "shape": [2]}, name="a")
        b = apply_op("VarHandleOp", [], {"dtype": fl.float32, "shape": [2]}, name="b")
        q1 = apply_op("FIFOQueueV2", [], {"component_types": [fl.float32]}, name="q1")
        q2 = apply_op("FIFOQueueV2", [], {"component_types": [fl.float32]}, name="q2")
    assert a.op.node.attrs["shared_name"] == ""
    assert variable_key(a.op.node) == "a" and variable_key(b.op.node) == "b"
    assert queue_key(q1.op.node) == "q1" and queue_key(q2.op.node) == "q2"
