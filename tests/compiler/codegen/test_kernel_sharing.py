"""Nodes with identical kernels share one C function, rendered once: a model of 100 identical
convolutions and 100 identical matrix products has one body of each, called 100 times, and
computes what the interpreter computes. Rendering each kernel once (``kernel_memo.py``) gives
the same source, byte for byte, as rendering it for every node."""
import importlib.util
import os
import re

import numpy as np
import pytest

import dsl as fl
from compiler.codegen import kernel_memo
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter
from repo_paths import EXAMPLES

pytestmark = pytest.mark.cpu_only      # CPU internals (conftest.py)

_DEFINED = re.compile(r"^static __attribute__\(\(noinline\)\) int (k\w+?)\(", re.M)


def _hundred_graph():
    """100 convolutions of one input by 100 different filters of one shape, and 100 matrix
    products likewise, each set summed."""
    rng = np.random.default_rng(3)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [1, 6, 6, 3], name="x")
        m = fl.placeholder(fl.float32, [4, 5], name="m")
        convs = [fl.nn.conv2d(x, fl.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32)),
                              strides=[1, 1, 1, 1], padding="SAME") for _ in range(100)]
        products = [fl.matmul(m, fl.constant(rng.standard_normal((5, 7)).astype(np.float32)))
                    for _ in range(100)]
        fetches = {"convs": fl.add_n(convs), "products": fl.add_n(products)}
    feed = {x: rng.standard_normal((1, 6, 6, 3)).astype(np.float32),
            m: rng.standard_normal((4, 5)).astype(np.float32)}
    return g, fetches, feed


def _source(g, fetches, feed) -> str:
    step = make_step_graph(g, [t.output for t in feed], [t.output for t in fetches.values()])
    optimize(step)
    return emit_c(step.graph, step.feeds, step.retvals, plan_memory=step.plan_memory).source


def test_a_hundred_identical_convolutions_and_matmuls_have_one_body_each():
    g, fetches, feed = _hundred_graph()
    source = _source(g, fetches, feed)
    kernels = _DEFINED.findall(source)
    conv = [k for k in kernels if k.endswith("_Conv2D")]
    matmul = [k for k in kernels if k.endswith("_MatMul")]
    assert len(conv) == 1 and len(matmul) == 1, kernels
    assert source.count(f"if ({conv[0]}(flowc_T, ") == 100
    assert source.count(f"if ({matmul[0]}(flowc_T, ") == 100
    check_against_interpreter(g, fetches, feed, rtol=1e-4, atol=1e-4)


def test_each_distinct_kernel_is_rendered_once(monkeypatch):
    g, fetches, feed = _hundred_graph()
    renders = []
    real = kernel_memo.KernelMemo.c_kernel

    def counted(memo, op, kc):
        before = memo.renders
        code = real(memo, op, kc)
        renders.append((kc.node.op, memo.renders - before))
        return code
    monkeypatch.setattr(kernel_memo.KernelMemo, "c_kernel", counted)
    _source(g, fetches, feed)
    convs = [r for op, r in renders if op == "Conv2D"]
    products = [r for op, r in renders if op == "MatMul"]
    assert len(convs) == len(products) == 100
    assert sum(convs) == 1 and sum(products) == 1


def _compile_models():
    path = os.path.join(EXAMPLES, "benchmarks", "compile_models.py")
    spec = importlib.util.spec_from_file_location("compile_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _training_graph():
    rng = np.random.default_rng(5)
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [8, 6], name="x")
        labels = fl.placeholder(fl.int64, [8], name="labels")
        h = x
        for k in range(3):
            w = fl.Variable(rng.uniform(-0.5, 0.5, (6, 6)).astype(np.float32), name=f"w{k}")
            h = fl.tanh(fl.matmul(h, w)) * 0.5 + fl.sigmoid(h)
        logits = fl.matmul(h, fl.Variable(np.ones((6, 3), np.float32), name="out"))
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                              logits=logits))
        train = fl.train.AdamOptimizer(0.01).minimize(loss)
    step = make_step_graph(g, [x.output, labels.output], [loss.output], [train.node])
    return step


def _hundred_step():
    g, fetches, feed = _hundred_graph()
    return make_step_graph(g, [t.output for t in feed], [t.output for t in fetches.values()])


def _onnx_step(name, tmp_path):
    """A small ResNet-18- or MobileNetV2-style model written as ONNX, imported."""
    onnx = pytest.importorskip("onnx")
    from compiler.cli.commands import step_for
    from dsl.onnx.loader import load_onnx_model
    models = _compile_models()
    path = str(tmp_path / (name + ".onnx"))
    if name == "resnet18":
        onnx.save(models.resnet18(classes=10, shape=(1, 3, 32, 32)), path)
    else:
        models.write_mobilenetv2(path, width=0.25, size=32)
    return step_for(load_onnx_model(path))


@pytest.mark.parametrize("name", ["training", "hundred", "resnet18", "mobilenetv2"])
def test_rendering_each_kernel_once_changes_no_byte_of_the_source(name, monkeypatch, tmp_path):
    step = {"training": _training_graph, "hundred": _hundred_step}.get(
        name, lambda: _onnx_step(name, tmp_path))()
    optimize(step)
    memoized = emit_c(step.graph, step.feeds, step.retvals, plan_memory=step.plan_memory).source
    monkeypatch.setattr(kernel_memo, "memoizable", lambda op, kc: False)
    every_node = emit_c(step.graph, step.feeds, step.retvals, plan_memory=step.plan_memory).source
    assert memoized == every_node
