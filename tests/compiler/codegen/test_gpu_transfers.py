"""Tensors crossing between the devices of one process on the GPU path
(``codegen_templates/cuda/transfer.cu.j2``): sends on a copy stream through pinned host memory,
peer copies between two GPUs, receives staged through pinned memory and emitted as late as
they can be. The generated code compiles with nvcc; it runs on the CUDA simulator, whose copy
stream is a worker thread (so a copy that reads a buffer too late, or a step that ends before
its copies, shows); what only a GPU shows (the overlap itself) it does not."""
from __future__ import annotations

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.cuda_build import build_cuda_module, find_nvcc
from compiler.codegen.cuda_emitter import _receives_late, emit_cuda
from compiler.options import PipelineOptions
from compiler.passes.partition import split_by_device
from compiler.step import make_step_graph, optimize
from runtime.errors import FlowcError

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
GPU1 = "/job:localhost/replica:0/task:0/device:GPU:1"


def _three_device_graph():
    """x (fed on the CPU) -> a matmul on GPU:0 -> a tanh on GPU:1 -> back to GPU:0 -> a sum
    fetched on the CPU; GPU:1 also reshapes a feed of its own."""
    g = fl.Graph()
    with g.as_default():
        with fl.device("/cpu:0"):
            x = fl.placeholder(fl.float32, [None, 4], name="x")
            z = fl.placeholder(fl.float32, [None], name="z")
        with fl.device("/device:GPU:0"):
            w = fl.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w")
            h = fl.matmul(x, w)
        with fl.device("/device:GPU:1"):
            zr = fl.reshape(z * 2.0, [-1, 3], name="zr")
            t = fl.tanh(h) * 3.0
        with fl.device("/device:GPU:0"):
            back = t + h
        with fl.device("/cpu:0"):
            total = fl.reduce_sum(back, axis=1)
    return g, [x, z], [total, zr]


def _device_modules(g, feeds, fetches):
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches], [])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0, GPU1)))
    modules = {}
    for dev, sub in split_by_device(step.graph).items():
        if "GPU" not in dev:
            continue
        ph = sorted((n for n in sub if n.op == "Placeholder"), key=lambda n: n.name)
        rv = sorted((n for n in sub if n.op == "_Retval"), key=lambda n: n.attrs["index"])
        for k, r in enumerate(rv):
            r.attrs["index"] = k
        modules[dev] = (sub, emit_cuda(sub, ph, rv))
    return modules


def test_sends_take_the_copy_stream_and_gpus_copy_peer_to_peer():
    g, feeds, fetches = _three_device_graph()
    modules = _device_modules(g, feeds, fetches)
    src0, src1 = modules[GPU0][1].source, modules[GPU1][1].source
    # GPU:0 sends h to GPU:1 as a device copy, and the sum's input to the CPU through pinned
    # memory; both on the copy stream, delivered by a host function
    assert "cudaMemcpyDeviceToDevice, flowc_x->copy" in src0
    assert "cudaMemcpyDeviceToHost, flowc_x->copy" in src0
    assert src0.count("cudaLaunchHostFunc(flowc_x->copy, flowc_deliver") == 2
    # each GPU receives the other's tensor peer to peer; GPU:0's x comes through pinned memory
    assert "cudaMemcpyPeerAsync(" in src0 and "cudaMemcpyPeerAsync(" in src1
    assert "flowc_pinned_take(flowc_x" in src0 and "cudaMemcpyHostToDevice, flowc_stream" in src0
    # no stream-wide wait for a send any more
    assert "the GPU failed before a send" not in src0 + src1


def test_receives_are_emitted_just_before_the_first_node_that_needs_them():
    g, feeds, fetches = _three_device_graph()
    sub, _ = _device_modules(g, feeds, fetches)[GPU1]
    order = _receives_late(list(sub))
    assert sorted(n.name for n in order) == sorted(n.name for n in sub)
    position = {n: k for k, n in enumerate(order)}
    for n in order:                                          # still a topological order
        for dep in [i.node for i in n.inputs] + list(n.control_inputs):
            assert position[dep] < position[n], (dep.name, n.name)
    recvs = [n for n in order if n.op == "_Recv"]
    assert recvs
    for r in recvs:
        first_use = min(position[u] for u in r.users)
        assert all(m.op == "_Recv" for m in order[position[r] + 1:first_use]), r.name
    # GPU:1's own work (the reshape of its feed) is enqueued before it waits for GPU:0
    reshape = next(n for n in order if n.op == "Reshape")
    from_gpu0 = [r for r in recvs if r.attrs["send_device"] == GPU0]
    assert from_gpu0 and all(position[reshape] < position[r] for r in from_gpu0)


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc (the CUDA compiler) is not installed")
def test_the_transfer_code_compiles_with_nvcc(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    g, feeds, fetches = _three_device_graph()
    for dev, (_, module) in _device_modules(g, feeds, fetches).items():
        built = build_cuda_module(module.source, "sm_90", name=dev.rsplit(":", 1)[-1])
        assert built.files["fatbin"]


@pytest.fixture
def two_simulated_gpus(gpu_target, monkeypatch):
    """Two GPUs: the simulator's, or this machine's where it has two (``gpu``)."""
    from dsl.session_devices import _detected_gpus
    if gpu_target == "gpu":
        from runtime.cuda_module import gpu_devices
        if len(gpu_devices()) < 2:
            pytest.skip("needs two GPUs (peer copies); the simulator runs it with two")
    else:
        monkeypatch.setenv("FLOWC_CUDA_SIMULATOR", "2")
    _detected_gpus.cache_clear()
    yield
    _detected_gpus.cache_clear()


def test_a_step_across_a_cpu_and_two_gpus_computes_what_the_interpreter_does(two_simulated_gpus):
    """Several steps (the pinned pool is reused, and grows for a bigger batch), and an empty
    batch (zero-byte transfers)."""
    g, (x, z), fetches = _three_device_graph()
    rng = np.random.default_rng(3)
    batches = [5, 5, 64, 0, 7]
    feeds = [{x: rng.uniform(-1, 1, (b, 4)).astype(np.float32),
              z: rng.uniform(-1, 1, (3 * b,)).astype(np.float32)} for b in batches]
    with fl.Session(graph=g, backend="interpreter") as s:
        want = [s.run(fetches, f) for f in feeds]
    with fl.Session(graph=g) as s:
        got = [s.run(fetches, f) for f in feeds]
    for w, r, b in zip(want, got, batches):
        assert r[0].shape == (b,) and r[1].shape == (b, 3)
        np.testing.assert_allclose(r[0], w[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(r[1], w[1], rtol=1e-6)


def test_a_step_failing_before_it_takes_a_peer_copy_frees_it_and_the_session_goes_on(
        two_simulated_gpus, tmp_path, monkeypatch):
    """GPU:1 fails (a reshape of a bad feed) before it receives GPU:0's tensor: the device copy
    GPU:0 handed over is freed with the rendezvous (as device memory: the simulator checks),
    the error names the node, and the next step runs."""
    faults = tmp_path / "faults.txt"
    monkeypatch.setenv("FLOWC_CUDA_SIMULATOR_FAULTS", str(faults))
    g, (x, z), fetches = _three_device_graph()
    good = {x: np.ones((2, 4), np.float32), z: np.ones((6,), np.float32)}
    with fl.Session(graph=g) as s:
        first = s.run(fetches, good)
        with pytest.raises(FlowcError, match="zr"):
            s.run(fetches, {x: np.ones((2, 4), np.float32), z: np.ones((5,), np.float32)})
        again = s.run(fetches, good)
    np.testing.assert_array_equal(again[0], first[0])
    assert not faults.exists() or not faults.read_text()
