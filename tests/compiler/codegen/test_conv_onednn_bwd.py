"""Convolution gradients on oneDNN's backward primitives (conv_onednn_bwd.c.j2, chosen by
c_ops/conv_engine.py) and forward convolutions whose batch is known only at run time
(flowc_dnnl_conv_dyn_f32): the generated code calls them, and Conv2DBackpropInput,
Conv2DBackpropFilter and the bias-fused filter gradient equal the interpreter's (the oracle)
for strides 1 and 2, dilation, SAME, VALID and explicit padding, static and fed batches;
gradients match differences of the compiled loss; batches of more shapes than a node keeps
fall back to flowc's kernels; concurrent runs; FLOWC_CONV_ENGINE=blas keeps flowc's kernels."""
import re
import threading

import numpy as np
import pytest

import dsl as fl
from compiler.codegen import onednn
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from oracle import NO_FOLDING, check_against_interpreter

pytestmark = pytest.mark.skipif(not onednn.available(),
                                reason="oneDNN is not installed (the onednn-cpu-gomp wheels, "
                                "or FLOWC_ONEDNN_ROOT)")
TOL = dict(rtol=2e-4, atol=2e-4)

# (input shape, filter shape, strides, padding, dilations)
CASES = [
    ((2, 12, 12, 16), (3, 3, 16, 32), 1, "SAME", 1),
    ((1, 13, 11, 8), (3, 3, 8, 16), 2, "VALID", 1),
    ((2, 16, 16, 1), (5, 5, 1, 32), 1, "SAME", 1),            # the first layer of a CNN
    ((1, 10, 9, 8), (3, 3, 8, 12), 1, "SAME", 2),
    ((3, 8, 8, 32), (1, 1, 32, 48), 2, "SAME", 1),
    ((1, 4, 3, 16), (5, 5, 16, 8), 1, "SAME", 1),             # the window is wider than the input
    ((2, 9, 10, 4), (3, 2, 4, 20), (2, 1), [[0, 0], [2, 1], [0, 3], [0, 0]], 1),
]


def _source(graph, fetches, feeds) -> str:
    step = make_step_graph(graph, [f.output for f in feeds],
                           [t.output for t in fetches.values()])
    optimize(step, NO_FOLDING)
    return emit_c(step.graph, step.feeds, step.retvals).source


def _grad_graph(rng, case, dynamic: bool, bias: bool):
    """A convolution (+ bias), a random cotangent, and the gradients of sum(y * cot)."""
    xs, fs, stride, padding, dilation = case
    x = fl.placeholder(fl.float32, [None, *xs[1:]] if dynamic else xs, name="x")
    f = fl.placeholder(fl.float32, fs, name="f")
    y = fl.nn.conv2d(x, f, stride, padding, dilations=dilation)
    variables = [x, f]
    if bias:
        b = fl.placeholder(fl.float32, [fs[3]], name="b")
        y = fl.nn.bias_add(y, b)
        variables.append(b)
    cot = fl.placeholder(fl.float32, [None] * 4, name="cot")
    loss = fl.reduce_sum(y * cot)
    grads = fl.gradients(loss, variables)
    fetches = {f"d{v.op.name}": g for v, g in zip(variables, grads)}
    return x, f, variables, cot, y, loss, fetches


def _feed(rng, variables, cot, y_shape, batch=None):
    feed = {}
    for v in variables:
        shape = [batch if d is None else d for d in v.shape.as_list()]
        feed[v] = rng.standard_normal(shape).astype(np.float32)
    feed[cot] = rng.standard_normal(y_shape).astype(np.float32)
    return feed


def _y_shape(graph, y, feed):
    with fl.Session(graph=graph, backend="interpreter") as s:
        return s.run(y, {k: v for k, v in feed.items() if k.op.name != "cot"}).shape


@pytest.mark.cpu_only
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "fed_batch"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_gradients_run_on_onednn_and_match_the_interpreter(graph, rng, monkeypatch, case,
                                                           dynamic):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    bias = case % 2 == 0                         # every other case: _Conv2DBackpropFilterBias
    x, f, variables, cot, y, loss, fetches = _grad_graph(rng, CASES[case], dynamic, bias)
    source = _source(graph, fetches, variables + [cot])
    assert len(re.findall(r"= flowc_dnnl_conv_bwd_data_f32\(&", source)) == 1
    assert len(re.findall(r"= flowc_dnnl_conv_bwd_weights_f32\(&", source)) == 1
    batch = CASES[case][0][0]
    feed = _feed(rng, variables, cot, (1,), batch)
    feed[cot] = rng.standard_normal(_y_shape(graph, y, feed)).astype(np.float32)
    check_against_interpreter(graph, fetches, feed, **TOL)


@pytest.mark.cpu_only
def test_gradients_match_differences_of_the_compiled_loss(graph, rng, monkeypatch):
    """sum(conv(x, f) * cot) is linear in x and in f: central differences of the compiled
    float32 loss (a step of 0.5) give each gradient entry up to rounding."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    case = ((2, 7, 6, 3), (3, 3, 3, 4), 2, "SAME", 1)
    x, f, variables, cot, y, loss, fetches = _grad_graph(rng, case, True, True)
    feed = _feed(rng, variables, cot, (1,), 2)
    feed[cot] = rng.standard_normal(_y_shape(graph, y, feed)).astype(np.float32)
    eps = 0.5
    with fl.Session(graph=graph) as sess:
        grads = sess.run(fetches, feed)
        for v in variables:
            g = grads[f"d{v.op.name}"]
            for i in rng.choice(g.size, min(g.size, 6), replace=False):
                idx = np.unravel_index(i, g.shape)
                moved = dict(feed)
                moved[v] = feed[v].copy()
                moved[v][idx] += eps
                up = sess.run(loss, moved)
                moved[v][idx] -= 2 * eps
                down = sess.run(loss, moved)
                np.testing.assert_allclose((up - down) / (2 * eps), g[idx], rtol=1e-3,
                                           atol=1e-3, err_msg=f"{v.op.name}{idx}")


@pytest.mark.cpu_only
def test_fed_batches_of_many_sizes(graph, rng, monkeypatch):
    """A node keeps one primitive per batch size, up to FLOWC_DNNL_SHAPES (4); the sixth and
    later sizes run on flowc's kernels; all agree with the interpreter, forward and back."""
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    x, f, variables, cot, y, loss, fetches = _grad_graph(rng, CASES[0], True, True)
    fetches["y"] = fl.nn.relu(y)
    source = _source(graph, fetches, variables + [cot])
    assert re.search(r"= flowc_dnnl_conv_dyn_f32\(&", source)
    with fl.Session(graph=graph) as sess, fl.Session(graph=graph, backend="interpreter") as ref:
        for batch in (2, 1, 3, 2, 5, 4, 6, 1, 7):
            feed = _feed(rng, variables, cot, (1,), batch)
            feed[cot] = rng.standard_normal(_y_shape(graph, y, feed)).astype(np.float32)
            got, want = sess.run(fetches, feed), ref.run(fetches, feed)
            for k in fetches:
                np.testing.assert_allclose(got[k], want[k], err_msg=f"{k} batch {batch}", **TOL)


@pytest.mark.cpu_only
def test_concurrent_runs_share_the_gradient_nodes(graph, rng, monkeypatch):
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "onednn")
    x, f, variables, cot, y, loss, fetches = _grad_graph(rng, CASES[0], True, False)
    feeds = []
    for i in range(6):
        feed = _feed(rng, variables, cot, (1,), 1 + i % 3)
        feed[cot] = rng.standard_normal(_y_shape(graph, y, feed)).astype(np.float32)
        feeds.append(feed)
    with fl.Session(graph=graph, backend="interpreter") as ref:
        want = [ref.run(fetches, feed) for feed in feeds]
    got = [None] * len(feeds)
    with fl.Session(graph=graph) as sess:
        def run(i):
            for _ in range(4):
                got[i] = sess.run(fetches, feeds[i])
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(feeds))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for g, w in zip(got, want):
        for k in fetches:
            np.testing.assert_allclose(g[k], w[k], err_msg=k, **TOL)


def test_blas_keeps_flowc_gradients_and_tiny_shapes_stay_on_them(graph, rng, monkeypatch):
    x, f, variables, cot, y, loss, fetches = _grad_graph(rng, CASES[0], False, True)
    t = fl.placeholder(fl.float32, [1, 4, 4, 8], name="t")
    tf_ = fl.placeholder(fl.float32, [3, 3, 8, 8], name="tf")
    tiny = fl.gradients(fl.reduce_sum(fl.nn.conv2d(t, tf_, 1, "SAME")), [t, tf_])  # 18,432 flops
    fetches.update({"dt": tiny[0], "dtf": tiny[1]})
    feeds = variables + [cot, t, tf_]
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "auto")
    source = _source(graph, fetches, feeds)
    assert len(re.findall(r"= flowc_dnnl_conv_bwd_(data|weights)_f32\(&", source)) == 2
    monkeypatch.setenv("FLOWC_CONV_ENGINE", "blas")
    source = _source(graph, fetches, feeds)
    assert "flowc_dnnl_conv_bwd" not in source and "flowc_dnnl_conv_dyn" not in source
