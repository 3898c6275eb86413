"""Running GPU modules: the kernels against the numpy interpreter, Philox numbers against the
CPU's, and a device data error naming its node. These need pycuda, a CUDA GPU and nvcc, and
are skipped (with the reason) anywhere one is missing."""
from __future__ import annotations

import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize, write_artifact
from oracle import assert_same

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

pytestmark = pytest.mark.usefixtures("gpu_target")      # a GPU, and the simulator


def _gpu_artifact(g, feeds, fetches, path):
    step = make_step_graph(g, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0), default_device=GPU0,
                                   disable=("fold-constants",)))
    assert any(n.assigned_device == GPU0 for n in step.graph)
    return write_artifact(step, str(path))


def _run_on_gpu(path, feed_values):
    from runtime.cuda_module import CudaContext, load_cuda_artifact
    context = CudaContext(0)
    art = load_cuda_artifact(path, context)
    with context:
        return art.executable.run(feed_values)


def test_gpu_kernels_match_the_interpreter(tmp_path, rng):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 33], name="x")
        y = fl.placeholder(fl.float32, [33], name="y")
        m = fl.placeholder(fl.float32, [33, 7], name="m")
        ids = fl.placeholder(fl.int32, [None], name="ids")
        h = fl.nn.relu(x * y - 0.5)
        logits = fl.matmul(h, m)
        fetches = [h, logits, fl.nn.softmax(logits), fl.reduce_sum(h, axis=0),
                   fl.reduce_max(logits, axis=1), fl.argmax(logits, axis=1),
                   fl.gather(m, ids), fl.transpose(m, [1, 0]),
                   fl.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=logits)]
    values = [rng.uniform(-2, 2, (5, 33)).astype(np.float32),
              rng.uniform(-2, 2, 33).astype(np.float32),
              rng.uniform(-1, 1, (33, 7)).astype(np.float32),
              np.array([0, 6, 3, 3, 1], np.int32)]
    feeds = [x, y, m, ids]
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, dict(zip(feeds, values)))
    got = _run_on_gpu(_gpu_artifact(g, feeds, fetches, tmp_path / "art"), values)
    for k, (w, v) in enumerate(zip(want, got)):
        if np.asarray(w).dtype.kind == "f":
            np.testing.assert_allclose(v, w, rtol=1e-4, atol=1e-5, err_msg=f"fetch {k}")
        else:
            assert_same(w, v, f"fetch {k}")



def test_fused_conv_epilogues_on_the_gpu_match_the_interpreter(tmp_path, rng):
    """_FusedConv2D and _FusedDepthwiseConv2dNative with a bias, a residual and each
    activation, fused on the GPU (fuse-conv) and run there."""
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 6, 5, 3], name="x")
        r = fl.placeholder(fl.float32, [None, 6, 5, 4], name="r")
        rd = fl.placeholder(fl.float32, [None, 3, 3, 6], name="rd")
        f = fl.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
        d = fl.constant(rng.standard_normal((3, 3, 3, 2)).astype(np.float32))
        b = fl.constant(rng.standard_normal(4).astype(np.float32))
        bd = fl.constant(rng.standard_normal(6).astype(np.float32))
        conv = fl.nn.bias_add(fl.nn.conv2d(x, f, 1, "SAME"), b)
        dw = fl.nn.bias_add(fl.nn.depthwise_conv2d_native(x, d, [1, 2, 2, 1], "SAME"), bd)
        fetches = [fl.nn.relu6(conv + r), fl.nn.leaky_relu(rd + dw, alpha=0.25),
                   fl.nn.elu(fl.nn.bias_add(fl.nn.conv2d(x, f * 0.5, 1, "VALID"), b)),
                   fl.nn.relu(fl.nn.bias_add(fl.nn.depthwise_conv2d_native(
                       x, d * 2.0, [1, 1, 1, 1], "VALID"), bd) + 0.0)]
    feeds = [x, r, rd]
    values = [rng.uniform(-2, 2, (2, 6, 5, 3)).astype(np.float32),
              rng.uniform(-2, 2, (2, 6, 5, 4)).astype(np.float32),
              rng.uniform(-2, 2, (2, 3, 3, 6)).astype(np.float32)]
    step = make_step_graph(g, [t.output for t in feeds], [t.output for t in fetches])
    optimize(step, PipelineOptions(devices=(CPU0, GPU0), default_device=GPU0,
                                   disable=("fold-constants",)))
    fused = {n.op for n in step.graph if n.assigned_device == GPU0}
    assert {"_FusedConv2D", "_FusedDepthwiseConv2dNative"} <= fused
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, dict(zip(feeds, values)))
    got = _run_on_gpu(_gpu_artifact(g, feeds, fetches, tmp_path / "art"), values)
    for k, (w, v) in enumerate(zip(want, got)):
        np.testing.assert_allclose(v, w, rtol=1e-4, atol=1e-5, err_msg=f"fetch {k}")

def test_range_and_max_pool_grad_grad_on_the_gpu_match_the_interpreter(tmp_path, rng):
    """Range over a run-time length (its bounds copied to the host) and MaxPoolGradGrad, whose
    window maxima must be the ones MaxPoolGrad routes to (ties included)."""
    g = fl.Graph()
    with g.as_default():
        ids = fl.placeholder(fl.int32, [None], name="ids")
        x = fl.placeholder(fl.float32, [2, 5, 6, 3], name="x")
        pool = {"ksize": [1, 2, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
        mp = fl.apply_op("MaxPool", [x], pool)
        fetches = [fl.apply_op("Range", [fl.constant(7), fl.size(ids), fl.constant(-2)], {}),
                   fl.apply_op("Range", [fl.constant(0.5), fl.cast(fl.size(ids), fl.float32),
                                         fl.constant(0.25)], {}),
                   fl.apply_op("MaxPoolGradGrad", [x, mp, x * 3.0 + 1.0], pool)]
    xv = rng.integers(-2, 3, (2, 5, 6, 3)).astype(np.float32)      # ties in most windows
    values = [np.arange(3, dtype=np.int32), xv]
    feeds = [ids, x]
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, dict(zip(feeds, values)))
    got = _run_on_gpu(_gpu_artifact(g, feeds, fetches, tmp_path / "art"), values)
    for k, (w, v) in enumerate(zip(want, got)):
        assert_same(np.asarray(w), v, f"fetch {k}")


def test_philox_uniform_numbers_are_the_cpus(tmp_path):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [], name="x")
        u = fl.random_uniform([1000], seed=7) + x
        n = fl.random_uniform([3, 5], dtype=fl.float64, seed=8) + fl.cast(x, fl.float64)
    with fl.Session(graph=g) as s:                     # the C backend, same streams
        want = s.run([u, n], {x: np.float32(0)})
    got = _run_on_gpu(_gpu_artifact(g, [x], [u, n], tmp_path / "art"), [np.float32(0)])
    for w, v in zip(want, got):
        np.testing.assert_array_equal(v, w)


def test_an_index_out_of_range_on_the_gpu_names_the_node(tmp_path):
    from runtime.errors import FlowcError
    g = fl.Graph()
    with g.as_default():
        m = fl.placeholder(fl.float32, [4, 3], name="m")
        ids = fl.placeholder(fl.int32, [None], name="ids")
        rows = fl.gather(m, ids, name="rows")
    path = _gpu_artifact(g, [m, ids], [rows], tmp_path / "art")
    with pytest.raises(FlowcError, match="rows"):
        _run_on_gpu(path, [np.zeros((4, 3), np.float32), np.array([1, 9], np.int32)])


def test_reductions_of_many_elements_into_few_outputs_run_in_two_passes(tmp_path, rng):
    """A few outputs over many elements each: slices in parallel, then the slices of each
    output combined in order (the same results as the interpreter, Mean dividing by the whole
    count)."""
    g = fl.Graph()
    with g.as_default():
        v = fl.placeholder(fl.float32, [300_000], name="v")
        m = fl.placeholder(fl.float32, [3, 100_000], name="m")
        t = fl.placeholder(fl.float64, [70_000, 2], name="t")
        fetches = [fl.reduce_sum(v), fl.reduce_mean(m, axis=1), fl.reduce_max(t, axis=0),
                   fl.reduce_min(v), fl.nn.l2_loss(v), fl.apply_op("BiasAddGrad", [t]),
                   fl.reduce_sum(m, axis=0)]
    values = [rng.uniform(-1, 1, 300_000).astype(np.float32),
              rng.uniform(-1, 1, (3, 100_000)).astype(np.float32),
              rng.uniform(-1, 1, (70_000, 2))]
    feeds = [v, m, t]
    with fl.Session(graph=g, backend="interpreter") as s:
        want = s.run(fetches, dict(zip(feeds, values)))
    got = _run_on_gpu(_gpu_artifact(g, feeds, fetches, tmp_path / "art"), values)
    for k, (w, x) in enumerate(zip(want, got)):
        np.testing.assert_allclose(x, w, rtol=1e-5, atol=1e-6, err_msg=f"fetch {k}")
