"""``fl.Session`` and GPUs, where no GPU is needed: which devices a session places on, a GPU
request without a GPU (soft placement, or an error naming the node), the session's placement
of the MLP and CNN training steps on a CPU and a GPU with their _Send/_Recv pairs, variables
kept on the device they live on, and the generated CUDA of those steps built by nvcc (skipped
where nvcc is missing). Runs on a GPU are in tests/dsl/test_gpu_session_run.py."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.cuda_build import find_nvcc
from compiler.codegen.cuda_kernels import has_cuda_kernel
from compiler.passes.manager import PassContext, PassManager
from compiler.options import PipelineOptions
from compiler.passes.partition import split_by_device
from compiler.passes.place import PlacementError
from compiler.step import make_step_graph, write_artifact
from dsl.session_devices import (pin_variables, placement_options, requested_gpu_count,
                                 session_gpus, variable_devices, variables_kept_off_the_gpu)
from gpu_session_models import TrainingModel, cnn_model, mlp_batch, mlp_model, train_losses
from runtime.cuda_module import cuda_status

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
_HAVE_GPU, _WHY = cuda_status()
no_gpu_here = pytest.mark.skipif(_HAVE_GPU, reason="this process has a GPU: these tests are "
                                                   "about a session without one")
needs_nvcc = pytest.mark.skipif(find_nvcc() is None,
                                reason="nvcc (the CUDA compiler) is not installed")
_CROSSING = ("_Send", "_Recv", "Placeholder", "Const", "NoOp", "_Sink", "_Retval")


def _session_step(model, fetches, targets, feeds=(), placed=None):
    """A step placed as a session with GPU:0 places it (devices and default from
    ``placement_options``, variables pinned where ``placed`` says they live, and kept off the
    GPU where the whole graph needs them on the CPU)."""
    step = make_step_graph(model.graph, [f.output for f in feeds], [f.output for f in fetches],
                           [t.node for t in targets])
    pin_variables(step.graph, placed or {}, variables_kept_off_the_gpu(model.graph, CPU0))
    opts = placement_options(PipelineOptions(), [GPU0])
    ctx = PassContext(opts)
    PassManager(opts).run(step.graph, ctx)
    return step, ctx


def _pairs(parts):
    sends = {n.attrs["tensor_name"]: (dev, n) for dev, g in parts.items() for n in g
             if n.op == "_Send"}
    recvs = {n.attrs["tensor_name"]: (dev, n) for dev, g in parts.items() for n in g
             if n.op == "_Recv"}
    assert sends.keys() == recvs.keys()
    for name, (src, send) in sends.items():
        dst, recv = recvs[name]
        assert src != dst
        assert send.attrs["recv_device"] == dst and recv.attrs["send_device"] == src
        assert send.attrs["slot"] == recvs[name][1].attrs["slot"]
    return {(src, send.inputs[0].node.name, recvs[name][0]) for name, (src, send) in sends.items()}


def _assert_gpu_nodes_have_kernels(parts):
    for n in parts.get(GPU0, ()):
        if n.op not in _CROSSING:
            assert has_cuda_kernel(n), f"{n.name} ({n.op}) is on the GPU without a GPU kernel"


# --- the devices a session places on ----------------------------------------------------------
def test_device_count_gpu_zero_turns_gpus_off():
    config = fl.ConfigProto(device_count={"GPU": 0})
    assert requested_gpu_count(config) == 0
    assert session_gpus(config) == []
    sess = fl.Session(graph=fl.Graph(), config=config)
    assert sess.gpus == [] and sess.options.devices == ()
    with pytest.raises(ValueError, match="GPU must be at least 0"):
        requested_gpu_count(fl.ConfigProto(device_count={"GPU": -1}))


def test_a_gpu_joins_the_cpus_and_becomes_the_default_device():
    opts = placement_options(PipelineOptions(cpu_devices=2), [GPU0])
    assert opts.devices == (CPU0, CPU0[:-1] + "1", GPU0)
    assert opts.default_device == GPU0
    assert placement_options(PipelineOptions(), []) == PipelineOptions()
    explicit = PipelineOptions(devices=(CPU0,))
    assert placement_options(explicit, [GPU0]) is explicit       # the caller's devices win


@no_gpu_here
def test_without_a_gpu_a_session_places_on_cpus_only():
    assert session_gpus() == [] and session_gpus(fl.ConfigProto()) == []
    sess = fl.Session(graph=fl.Graph())
    assert sess.gpus == [] and sess.options == PipelineOptions()


# --- a GPU request without a GPU -----------------------------------------------------------
def _gpu_pinned_graph():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        with fl.device("/device:GPU:0"):
            w = fl.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
            y = fl.matmul(x, w, name="product")
            step = w.assign_add(fl.ones_like(w))
        init = fl.global_variables_initializer()
    return g, x, w, y, step, init


@no_gpu_here
def test_soft_placement_runs_a_gpu_pinned_graph_on_the_cpu(capfd):
    g, x, w, y, step, init = _gpu_pinned_graph()
    config = fl.ConfigProto(allow_soft_placement=True, log_device_placement=True)
    xv = np.array([[1, 2, 3]], np.float32)
    with fl.Session(graph=g, config=config) as sess:
        sess.run(init)
        sess.run(step)
        got = sess.run(y, {x: xv})
        np.testing.assert_allclose(got, xv @ (np.arange(6, dtype=np.float32).reshape(3, 2) + 1))
        np.testing.assert_allclose(sess.run(w), np.arange(6).reshape(3, 2) + 1)
    log = capfd.readouterr().err
    assert "product" in log and "device:CPU:0" in log and "device:GPU" not in log.split("\n")[0]


@no_gpu_here
def test_without_soft_placement_a_gpu_request_names_the_node():
    g, x, w, y, step, init = _gpu_pinned_graph()
    with fl.Session(graph=g) as sess:
        with pytest.raises(PlacementError, match=r"GPU:0.*(product|w)"):
            sess.run(y, {x: np.ones((1, 3), np.float32)})


# --- the session's placement of the training steps -------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mlp_training_step_goes_to_the_gpu_with_inputs_sent_from_the_cpu(optimizer):
    model = mlp_model(optimizer, inputs_on_cpu=True)
    step, ctx = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels])
    parts = split_by_device(step.graph)
    assert set(parts) == {CPU0, GPU0}
    _assert_gpu_nodes_have_kernels(parts)
    cpu_ops = {n.op for n in parts[CPU0]}
    assert cpu_ops <= {"Placeholder", "_Send", "_Recv", "NoOp", "_Sink", "Const"}, cpu_ops
    gpu_ops = {n.op for n in parts[GPU0]}
    assert {"MatMul", "SparseSoftmaxCrossEntropyWithLogits", "ReadVariableOp",
            "AssignSubVariableOp", "VarHandleOp"} <= gpu_ops
    if optimizer == "adam":
        assert "AssignVariableOp" in gpu_ops
    # The matrix-product fusions fire on the GPU too (cuda_ops/matmul.py has their kernels):
    # the bias adds into the forward products, SGD's weight updates into the gradient gemms.
    assert "_MatMulBiasAdd" in gpu_ops
    assert ("_MatMulAssignSub" in gpu_ops) == (optimizer == "sgd")
    assert _pairs(parts) == {(CPU0, "x", GPU0), (CPU0, "labels", GPU0)}
    assert not ctx.placement_report.notes
    # What log_device_placement prints: the GPU among the devices, and why ops went there.
    report = ctx.placement_report.text(step.graph)
    assert CPU0 in report.splitlines()[0] and GPU0 in report.splitlines()[0]
    assert "default device (it has a GPU kernel)" in report


def test_mlp_training_step_without_pins_is_one_gpu_module():
    model = mlp_model()
    step, _ = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels])
    assert set(split_by_device(step.graph)) == {GPU0}
    init, _ = _session_step(model, [], [model.init])
    assert set(split_by_device(init.graph)) == {GPU0}
    assert set(variable_devices(step.graph).values()) == {GPU0}


def test_cnn_training_step_splits_into_cpu_and_gpu_subgraphs():
    model = cnn_model(inputs_on_cpu=True)
    step, ctx = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels])
    parts = split_by_device(step.graph)
    assert set(parts) == {CPU0, GPU0}
    _assert_gpu_nodes_have_kernels(parts)
    gpu_ops = {n.op for n in parts[GPU0]}
    assert {"Conv2DBackpropFilter", "MaxPool", "BiasAddGrad", "AssignSubVariableOp"} <= gpu_ops
    # The convolution with its bias and ReLU, and the pooling gradient with the ReLU's mask,
    # are fused on the GPU too (cuda_ops/conv.py has their kernels); the fusions without GPU
    # kernels (the filter and bias gradients as one, the pooling argmax) left the GPU alone.
    assert {"_FusedConv2D", "_MaxPoolReluGrad"} <= gpu_ops
    assert not {"_Conv2DBackpropFilterBias", "_MaxPoolArgmax", "_MaxPoolGradArgmax"} & gpu_ops
    # The second convolution's input gradient takes its input_sizes from a run-time Shape
    # (the batch is fed): its GPU kernel copies the 4 sizes to the host.
    backprop = [n for n in parts[GPU0] if n.op == "Conv2DBackpropInput"]
    assert backprop and backprop[0].inputs[0].node.op == "Shape"
    assert _pairs(parts) == {(CPU0, "x", GPU0), (CPU0, "labels", GPU0)}
    assert {n.op for n in parts[CPU0]} <= set(_CROSSING)
    assert not ctx.placement_report.notes


def test_a_variable_stays_on_the_device_it_lives_on():
    model = mlp_model()
    lives = {"w0": CPU0}
    step, _ = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels],
                            placed=lives)
    handles = {n.attrs.get("shared_name") or n.name: n for n in step.graph
               if n.op == "VarHandleOp"}
    assert handles["w0"].assigned_device == CPU0
    assert {handles[k].assigned_device for k in ("b0", "w1", "b1")} == {GPU0}
    # Every reader and updater of w0 went with it (its colocation group).
    for n in step.graph:
        if n.inputs and n.inputs[0].node is handles["w0"]:
            assert n.assigned_device == CPU0, n.name


def _sparse_adam_model():
    """An embedding trained with Adam: the sparse update sums repeated rows with an
    UnsortedSegmentSum whose segment count is known only at run time (no GPU kernel),
    colocated with the embedding."""
    g = fl.Graph()
    with g.as_default():
        ids = fl.placeholder(fl.int32, [None], name="ids")
        labels = fl.placeholder(fl.int64, [None], name="labels")
        e = fl.Variable(np.ones((50, 8), np.float32), name="e")
        w = fl.Variable(np.ones((8, 3), np.float32), name="w")
        logits = fl.matmul(fl.nn.embedding_lookup(e, ids), w)
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        train_op = fl.train.AdamOptimizer(0.1).minimize(loss)
        init = fl.global_variables_initializer()
    return TrainingModel(g, ids, labels, loss, train_op, init, [e, w])


def test_a_variable_the_graph_needs_on_the_cpu_is_there_in_every_step():
    model = _sparse_adam_model()
    kept = variables_kept_off_the_gpu(model.graph, CPU0)
    # The embedding, its slots and Adam's powers (colocated with the first variable).
    assert kept == {k: CPU0 for k in ("e", "e/Adam", "e/Adam_1", "beta1_power", "beta2_power")}
    assert variables_kept_off_the_gpu(mlp_model("adam").graph, CPU0) == {}
    init, _ = _session_step(model, [], [model.init])
    train, ctx = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels])
    for step in (init, train):
        homes = variable_devices(step.graph)
        assert homes["e"] == CPU0 and homes["w"] == GPU0
    parts = split_by_device(train.graph)
    _assert_gpu_nodes_have_kernels(parts)
    assert any(src == CPU0 and dst == GPU0 for src, _, dst in _pairs(parts))


@no_gpu_here
def test_a_cpu_session_records_where_its_variables_live():
    model = mlp_model()
    batch = mlp_batch()
    with fl.Session(graph=model.graph) as sess:
        losses = train_losses(sess, model, batch, 2)
        assert set(sess.variable_devices().values()) == {CPU0}
        assert {"w0", "b0", "w1", "b1"} <= set(sess.variable_devices())
    assert losses[1] < losses[0]


# --- the generated CUDA of the training steps builds --------------------------------------------
def _build(step, path):
    write_artifact(step, str(path), cuda_arch="sm_90")
    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    return {d["device"]: d for d in manifest["devices"]}


@needs_nvcc
def test_mlp_training_and_init_steps_compile_with_nvcc(tmp_path):
    model = mlp_model("adam", inputs_on_cpu=True)
    step, _ = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels])
    devices = _build(step, tmp_path / "train")
    assert devices[GPU0]["kind"] == "cuda" and devices[CPU0]["kind"] == "cpu"
    assert {"w0", "b0", "w1", "b1"} <= {v["name"] for v in devices[GPU0]["variables"]}
    assert os.path.getsize(tmp_path / "train" / devices[GPU0]["fatbin"]) > 0
    init, _ = _session_step(model, [], [model.init])
    devices = _build(init, tmp_path / "init")
    assert list(devices) == [GPU0]


@needs_nvcc
def test_cnn_training_step_compiles_with_nvcc(tmp_path):
    model = cnn_model(inputs_on_cpu=True)
    step, _ = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels])
    devices = _build(step, tmp_path / "train")
    assert devices[GPU0]["kind"] == "cuda"
    assert {"f1", "c1", "f2", "c2", "w", "b"} <= {v["name"] for v in devices[GPU0]["variables"]}


@needs_nvcc
def test_saver_steps_read_and_assign_gpu_variables_and_compile_with_nvcc(tmp_path):
    model = mlp_model()
    with model.graph.as_default():
        saver = fl.train.Saver()
    lives = {k: GPU0 for k in ("w0", "b0", "w1", "b1")}
    for op, name in ((saver.save_op, "save"), (saver.restore_op, "restore")):
        step, ctx = _session_step(model, [], [op], [saver.filename_tensor], placed=lives)
        parts = split_by_device(step.graph)
        _assert_gpu_nodes_have_kernels(parts)
        checkpoint_op = "SaveV2" if name == "save" else "RestoreV2"
        assert {n.op for n in parts[CPU0]} >= {checkpoint_op}
        gpu_ops = {n.op for n in parts[GPU0]}
        assert ("ReadVariableOp" if name == "save" else "AssignVariableOp") in gpu_ops
        assert set(variable_devices(step.graph).values()) == {GPU0}
        assert any(src == GPU0 for src, _, _ in _pairs(parts)) == (name == "save")
        devices = _build(step, tmp_path / name)
        assert devices[GPU0]["kind"] == "cuda"


@needs_nvcc
def test_each_gpu_module_is_built_for_its_own_gpus_architecture(tmp_path):
    """Two GPUs of different architectures (an H200 and an A100, say): each module is built
    for its GPU, named so in the manifest."""
    gpu1 = GPU0.replace("GPU:0", "GPU:1")
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        with fl.device("/device:GPU:0"):
            h = fl.nn.relu(x)
        with fl.device("/device:GPU:1"):
            y = fl.reduce_sum(h * 2.0)
    step = make_step_graph(g, [x.output], [y.output])
    from compiler.step import optimize
    optimize(step, PipelineOptions(devices=(CPU0, GPU0, gpu1)))
    manifest_path = write_artifact(step, str(tmp_path / "two"),
                                   cuda_arch={GPU0: "sm_90", gpu1: "sm_80"})
    with open(os.path.join(manifest_path, "manifest.json")) as f:
        devices = {d["device"]: d for d in json.load(f)["devices"]}
    assert devices[GPU0]["arch"] == "sm_90" and devices[gpu1]["arch"] == "sm_80"


def test_the_gpu_architectures_are_part_of_a_steps_cache_key():
    """A build for the CUDA simulator, or for another GPU, is never loaded for this one."""
    from compiler.step import gpu_archs_tag, source_key, step_key
    model = mlp_model()
    step, _ = _session_step(model, [model.loss], [model.train_op], [model.x, model.labels])
    keys = {step_key(step, gpu_archs=gpu_archs_tag(arch))
            for arch in (None, "sim", {GPU0: "sim"}, {GPU0: "sm_90"}, {GPU0: "sm_80"})}
    assert len(keys) == 5
    options = PipelineOptions(devices=(CPU0, GPU0))
    assert source_key(step, options, gpu_archs="sim") != source_key(step, options,
                                                                     gpu_archs="sm_90")
