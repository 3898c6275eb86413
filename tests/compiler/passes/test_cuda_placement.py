"""Placement and partitioning with a GPU device: what has a GPU kernel goes to the GPU when
asked, what has none falls back to a CPU with a note, and the training graph splits into a
CPU and a GPU subgraph joined by _Send/_Recv pairs. No GPU and no nvcc needed."""
from __future__ import annotations

import pytest

import dsl as fl
from compiler.codegen.cuda_kernels import has_cuda_kernel
from compiler.passes.manager import PassContext, PassManager
from compiler.options import PipelineOptions
from compiler.passes.partition import split_by_device
from compiler.passes.place import PlacementError
from compiler.step import make_step_graph, optimize

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


def _mlp_training_graph():
    """The README's MLP with Adam: inputs on the CPU, the model and its training on GPU:0,
    plus one op without a GPU kernel (a BroadcastGradientArgs of computed shapes) inside the
    GPU block."""
    g = fl.Graph()
    with g.as_default():
        with fl.device("/cpu:0"):
            x = fl.placeholder(fl.float32, [None, 64], name="x")
            y = fl.placeholder(fl.int32, [None], name="y")
        with fl.device("/device:GPU:0"):
            w = fl.Variable(fl.glorot_uniform_initializer(seed=1), shape=[64, 10], name="w")
            b = fl.Variable(fl.zeros_initializer(), shape=[10], name="b")
            logits = fl.matmul(x, w) + b
            top = fl.apply_op("BroadcastGradientArgs", [fl.shape(logits), fl.shape(y % 2)],
                              {})[0]
            loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
            train = fl.train.AdamOptimizer(0.01).minimize(
                loss, global_step=fl.train.get_or_create_global_step())
    return g, [x, y], [loss, top], [train]


def _placed(g, feeds, fetches, targets, **options):
    """The optimized step graph and the pipeline's context (with the placement report)."""
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches],
                           [getattr(t, "node", t) for t in targets])
    opts = PipelineOptions(devices=(CPU0, GPU0), **options)
    ctx = PassContext(opts)
    PassManager(opts).run(step.graph, ctx)
    return step, ctx


def test_training_graph_splits_into_cpu_and_gpu_subgraphs():
    step, _ = _placed(*_mlp_training_graph())
    parts = split_by_device(step.graph)
    assert set(parts) == {CPU0, GPU0}
    gpu_ops = {n.op for n in parts[GPU0]}
    cpu_ops = {n.op for n in parts[CPU0]}
    assert {"MatMul", "SparseSoftmaxCrossEntropyWithLogits", "ReadVariableOp",
            "AssignSubVariableOp", "AssignAddVariableOp"} <= gpu_ops
    assert "BroadcastGradientArgs" in cpu_ops and "BroadcastGradientArgs" not in gpu_ops
    assert "FloorMod" in gpu_ops
    for n in parts[GPU0]:
        if n.op not in ("_Send", "_Recv", "Placeholder", "Const", "NoOp", "_Sink", "_Retval"):
            assert has_cuda_kernel(n), f"{n.name} ({n.op}) is on the GPU without a GPU kernel"

    # Every edge between the devices is one _Send and one _Recv with the same name and slot.
    sends = {(n.attrs["tensor_name"], n.attrs["slot"]): (dev, n)
             for dev, g in parts.items() for n in g if n.op == "_Send"}
    recvs = {(n.attrs["tensor_name"], n.attrs["slot"]): (dev, n)
             for dev, g in parts.items() for n in g if n.op == "_Recv"}
    assert sends.keys() == recvs.keys()
    for key, (src, send) in sends.items():
        dst, recv = recvs[key]
        assert src != dst
        assert send.attrs["recv_device"] == dst and recv.attrs["send_device"] == src
    crossing = {(sends[k][0], sends[k][1].inputs[0].node.name) for k in sends}
    assert (CPU0, "x") in crossing and (CPU0, "y") in crossing       # feeds go to the GPU
    assert any(dev == GPU0 for dev, _ in crossing)                   # the logits come back


def test_an_op_without_a_gpu_kernel_falls_back_with_a_note():
    step, ctx = _placed(*_mlp_training_graph())
    report = ctx.placement_report
    parts = [n for n in step.graph if n.op == "BroadcastGradientArgs"]
    assert parts and all(n.assigned_device == CPU0 for n in parts)
    text = report.text(step.graph)
    assert "no GPU kernel for BroadcastGradientArgs" in text
    assert any("BroadcastGradientArgs" in note and "placed on CPU:0" in note
               for note in report.notes)


def test_a_gpu_request_without_a_gpu_device_is_still_an_error():
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        y = fl.nn.relu(x)
    step = make_step_graph(g, [x.output], [y.output])
    with pytest.raises(PlacementError, match="GPU"):
        optimize(step, PipelineOptions(devices=(CPU0,)))


def test_constants_follow_their_consumer_onto_the_gpu_and_keep_shape_inputs_constant():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 4, 2], name="x")
        with fl.device("/device:GPU:0"):
            s = fl.reduce_sum(fl.transpose(x, [0, 2, 1]), axis=1)
    # (layout would fold the Transpose into the reduction's axis: this is about placement)
    step, _ = _placed(g, [x], [s], [], disable=("fold-constants", "layout"))
    by_op = {n.op: n for n in step.graph}
    assert by_op["Transpose"].assigned_device == GPU0
    assert by_op["Sum"].assigned_device == GPU0
    assert all(n.assigned_device == GPU0 for n in step.graph if n.op == "Const")


def test_fetches_sinks_and_noops_stay_with_their_inputs_under_a_gpu_default():
    """A GPU as the default device takes every op that has a GPU kernel, but not a step's
    fetch, its sink or a NoOp of values computed on the CPU: no GPU module just to pass them
    on (a _Retval on the GPU made a Send/Recv pair and a GPU launch per fetch)."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [4], name="x")
        with fl.device("/cpu:0"):
            y = fl.reduce_sum(fl.exp(x), name="y")
            done = fl.group(fl.exp(x, name="z"), name="done")
    step, _ = _placed(g, [x], [y], [done], default_device=GPU0)
    placed = {n.name: n.assigned_device for n in step.graph}
    assert placed["_retval0"] == CPU0 and placed["_sink"] == CPU0 and placed["done"] == CPU0
    assert set(placed.values()) == {CPU0}, placed
