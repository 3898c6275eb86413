"""Image resizing, its gradients, SpaceToBatchND/BatchToSpaceND and IdentityN on a GPU: the
CUDA kernels (``compiler/codegen/cuda_ops/image_resize.py``, ``space_batch.py``,
``identity_n.py``) match the numpy interpreter over many geometries (up and down, each
coordinate rule, odd ratios, sizes fed at run time), raise the C kernels' errors for a bad
fed size, and a small segmentation-style model (a dilated convolution as TensorFlow lowers
it: SpaceToBatchND + Conv2D + BatchToSpaceND; bilinear and nearest upsampling) trains on the
GPU to the CPU's losses with every node on the GPU. Each runs on the CUDA simulator, and on a
GPU where there is one (the ``gpu_target`` fixture); the op cases of
tests/compiler/codegen/test_cuda_compile.py cover the other dtypes and the nvcc build.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from runtime.errors import FlowcError

pytestmark = pytest.mark.usefixtures("gpu_target")      # a GPU, and the simulator

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU_ONLY = fl.ConfigProto(device_count={"GPU": 0})
LOGGED = PipelineOptions(log_device_placement=True)
FLAGS = ({}, {"align_corners": True}, {"half_pixel_centers": True})
# (input height, width) -> (resized height, width): up, down, odd and large ratios, to and
# from 1
GEOMETRIES = [((3, 4), (7, 5)), ((5, 7), (2, 3)), ((4, 4), (4, 4)), ((1, 3), (3, 1)),
              ((6, 5), (4, 9)), ((2, 2), (1, 1)), ((2, 3), (17, 16))]


def _placement(capsys):
    """The nodes of the placement report just printed; none may be on a CPU."""
    captured = capsys.readouterr()
    report = captured.out + captured.err
    placed = [line.split() for line in report.splitlines() if line.startswith("  ")]
    on_cpu = [p for p in placed if "/device:CPU:" in p[1]]
    assert GPU0 in report and not on_cpu, on_cpu
    return {p[0] for p in placed}


def _run_both(build, feeds_of):
    """``build()`` (under GPU:0) run by the interpreter and by a GPU session."""
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        fetches, feeds = build()
    values = feeds_of(feeds)
    with fl.Session(graph=g, backend="interpreter") as sess:
        want = sess.run(fetches, values)
    with fl.Session(graph=g, options=LOGGED) as sess:
        got = sess.run(fetches, values)
    return fetches, want, got


def test_resizes_and_their_gradients_match_the_interpreter(rng, capsys):
    """Every geometry and coordinate rule, forward and backward, in one GPU step; half the
    resized sizes are fed (read on the host)."""
    cases = []

    def build():
        x = fl.placeholder(fl.float32, [2, None, None, 3], name="x")
        size = fl.placeholder(fl.int32, [2], name="size")
        fetches = []
        for k, ((h, w), (rh, rw)) in enumerate(GEOMETRIES):
            img = x[:, :h, :w, :]
            for f in FLAGS:
                target = fl.constant([rh, rw]) if k % 2 else size + [rh - 8, rw - 8]
                up = fl.apply_op("ResizeBilinear", [img, target], f)
                near = fl.apply_op("ResizeNearestNeighbor", [img, target], f)
                grads = up * 3.0                 # exact on both (no FMA to contract)
                fetches += [up, near, fl.apply_op("ResizeBilinearGrad", [grads, img], f),
                            fl.apply_op("ResizeNearestNeighborGrad",
                                        [grads, fl.constant([h, w])], f)]
                cases.extend([(k, f)] * 4)
        return fetches, (x, size)

    fetches, want, got = _run_both(build, lambda fs: {
        fs[0]: rng.uniform(-1, 1, (2, 6, 7, 3)).astype(np.float32),
        fs[1]: np.array([8, 8], np.int32)})
    _placement(capsys)
    for out, (k, f), w, v in zip(fetches, cases, want, got):
        assert v.shape == w.shape and v.dtype == w.dtype, (out.op.type, k, f)
        if out.op.type == "ResizeBilinearGrad":
            # the same sums in another order (the C kernel's: pixel by pixel)
            np.testing.assert_allclose(v, w, rtol=1e-6, atol=1e-6, err_msg=f"{out.name} {k} {f}")
        else:
            np.testing.assert_array_equal(v, w, err_msg=f"{out.name} {k} {f}")


def test_integer_and_f64_resizes_match_the_interpreter(rng, capsys):
    def build():
        xi = fl.placeholder(fl.int32, [None, 3, 5, 2], name="xi")
        xu = fl.placeholder(fl.uint8, [None, 4, 3, 2], name="xu")
        xd = fl.placeholder(fl.float64, [None, 4, 3, 2], name="xd")
        fetches = [fl.apply_op("ResizeBilinear", [xi, fl.constant([5, 8])], {}),
                   fl.apply_op("ResizeBilinear", [xu, fl.constant([2, 5])],
                               {"half_pixel_centers": True}),
                   fl.apply_op("ResizeNearestNeighbor", [xu, fl.constant([7, 2])],
                               {"align_corners": True}),
                   # gradients that wrap (u8, i32) and one in f64
                   fl.apply_op("ResizeNearestNeighborGrad", [xu, fl.constant([2, 2])], {}),
                   fl.apply_op("ResizeNearestNeighborGrad", [xi * 1_000_000_000,
                                                             fl.constant([1, 2])], {}),
                   fl.apply_op("ResizeNearestNeighborGrad", [xd, fl.constant([3, 5])],
                               {"half_pixel_centers": True}),
                   fl.apply_op("ResizeBilinearGrad",
                               [fl.apply_op("ResizeBilinear", [xd, fl.constant([7, 2])], {}),
                                xd], {"align_corners": True})]
        return fetches, (xi, xu, xd)

    fetches, want, got = _run_both(build, lambda fs: {
        fs[0]: rng.integers(-50, 50, (2, 3, 5, 2)).astype(np.int32),
        fs[1]: rng.integers(0, 256, (2, 4, 3, 2)).astype(np.uint8),
        fs[2]: rng.uniform(-1, 1, (2, 4, 3, 2))})
    _placement(capsys)
    for out, w, v in zip(fetches, want, got):
        assert v.dtype == w.dtype, out.name
        np.testing.assert_allclose(v, w, rtol=1e-12, atol=0, err_msg=out.name)


def test_space_batch_and_identity_n_match_the_interpreter(rng, capsys):
    def build():
        x = fl.placeholder(fl.float32, [None, None, 6, 2], name="x")
        i = fl.placeholder(fl.int64, [None, 5], name="i")
        s2b = fl.space_to_batch_nd(x, [2, 3], [[1, 2], [0, 3]])
        fetches = [s2b, fl.batch_to_space_nd(s2b, [2, 3], [[1, 2], [0, 3]]),
                   fl.batch_to_space_nd(s2b, [3, 2], [[2, 0], [1, 1]]),
                   fl.space_to_batch_nd(x, [3], [[2, 1]]),
                   fl.space_to_batch_nd(i, [5], [[3, 2]]),
                   *fl.identity_n([x, i, s2b])]
        return fetches, (x, i)

    fetches, want, got = _run_both(build, lambda fs: {
        fs[0]: rng.uniform(-1, 1, (2, 3, 6, 2)).astype(np.float32),
        fs[1]: rng.integers(-9, 9, (3, 5)).astype(np.int64)})
    _placement(capsys)
    for out, w, v in zip(fetches, want, got):
        assert v.shape == w.shape and v.dtype == w.dtype, out.name
        np.testing.assert_array_equal(v, w, err_msg=out.name)


def test_bad_fed_sizes_raise_the_c_kernels_errors():
    g = fl.Graph()
    with g.as_default(), fl.device("/device:GPU:0"):
        x = fl.placeholder(fl.float32, [1, None, 4, 2], name="x")
        size = fl.placeholder(fl.int32, [2], name="size")
        up = fl.apply_op("ResizeBilinear", [x, size], {})
        back = fl.apply_op("ResizeNearestNeighborGrad", [x, size], {})
        s2b = fl.space_to_batch_nd(x, [2], [[1, 0]])
    good = np.ones((1, 3, 4, 2), np.float32)
    with fl.Session(graph=g) as sess:
        assert sess.run(up, {x: good, size: [2, 3]}).shape == (1, 2, 3, 2)
        with pytest.raises(FlowcError, match=r"output dimensions must be positive, got \[0, 3\]"):
            sess.run(up, {x: good, size: [0, 3]})
        with pytest.raises(FlowcError, match=r"shape_t's elements must be positive, "
                                             r"got \[2, -1\]"):
            sess.run(back, {x: good, size: [2, -1]})
        with pytest.raises(FlowcError, match=r"padded_shape\[0\]=5 is not divisible by "
                                             r"block_shape\[0\]=2"):
            sess.run(s2b, {x: np.ones((1, 4, 4, 2), np.float32)})
        assert sess.run(s2b, {x: good}).shape == (2, 2, 4, 2)


def _segmentation_model():
    """A dilated 3x3 convolution as TensorFlow lowers it (SpaceToBatchND, Conv2D,
    BatchToSpaceND; rate 2), IdentityN, then bilinear (half-pixel) plus nearest upsampling to
    9x9, the mean squared error to a target, SGD."""
    rng = np.random.default_rng(0)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 6, 6, 2], name="x")
        target = fl.placeholder(fl.float32, [None, 9, 9, 3], name="target")
        f = fl.Variable(rng.uniform(-0.4, 0.4, (3, 3, 2, 3)).astype(np.float32), name="f")
        b = fl.Variable(np.zeros(3, np.float32), name="b")
        blocks = fl.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]])
        h = fl.batch_to_space_nd(fl.nn.conv2d(blocks, f, 1, "SAME"), [2, 2], [[0, 0], [0, 0]])
        h, _ = fl.identity_n([fl.nn.relu(fl.nn.bias_add(h, b)), x])
        u = (fl.image.resize_bilinear(h, [9, 9], half_pixel_centers=True)
             + fl.image.resize_nearest_neighbor(h, [9, 9]) * 0.5)
        loss = fl.reduce_mean(fl.square(u - target), name="loss")
        train = fl.train.GradientDescentOptimizer(0.2).minimize(loss)
        init = fl.global_variables_initializer()
    return g, x, target, loss, train, init


def test_a_dilated_conv_upsampling_model_trains_on_the_gpu_to_the_cpus_losses(capsys):
    """Two SGD steps on the CPU and on the GPU (the second loss is computed with the weights
    the first step's gradients, ResizeBilinearGrad and ResizeNearestNeighborGrad among them,
    updated); every node of the GPU steps is on the GPU."""
    rng = np.random.default_rng(1)
    feed_values = (rng.uniform(0, 1, (2, 6, 6, 2)).astype(np.float32),
                   rng.uniform(-1, 1, (2, 9, 9, 3)).astype(np.float32))
    results = []
    for config, options in ((CPU_ONLY, None), (None, LOGGED)):
        g, x, target, loss, train, init = _segmentation_model()
        capsys.readouterr()
        with fl.Session(graph=g, config=config, options=options) as sess:
            sess.run(init)
            feed = dict(zip((x, target), feed_values))
            losses = [float(sess.run([loss, train], feed)[0]) for _ in range(2)]
            results.append((losses, set(sess.variable_devices().values())))
            if options is not None:
                names = _placement(capsys)
    (cpu_losses, cpu_homes), (gpu_losses, gpu_homes) = results
    ops = {n.split("/")[-1].rstrip("_0123456789") for n in names}
    assert {"SpaceToBatchND", "BatchToSpaceND", "IdentityN", "ResizeBilinear",
            "ResizeNearestNeighbor", "ResizeBilinearGrad", "ResizeNearestNeighborGrad"} <= ops, ops
    assert gpu_homes == {GPU0} and GPU0 not in cpu_homes
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    assert gpu_losses[1] < gpu_losses[0]


@pytest.mark.parametrize("model", ["tf_unet", "tf_text_cnn"])
def test_keras_models_with_these_ops_run_whole_on_the_gpu_and_match_tensorflow(model, capsys):
    """A Keras U-Net (swish's IdentityN, a dilated Conv2D, UpSampling2D and Resizing) and a
    text CNN (a dilated Conv1D) from tests/data/real_models: every node on the GPU, the
    outputs TensorFlow's."""
    pytest.importorskip("google.protobuf")
    folder = os.path.join(os.path.dirname(__file__), "..", "..", "data", "real_models")
    inputs = dict(np.load(os.path.join(folder, f"{model}.inputs.npz")))
    outputs = dict(np.load(os.path.join(folder, f"{model}.outputs.npz")))
    g = fl.Graph()
    with g.as_default():
        with open(os.path.join(folder, f"{model}.pb"), "rb") as f:
            fl.import_graph_def(f.read(), name="")
    feeds = {g.get_tensor_by_name(k + ":0"): v for k, v in inputs.items()}
    fetches = [g.get_tensor_by_name(k + ":0") for k in outputs]
    capsys.readouterr()
    with fl.Session(graph=g, options=LOGGED) as sess:
        got = sess.run(fetches, feeds)
    names = _placement(capsys)
    wanted = {"tf_unet": ("ResizeBilinear", "ResizeNearestNeighbor", "IdentityN",
                          "SpaceToBatchND", "BatchToSpaceND"),
              "tf_text_cnn": ("SpaceToBatchND", "BatchToSpaceND")}[model]
    assert set(wanted) <= {op.type for op in g.get_operations()}
    assert names
    for (key, want), v in zip(outputs.items(), got):
        np.testing.assert_allclose(v, want, rtol=1e-4, atol=1e-5, err_msg=key)
