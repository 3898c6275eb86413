"""Grouped convolutions on a GPU (TensorFlow's groups: input depth C a multiple G of the
filter's in-channels CF; Keras' ``Conv2D(groups=G)``, ResNeXt): Conv2D and its two backprops
run as one CUDA kernel each, no Split or ConcatV2, and match the same convolutions done one
group at a time (slices of the input and the filter through the plain, non-grouped ops on
the numpy interpreter), for several group counts, strides, paddings and dilations; the depth
may be known only at run time (the groups are a host value, checked there); a small grouped
model trains on the GPU to the CPU's losses. Each runs on the CUDA simulator, and on a GPU
where there is one (the ``gpu_target`` fixture). The grouped backprop ops also need their
shape functions and reference kernels to take groups: those tests run where they do."""
from __future__ import annotations

import numpy as np
import pytest

import dsl as fl
from compiler.options import PipelineOptions
from runtime.errors import FlowcError

pytestmark = pytest.mark.usefixtures("gpu_target")      # a GPU, and the simulator

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU_ONLY = fl.ConfigProto(device_count={"GPU": 0})
# (N, H, W, C, KH, KW, CF, O, strides, padding, dilations): G = C / CF groups of O / G outputs
CASES = [(2, 5, 5, 4, 3, 3, 2, 6, (1, 1), "SAME", (1, 1)),           # G = 2
         (1, 6, 5, 6, 3, 2, 2, 3, (2, 1), "VALID", (1, 1)),          # G = 3, one output each
         (2, 5, 6, 8, 2, 3, 2, 8, (1, 2), "SAME", (2, 1)),           # G = 4, strided, dilated
         (1, 5, 5, 6, 3, 3, 3, 4, (2, 2), [1, 0, 2, 1], (1, 2)),     # EXPLICIT padding
         (1, 4, 4, 4, 3, 3, 1, 8, (1, 1), "SAME", (1, 1))]           # one channel per group


def _window(strides, padding, dilations) -> dict:
    attrs = {"strides": [1, *strides, 1], "dilations": [1, *dilations, 1], "padding": padding}
    if isinstance(padding, list):
        attrs.update(padding="EXPLICIT", explicit_paddings=[0, 0, *padding, 0, 0])
    return attrs


def _values(rng, case):
    n, h, w, c, kh, kw, cf, o = case[:8]
    return (rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32),
            rng.uniform(-1, 1, (kh, kw, cf, o)).astype(np.float32))


def _per_group(op: str, case, x, f, dy) -> np.ndarray:
    """``op`` of ``case`` done one group at a time with the plain (non-grouped) op on the
    interpreter, the groups' results concatenated along the channels."""
    n, h, w, c, kh, kw, cf, o = case[:8]
    groups = c // cf
    og = o // groups
    attrs = _window(*case[8:])
    xs = [x[..., k * cf:(k + 1) * cf] for k in range(groups)]
    fs = [f[..., k * og:(k + 1) * og] for k in range(groups)]
    dys = [None if dy is None else dy[..., k * og:(k + 1) * og] for k in range(groups)]
    g = fl.Graph()
    with g.as_default():
        if op == "Conv2D":
            parts = [fl.apply_op(op, [xs[k], fs[k]], attrs) for k in range(groups)]
        elif op == "Conv2DBackpropInput":
            parts = [fl.apply_op(op, [np.array([n, h, w, cf], np.int32), fs[k], dys[k]], attrs)
                     for k in range(groups)]
        else:
            parts = [fl.apply_op(op, [xs[k], np.array([kh, kw, cf, og], np.int32), dys[k]],
                                 attrs) for k in range(groups)]
        out = fl.concat(parts, 3)
    with fl.Session(graph=g, backend="interpreter") as sess:
        return sess.run(out)


def _placement(capsys):
    """The nodes of the placement report just printed; every one must be on the GPU."""
    captured = capsys.readouterr()
    report = captured.out + captured.err
    placed = [line.split() for line in report.splitlines() if line.startswith("  ")]
    on_cpu = [p for p in placed if "/device:CPU:" in p[1]]
    assert GPU0 in report and not on_cpu, on_cpu
    return {p[0] for p in placed}


def _check(want, got, what):
    for k, (w, v) in enumerate(zip(want, got)):
        assert v.shape == w.shape, what(k)
        np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-5, err_msg=what(k))


LOGGED = PipelineOptions(log_device_placement=True)


def test_grouped_conv2d_is_one_gpu_kernel_matching_per_group_convolutions(rng, capsys):
    g = fl.Graph()
    feeds, fetches, want = {}, [], []
    with g.as_default(), fl.device("/device:GPU:0"):
        for k, case in enumerate(CASES):
            x, f = _values(rng, case)
            xp = fl.placeholder(fl.float32, x.shape, name=f"x{k}")
            fp = fl.placeholder(fl.float32, f.shape, name=f"f{k}")
            feeds.update({xp: x, fp: f})
            fetches.append(fl.apply_op("Conv2D", [xp, fp], _window(*case[8:]), name=f"conv{k}"))
            want.append(_per_group("Conv2D", case, x, f, None))
        # the depth known only at run time: the groups are found (and checked) on the host
        x, f = feeds[g.get_tensor_by_name("x0:0")], feeds[g.get_tensor_by_name("f0:0")]
        xd = fl.placeholder(fl.float32, [None, 5, 5, None], name="x_any_depth")
        fd = fl.placeholder(fl.float32, [3, 3, 2, None], name="f_any_outputs")
        fetches.append(fl.apply_op("Conv2D", [xd, fd], _window(*CASES[0][8:]),
                                   name="conv_any_depth"))
        want.append(want[0])
    capsys.readouterr()
    with fl.Session(graph=g, options=LOGGED) as sess:
        _check(want, sess.run(fetches, {**feeds, xd: x, fd: f}), lambda k: f"case {k}")
        names = _placement(capsys)
        # one kernel per grouped convolution (one channel per group: simplify's depthwise)
        assert {f"conv{k}" for k in range(len(CASES) - 1)} | {"conv_any_depth"} <= names
        assert not any(n.startswith(("Split", "Concat")) or "/group" in n for n in names)
        with pytest.raises(FlowcError, match=r"input depth is not a multiple of the filter "
                                             r"in-channels \(grouped convolution\): 3 vs 2"):
            sess.run(fetches, {**feeds, xd: x[..., :3], fd: f})
        with pytest.raises(FlowcError, match=r"depth of output \(4\) is not a multiple of "
                                             r"the number of groups \(3\)"):
            sess.run(fetches, {**feeds, xd: np.concatenate([x, x[..., :2]], 3),
                               fd: f[..., :4]})


def test_grouped_backprops_on_the_gpu_match_per_group_backprops(rng, capsys):
    g = fl.Graph()
    feeds, fetches, want = {}, [], []
    with g.as_default(), fl.device("/device:GPU:0"):
        for k, case in enumerate(CASES):
            n, h, w, c, kh, kw, cf, o = case[:8]
            attrs = _window(*case[8:])
            x, f = _values(rng, case)
            dy = rng.uniform(-1, 1, _per_group("Conv2D", case, x, f, None).shape)
            dy = dy.astype(np.float32)
            # every other case: the batch fed, input_sizes a Shape the host reads off the GPU
            xp = fl.placeholder(fl.float32, [None if k % 2 else n, h, w, c], name=f"x{k}")
            fp = fl.placeholder(fl.float32, f.shape, name=f"f{k}")
            dyp = fl.placeholder(fl.float32, dy.shape, name=f"dy{k}")
            feeds.update({xp: x, fp: f, dyp: dy})
            sizes = fl.shape(xp) if k % 2 else fl.constant([n, h, w, c])
            fetches += [fl.apply_op("Conv2DBackpropInput", [sizes, fp, dyp], attrs),
                        fl.apply_op("Conv2DBackpropFilter",
                                    [xp, fl.constant([kh, kw, cf, o]), dyp], attrs)]
            want += [_per_group("Conv2DBackpropInput", case, x, f, dy),
                     _per_group("Conv2DBackpropFilter", case, x, f, dy)]
    capsys.readouterr()
    with fl.Session(graph=g, options=LOGGED) as sess:
        got = sess.run(fetches, feeds)
    _placement(capsys)
    _check(want, got, lambda k: f"case {k // 2}, {('input', 'filter')[k % 2]} gradient")


def _grouped_model():
    """A 3-channel image through a 1x1 convolution to 4 channels, then a grouped 3x3 one (2
    groups of 2 channels, 6 outputs, stride 2; both of its gradients needed) with a bias;
    the mean squared error to a target, SGD."""
    rng = np.random.default_rng(0)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 6, 6, 3], name="x")
        target = fl.placeholder(fl.float32, [None, 3, 3, 6], name="target")
        f0 = fl.Variable(rng.uniform(-0.5, 0.5, (1, 1, 3, 4)).astype(np.float32), name="f0")
        f = fl.Variable(rng.uniform(-0.4, 0.4, (3, 3, 2, 6)).astype(np.float32), name="f")
        b = fl.Variable(np.zeros(6, np.float32), name="b")
        h = fl.nn.conv2d(x, f0, 1, "VALID")
        y = fl.nn.bias_add(fl.nn.conv2d(h, f, 2, "SAME"), b)
        loss = fl.reduce_mean(fl.square(y - target), name="loss")
        train = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = fl.global_variables_initializer()
    return g, x, target, loss, train, init


def test_a_grouped_conv_model_trains_on_the_gpu_to_the_cpus_losses():
    """Three SGD steps on the CPU and on the GPU: each loss after the first is computed with
    the variables the previous step's gradients (the grouped backprops) updated."""
    rng = np.random.default_rng(1)
    feed_values = (rng.uniform(0, 1, (4, 6, 6, 3)).astype(np.float32),
                   rng.uniform(-1, 1, (4, 3, 3, 6)).astype(np.float32))
    results = []
    for config in (CPU_ONLY, None):
        g, x, target, loss, train, init = _grouped_model()
        with fl.Session(graph=g, config=config) as sess:
            sess.run(init)
            feed = dict(zip((x, target), feed_values))
            losses = [float(sess.run([loss, train], feed)[0]) for _ in range(3)]
            results.append((losses, set(sess.variable_devices().values())))
    (cpu_losses, cpu_homes), (gpu_losses, gpu_homes) = results
    assert gpu_homes == {GPU0} and GPU0 not in cpu_homes     # the variables live on the GPU
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    assert gpu_losses[2] < gpu_losses[1] < gpu_losses[0]
