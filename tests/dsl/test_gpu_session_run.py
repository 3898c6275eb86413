"""Training through ``fl.Session`` on a GPU: the MLP and the CNN reach the CPU's losses, GPU
variables read back with ``sess.run`` and the store, and a Saver round trip of GPU variables
(to a GPU session and to a CPU one), and data errors found by GPU kernels reported with the
CPU's words. Each runs on a GPU (pycuda, a CUDA GPU and nvcc; skipped with the reason where
one is missing) and on the CUDA simulator."""
from __future__ import annotations

import re

import numpy as np
import pytest

import dsl as fl
from runtime.dtypes import DType
from runtime.errors import FlowcError
from gpu_session_models import cnn_batch, cnn_model, mlp_batch, mlp_model, train_losses

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU_ONLY = fl.ConfigProto(device_count={"GPU": 0})

pytestmark = pytest.mark.usefixtures("gpu_target")      # a GPU, and the simulator


def _same_training(make_model, batch, steps, rtol):
    """Losses and final variables of the same model trained on the CPU and on the GPU; the
    losses also against the numpy interpreter (the oracle)."""
    model = make_model()
    with fl.Session(graph=model.graph, backend="interpreter") as sess:
        oracle_losses = train_losses(sess, model, batch, steps)
    results = []
    for config in (CPU_ONLY, None):
        model = make_model()
        with fl.Session(graph=model.graph, config=config) as sess:
            losses = train_losses(sess, model, batch, steps)
            values = sess.run(model.variables)
            homes = set(sess.variable_devices().values())
            from_store = [sess.store.read(v.name.split(":")[0]) for v in model.variables]
        results.append((losses, values, homes, from_store))
    (cpu_losses, cpu_values, cpu_homes, _), (gpu_losses, gpu_values, gpu_homes, gpu_store) = results
    assert cpu_homes == {"/job:localhost/replica:0/task:0/device:CPU:0"}
    assert gpu_homes == {GPU0}                    # the variables live on the GPU
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=rtol, atol=1e-6)
    np.testing.assert_allclose(gpu_losses, oracle_losses, rtol=rtol, atol=1e-6)
    assert gpu_losses[-1] < gpu_losses[0]
    for c, g, s in zip(cpu_values, gpu_values, gpu_store):
        np.testing.assert_allclose(g, c, rtol=rtol, atol=1e-5)
        np.testing.assert_array_equal(s, g)       # the store reads device memory back


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mlp_trains_on_the_gpu_to_the_cpus_losses(optimizer):
    _same_training(lambda: mlp_model(optimizer), mlp_batch(), steps=8, rtol=1e-4)


def test_mlp_with_inputs_on_the_cpu_trains_across_both_devices():
    _same_training(lambda: mlp_model(inputs_on_cpu=True), mlp_batch(), steps=5, rtol=1e-4)


def test_cnn_trains_on_the_gpu_to_the_cpus_losses():
    _same_training(cnn_model, cnn_batch(), steps=5, rtol=1e-3)


def test_saver_round_trip_of_gpu_variables(tmp_path):
    model = mlp_model("adam")
    batch = mlp_batch()
    with model.graph.as_default():
        saver = fl.train.Saver()
    with fl.Session(graph=model.graph) as sess:
        train_losses(sess, model, batch, 3)
        saved = sess.run(model.variables)
        path = saver.save(sess, str(tmp_path / "model"))
        sess.run(model.init)                      # changes every variable
        assert not np.array_equal(sess.run(model.variables[0]), saved[0])
        saver.restore(sess, path)
        for got, want in zip(sess.run(model.variables), saved):
            np.testing.assert_array_equal(got, want)
    for config in (None, CPU_ONLY):               # a fresh GPU session, and a CPU one
        with fl.Session(graph=model.graph, config=config) as sess:
            saver.restore(sess, path)
            for got, want in zip(sess.run(model.variables), saved):
                np.testing.assert_array_equal(got, want)


def test_variable_load_sets_a_gpu_variable():
    model = mlp_model()
    with fl.Session(graph=model.graph) as sess:
        sess.run(model.init)
        w = model.variables[0]
        value = np.full(w.shape, 0.25, np.float32)
        w.load(value, sess)
        np.testing.assert_array_equal(sess.run(w), value)


def _bad_value_cases():
    """(name, graph builder) of ops whose bad data the GPU finds in a kernel: each builder
    returns (fetch or target, feed with exactly one bad value)."""
    def gather():
        x = fl.placeholder(fl.float32, [4, 3], name="x")
        i = fl.placeholder(fl.int32, [2, 3], name="i")
        return fl.gather(x, i), {x: np.ones((4, 3), np.float32),
                                 i: np.array([[0, 1, 2], [3, 7, 0]], np.int32)}

    def labels():
        f = fl.placeholder(fl.float32, [3, 4], name="f")
        y = fl.placeholder(fl.int32, [3], name="y")
        loss = fl.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=f)
        return loss, {f: np.zeros((3, 4), np.float32), y: np.array([1, 9, 0], np.int32)}

    def segments():
        d = fl.placeholder(fl.float32, [5, 2], name="d")
        ids = fl.placeholder(fl.int32, [5], name="ids")
        total = fl.unsorted_segment_sum(d, ids, 3)
        return total, {d: np.ones((5, 2), np.float32), ids: np.array([0, 2, 1, 4, 0], np.int32)}

    def rows():
        v = fl.Variable(np.zeros((4, 2), np.float32), name="table")
        i = fl.placeholder(fl.int32, [3], name="i")
        rows = fl.apply_op("ResourceGather", [v.handle, i], {"dtype": DType.f32})
        return (rows, {i: np.array([1, -2, 0], np.int32)}), v

    def scatter():
        v = fl.Variable(np.zeros((4, 2), np.float32), name="table")
        i = fl.placeholder(fl.int32, [3], name="i")
        op = fl.scatter_add(v, i, np.ones((3, 2), np.float32))
        return (op, {i: np.array([1, 2, 6], np.int32)}), v

    return [("gather", gather), ("labels", labels), ("segments", segments), ("rows", rows),
            ("scatter", scatter)]


@pytest.mark.parametrize("name, build", _bad_value_cases(),
                         ids=lambda c: c if isinstance(c, str) else "")
def test_data_errors_found_on_the_gpu_say_what_the_cpu_says(name, build):
    """An index out of range, a bad label, a segment id past num_segments: the GPU kernel that
    finds it reports the index's place, its value and the bound, and the step's error is the
    C kernel's message word for word (and names the same node), of the same class."""
    messages, classes = [], []
    for config in (fl.ConfigProto(device_count={"GPU": 0}), fl.ConfigProto()):
        g = fl.Graph()
        with g.as_default():
            made = build()
            variable = None
            if isinstance(made[1], fl.Variable):
                made, variable = made
            fetch, feed = made
        with fl.Session(graph=g, config=config) as s:
            if variable is not None:
                s.run(variable.initializer)
            with pytest.raises(FlowcError) as caught:
                s.run(fetch, feed)
            messages.append(str(caught.value))
            classes.append(type(caught.value))
    cpu, gpu = messages
    assert gpu == cpu, (cpu, gpu)
    assert classes[0] is classes[1] is fl.errors.InvalidArgumentError, classes   # TF's class
    assert re.search(r"-2|6|7|9|4", gpu), gpu                   # the offending value is in it
