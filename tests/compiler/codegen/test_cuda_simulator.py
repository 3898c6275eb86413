"""Every op with a GPU kernel, run on flowc's CUDA simulator against the numpy interpreter.

The cases are those of tests/compiler/codegen/test_cuda_compile.py (a case or several per op, every op with a
GPU kernel, all placed on GPU:0). Here they run: the generated CUDA is built by the C++
compiler against runtime/csrc/cuda_sim and its kernels run on the host, block by block, the
threads of a block as fibers switched at __syncthreads(). This checks the kernels' indexing,
barriers, error flags and the host code that sequences them on every machine; what only a
real GPU shows (tests/runtime/test_cuda_runtime.py on one) it does not.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from oracle import assert_same
from runtime.dtypes import DType
from runtime.errors import FlowcError
from test_cuda_compile import CASE_GROUPS, build_case_graph

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
# Every case stays the op it is (no folding of constant inputs, no simplification).
AS_WRITTEN = PipelineOptions(disable=("fold-constants", "simplify"))


@pytest.fixture
def simulator(gpu_target):
    if gpu_target != "simulator":
        pytest.skip("the simulator's own checks (tests/runtime/test_cuda_runtime.py runs on the GPU)")


def _feed_values(feeds, rng, batch=6):
    """A value for each placeholder of the case graphs: a `None` dim is `batch`; integers are
    positive (they divide), labels index every table the cases gather from."""
    values = {}
    for p in feeds:
        shape = tuple(batch if d is None else d for d in p.shape.as_list())
        if p.op.name == "labels":
            values[p] = rng.integers(0, 4, shape).astype(np.int32)
        elif p.op.name == "i2x3":                       # partitions into 3, repeated indices
            values[p] = rng.integers(0, 3, shape).astype(np.int32)
        elif p.dtype == DType.bool:
            values[p] = rng.random(shape) < 0.5
        elif p.dtype == DType.i32:
            values[p] = rng.integers(1, 6, shape).astype(np.int32)
        else:
            values[p] = rng.uniform(-2, 2, shape).astype(p.dtype.np)
    return values


def _compare(want, got, what):
    want, got = np.asarray(want), np.asarray(got)
    if want.dtype.kind == "f":
        assert got.shape == want.shape and got.dtype == want.dtype, what
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, equal_nan=True, err_msg=what)
    else:
        assert_same(want, got, what)


def _random(node):
    return node.op in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal",
                       "RandomUniformInt")


@pytest.mark.parametrize("group", CASE_GROUPS)
def test_every_gpu_kernel_matches_the_interpreter(simulator, group, rng, capsys):
    g, feeds, outs, ops = build_case_graph(group)
    values = _feed_values(feeds, rng)
    with g.as_default():
        init = fl.global_variables_initializer()
    with fl.Session(graph=g, backend="interpreter") as s:
        s.run(init)
        want = s.run(outs, values)
    capsys.readouterr()
    with fl.Session(graph=g, options=dataclasses.replace(AS_WRITTEN, log_device_placement=True)) as s:
        s.run(init)
        got = s.run(outs, values)
    captured = capsys.readouterr()
    report = captured.out + captured.err
    on_cpu = [line for line in report.splitlines() if line.startswith("  ") and "/device:CPU:" in line]
    assert GPU0 in report and not on_cpu, "\n".join(on_cpu)
    for out, w, v in zip(outs, want, got):
        what = f"{out.name} ({out.op.type})"
        if _random(out.op.node):
            # Same Philox streams; normal numbers go through the device's sinf/cosf/logf.
            np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-6, err_msg=what)
        else:
            _compare(w, v, what)


def test_state_ops_on_the_gpu_change_variables_as_the_interpreter_does(simulator, rng):
    """Each assignment and scatter in its own step, the variable read back after each, in a
    GPU session and an interpreter session fed the same values."""
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        rows = fl.placeholder(fl.int32, [None], name="rows")
        upd = fl.placeholder(fl.float32, [None, 4], name="upd")
        m = fl.placeholder(fl.float32, [5, 4], name="m")
        sq = fl.placeholder(fl.float32, [4, 4], name="sq")
        v = fl.Variable(np.arange(20, dtype=np.float32).reshape(5, 4), name="v")
        h = v.handle if hasattr(v, "handle") else v._handle
        steps = [fl.apply_op("AssignAddVariableOp", [h, m], {}),
                 fl.apply_op("AssignSubVariableOp", [h, m * 3.0], {}),
                 fl.apply_op("ResourceScatterAdd", [h, rows, upd], {}),
                 fl.apply_op("ResourceScatterSub", [h, rows, upd * 0.5], {}),
                 fl.apply_op("ResourceScatterUpdate", [h, rows, upd], {}),
                 fl.apply_op("_MatMulAssignSub", [h, m, sq, fl.constant(0.25)], {}),
                 fl.apply_op("_MatMulAssignSub", [h, fl.transpose(m), sq, fl.constant(0.5)],
                             {"transpose_a": True, "transpose_b": True}),
                 fl.apply_op("AssignVariableOp", [h, m], {})]
        read = fl.apply_op("ReadVariableOp", [h], {"dtype": DType.f32})
        init = fl.global_variables_initializer()
    feed = {rows: np.array([4, 0, 2], np.int32), m: rng.uniform(-1, 1, (5, 4)).astype(np.float32),
            upd: rng.uniform(-1, 1, (3, 4)).astype(np.float32),
            sq: rng.uniform(-1, 1, (4, 4)).astype(np.float32)}
    seen = []
    for backend in ("interpreter", "c"):
        with fl.Session(graph=g, backend=backend) as s:
            s.run(init)
            trace = []
            for op in steps:
                s.run(op, feed)
                trace.append(s.run(read))
            if backend == "c":
                assert s.variable_devices() == {"v": GPU0}
            seen.append(trace)
    for k, (w, x) in enumerate(zip(*seen)):
        np.testing.assert_allclose(x, w, rtol=1e-6, err_msg=f"after step {k}")


def test_a_failing_scatter_leaves_the_gpu_variable_unchanged(simulator):
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        rows = fl.placeholder(fl.int32, [None], name="rows")
        v = fl.Variable(np.ones((3, 2), np.float32), name="v")
        h = v.handle if hasattr(v, "handle") else v._handle
        scatter = fl.apply_op("ResourceScatterAdd", [h, rows, fl.ones([2, 2])], {},
                              name="scatter")
        read = fl.apply_op("ReadVariableOp", [h], {"dtype": DType.f32})
    with fl.Session(graph=g) as s:
        s.run(v.initializer)
        with pytest.raises(FlowcError, match="scatter"):
            s.run(scatter, {rows: np.array([0, 7], np.int32)})
        np.testing.assert_array_equal(s.run(read), np.ones((3, 2), np.float32))


def _partition_stitch_graph():
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        data = fl.placeholder(fl.float32, [None, 3], name="data")
        parts = fl.placeholder(fl.int32, [None], name="parts")
        pieces = fl.dynamic_partition(data, parts, 3, name="partition")
        ids = fl.placeholder(fl.int32, [None], name="ids")
        merged = fl.dynamic_stitch([ids, ids + 1], [data, data * 10.0], name="stitch")
    return g, data, parts, ids, pieces, merged


@pytest.mark.parametrize("rows", [0, 1, 7])
def test_dynamic_partition_and_stitch_on_the_gpu_match_the_interpreter(simulator, rows, rng):
    """Empty and one-row inputs, partitions left empty, repeated stitch indices (the later
    piece wins) and rows no index names (zero)."""
    g, data, parts, ids, pieces, merged = _partition_stitch_graph()
    feed = {data: rng.uniform(-1, 1, (rows, 3)).astype(np.float32),
            parts: rng.integers(0, 2, rows).astype(np.int32),      # partition 2 stays empty
            ids: (rng.integers(0, 4, rows) * 2).astype(np.int32)}
    fetches = list(pieces) + [merged]
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, feed)
    with fl.Session(graph=g) as s:
        got = s.run(fetches, feed)
    for k, (w, v) in enumerate(zip(want, got)):
        assert_same(w, v, f"fetch {k}")


@pytest.mark.parametrize("bad, message", [
    ("parts", r"partition.*partitions\[1\] = 3 is not in \[0, 3\)"),
    ("ids", r"stitch.*indices\[0\]\[2\] = -1 is negative")])
def test_bad_partitions_and_stitch_indices_on_the_gpu_name_the_node(simulator, bad, message):
    g, data, parts, ids, pieces, merged = _partition_stitch_graph()
    feed = {data: np.ones((3, 3), np.float32), parts: np.array([0, 1, 2], np.int32),
            ids: np.array([0, 1, 2], np.int32)}
    feed[parts if bad == "parts" else ids] = np.array([0, 3, -1], np.int32)
    with fl.Session(graph=g) as s:
        with pytest.raises(FlowcError, match=message):
            s.run(list(pieces) + [merged], feed)
        feed[parts], feed[ids] = np.array([0, 1, 2], np.int32), np.array([0, 1, 2], np.int32)
        s.run(list(pieces) + [merged], feed)                   # the session goes on


def test_a_sharded_embedding_trains_on_the_gpu_as_on_the_cpu(simulator, rng, capsys):
    """Three shards, ids routed by DynamicPartition and stitched back, the sparse gradient
    applied (fused with its learning rate): every op of the step on the GPU, the losses and
    tables those of the CPU."""
    ids_value = rng.integers(0, 30, 16).astype(np.int32)
    target = rng.uniform(-1, 1, (16, 4)).astype(np.float32)

    def train(config, steps=4):
        g = fl.Graph()
        with g.as_default():
            ids = fl.placeholder(fl.int32, [None], name="ids")
            y = fl.placeholder(fl.float32, [None, 4], name="y")
            shards = [fl.Variable(np.full((10, 4), 0.1 * (k + 1), np.float32), name=f"emb{k}")
                      for k in range(3)]
            rows = fl.nn.embedding_lookup(shards, ids)
            loss = fl.reduce_mean(fl.square(rows - y))
            step = fl.train.GradientDescentOptimizer(0.5).minimize(loss)
            init = fl.global_variables_initializer()
        with fl.Session(graph=g, config=config) as s:
            s.run(init)
            losses = [s.run([loss, step], {ids: ids_value, y: target})[0] for _ in range(steps)]
            traced = fl.RunMetadata()          # a traced step: which kernels ran where
            s.run(step, {ids: ids_value, y: target},
                  options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
                  run_metadata=traced)
            ran = {(d.device.rsplit("/", 1)[-1], k.op) for d in traced.step_stats.devices
                   for k in d.kernels}
            return losses, s.run(shards), set(s.variable_devices().values()), ran

    cpu_losses, cpu_tables, cpu_homes, _ = train(fl.ConfigProto(device_count={"GPU": 0}))
    capsys.readouterr()
    gpu_losses, gpu_tables, gpu_homes, ran = train(fl.ConfigProto(log_device_placement=True))
    # the sparse SGD step runs fused on the GPU (fuse-updates), scaled as it is subtracted
    assert ("device:GPU:0", "_ResourceScatterSubScaled") in ran, ran
    captured = capsys.readouterr()
    report = captured.out + captured.err
    on_cpu = [line for line in report.splitlines() if line.startswith("  ") and "/device:CPU:" in line]
    assert "DynamicPartition" in report and "DynamicStitch" in report
    assert not on_cpu, "\n".join(on_cpu)
    assert gpu_homes == {GPU0} and cpu_homes != {GPU0}
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    assert gpu_losses[-1] < gpu_losses[0]
    for c, v in zip(cpu_tables, gpu_tables):
        np.testing.assert_allclose(v, c, rtol=1e-5, atol=1e-6)


def test_two_gpus_train_their_towers_as_the_interpreter_does(simulator, monkeypatch):
    """FLOWC_CUDA_SIMULATOR=2: a tower on each GPU with its own variable, the losses summed on
    GPU:0 (tensors between the GPUs copied peer to peer), trained by one optimizer."""
    from dsl.session_devices import _detected_gpus
    monkeypatch.setenv("FLOWC_CUDA_SIMULATOR", "2")
    _detected_gpus.cache_clear()
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        y = fl.placeholder(fl.int32, [None], name="y")
        weights, losses = [], []
        for k in range(2):
            with fl.device(f"/device:GPU:{k}"):
                w = fl.Variable(np.full((4, 3), 0.1 * (k + 1), np.float32), name=f"w{k}")
                logits = fl.matmul(x, w)
                losses.append(fl.reduce_mean(
                    fl.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)))
                weights.append(w)
        loss = losses[0] + losses[1]
        step = fl.train.GradientDescentOptimizer(0.5).minimize(loss)
        init = fl.global_variables_initializer()
    feed = {x: np.random.default_rng(0).uniform(-1, 1, (6, 4)).astype(np.float32),
            y: np.array([0, 1, 2, 0, 1, 2], np.int32)}
    seen = []
    for backend in ("interpreter", "c"):
        with fl.Session(graph=g, backend=backend) as s:
            s.run(init)
            seen.append(([s.run([loss, step], feed)[0] for _ in range(3)], s.run(weights)))
            if backend == "c":
                assert s.variable_devices() == {
                    "w0": GPU0, "w1": GPU0.replace("GPU:0", "GPU:1")}
    (want, want_w), (got, got_w) = seen
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for w, v in zip(want_w, got_w):
        np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-6)


def test_loops_and_conds_run_on_one_device_beside_gpu_ops(simulator, rng, capsys):
    """Control-flow ops have CPU kernels only: a while loop (with its gradient loop) and a
    cond stay whole on a CPU, and the ops around them go to the GPU; the step computes what
    the interpreter does."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        n = fl.placeholder(fl.int32, [], name="n")
        w = fl.Variable(np.eye(4, dtype=np.float32) * 0.5, name="w")
        h = fl.nn.relu(fl.matmul(x, w))                        # GPU
        _, hn = fl.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, fl.tanh(v) * 1.5),
                              [0, h])
        picked = fl.cond(fl.reduce_sum(hn) > 0, lambda: hn * 2.0, lambda: hn - 1.0)
        loss = fl.reduce_mean(fl.square(picked))              # GPU
        (grad,) = fl.gradients(loss, [w])
        init = fl.global_variables_initializer()
    feed = {x: rng.uniform(-1, 1, (5, 4)).astype(np.float32), n: np.int32(3)}
    with fl.Session(graph=g, backend="interpreter") as s:
        s.run(init)
        want = s.run([loss, grad], feed)
    capsys.readouterr()
    with fl.Session(graph=g, config=fl.ConfigProto(log_device_placement=True)) as s:
        s.run(init)
        got = s.run([loss, grad], feed)
    captured = capsys.readouterr()
    placed = {}
    for line in (captured.out + captured.err).splitlines():
        parts = line.split()
        if line.startswith("  ") and len(parts) >= 2:
            placed[parts[0]] = parts[1]
    loop_and_cond = [k for k in placed if k.startswith(("while/", "cond/"))]
    assert loop_and_cond and all("/device:CPU:" in placed[k] for k in loop_and_cond), placed
    assert placed["MatMul"] == GPU0 and placed["Mean"] == GPU0, placed
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-6)


def test_check_numerics_on_the_gpu_names_the_op_as_on_the_cpu(simulator):
    """check_numerics scans every floating output on the device: the first op that made a
    NaN or an Inf is named, with the CPU's message, and the failed training step leaves the
    variable unchanged."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None], name="x")
        w = fl.Variable(np.ones(3, np.float32), name="w")
        y = fl.log(x * w, name="log") * 2.0
        loss = fl.reduce_sum(fl.sqrt(y, name="root"))
        step = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = fl.global_variables_initializer()
    messages = []
    for config in (fl.ConfigProto(check_numerics=True, device_count={"GPU": 0}),
                   fl.ConfigProto(check_numerics=True)):
        with fl.Session(graph=g, config=config) as s:
            s.run(init)
            for bad in ([1.0, -1.0, 2.0], [0.0, 2.0, 3.0], [1.0, 2.0, 3.0]):
                with pytest.raises(FlowcError) as e:
                    s.run(step, {x: np.array(bad, np.float32)})
                messages.append(str(e.value))
            np.testing.assert_array_equal(s.run(w), np.ones(3, np.float32))
            if config.device_count.get("GPU") is None:
                assert s.variable_devices() == {"w": GPU0}
    cpu, gpu = messages[:3], messages[3:]
    assert "node 'log': CheckNumerics: Log: Tensor had NaN values" in gpu[0]
    assert "CheckNumerics: Log: Tensor had Inf values" in gpu[1]
    assert "in the backward pass (gradient of 'root')" in gpu[2]
    assert gpu == cpu


def test_a_traced_run_times_the_gpu_nodes_with_events_beside_the_cpu_kernels(simulator):
    """RunOptions(FULL_TRACE) on a step with a CPU and a GPU part: the CPU module's kernels
    are timed with the host clock, the GPU's nodes with CUDA events around their work on the
    stream (here the simulator's, which reach them as they run), each under its device."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        with fl.device("/cpu:0"):
            xc = fl.nn.relu(x, name="on_cpu")
        y = fl.reduce_sum(fl.matmul(xc, fl.ones([4, 2])))
    with fl.Session(graph=g) as s:
        md = fl.RunMetadata()
        got = s.run(y, {x: np.ones((64, 4), np.float32)},
                    options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE), run_metadata=md)
    assert got == 512.0
    timed = {(d.device.rsplit("/", 1)[-1], k.node): k for d in md.step_stats.devices
             for k in d.kernels}
    assert ("device:CPU:0", "on_cpu") in timed
    matmul = timed[("device:GPU:0", "MatMul")]
    assert matmul.calls == 1 and matmul.total_ns > 0
    assert any(node.endswith("_recv_0") or "_recv" in node for dev, node in timed
               if dev == "device:GPU:0")                 # the transfer is a timed node too


@pytest.mark.parametrize("delta, message", [(0, "Requires delta != 0: 0"),
                                            (-1, "Requires start >= limit when delta < 0: 0/5")])
def test_range_bounds_are_checked_on_the_host_before_its_size_is(simulator, delta, message):
    """Range's size divides by delta: its checks (made by the kernel on the host copies of the
    bounds) run before the size is computed; a zero delta crashed the process before."""
    g = fl.Graph()
    with g.as_default():
        a, b, d = (fl.placeholder(fl.int32, [], name=k) for k in "abd")
        r = fl.range(a, b, d, name="r")
    with fl.Session(graph=g) as s:
        with pytest.raises(FlowcError, match=f"node 'r': {re.escape(message)}"):
            s.run(r, {a: np.int32(0), b: np.int32(5), d: np.int32(delta)})
        np.testing.assert_array_equal(s.run(r, {a: np.int32(0), b: np.int32(5),
                                                d: np.int32(2)}), [0, 2, 4])


def _mismatch_cases():
    a = fl.placeholder(fl.float32, [None, 2], name="a")
    b = fl.placeholder(fl.float32, [None, 2], name="b")
    good = {a: np.ones((3, 2), np.float32), b: np.ones((3, 2), np.float32)}
    bad = {a: np.ones((3, 2), np.float32), b: np.ones((2, 2), np.float32)}
    x = fl.placeholder(fl.int32, [2], name="x")
    y = fl.placeholder(fl.int32, [3], name="y")
    return [fl.concat([a, b], 1, name="concat"), fl.stack([a, b], name="stack"),
            fl.add_n([a, b], name="add_n"),
            fl.slice(b, fl.constant([2, 0]), fl.constant([1, 2]), name="box")], good, bad, \
        fl.raw_ops.Equal(x=x, y=y, incompatible_shape_error=False), {
            x: np.array([1, 2], np.int32), y: np.array([1, 2, 3], np.int32)}


def test_shape_checks_of_concat_stack_add_n_and_slice_run_on_the_gpu(simulator):
    """Inputs that disagree (a dim known only at run time) fail on the GPU naming the node,
    with the CPU's message, instead of reading and writing past their buffers."""
    g = fl.Graph()
    with g.as_default():
        fetches, good, bad, eq, eq_feed = _mismatch_cases()
    for fetch in fetches:
        messages = []
        for config in (fl.ConfigProto(device_count={"GPU": 0}), None):
            with fl.Session(graph=g, config=config) as s:
                s.run(fetch, good)
                with pytest.raises(FlowcError) as e:
                    s.run(fetch, bad)
                messages.append(str(e.value))
        assert messages[1] == messages[0] and f"'{fetch.op.name}'" in messages[1]
    with fl.Session(graph=g) as s:               # an answer for shapes that do not broadcast
        assert s.run(eq, eq_feed).tolist() is False
