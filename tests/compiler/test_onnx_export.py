"""`flowc export --format onnx`: exported models run in ONNX's own reference evaluator and
give flowc's results; what has no ONNX form is refused, listed with counts."""
from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="ONNX export needs the onnx package")
from onnx.reference import ReferenceEvaluator  # noqa: E402

import dsl as fl  # noqa: E402
from compiler.cli import main as flowc_main  # noqa: E402
from compiler.interop.onnx_export import OnnxExportError, export_onnx  # noqa: E402
from compiler.model_loader import load_model  # noqa: E402
from dsl.tensor import Tensor  # noqa: E402
from repo_paths import ROOT



def flowc_outputs(model, x):
    feed = model.feed_outputs()[0]
    with fl.Session(graph=model.graph) as sess:
        return feed.node.name, sess.run([Tensor(f) for f in model.fetches], {Tensor(feed): x})


@pytest.mark.parametrize("example,shape", [("mlp.flow", (3, 784)),
                                           ("cnn_forward.flow", (2, 28, 28, 1))])
def test_exported_examples_match_in_onnx_reference_evaluator(tmp_path, example, shape, capsys):
    path = str(tmp_path / "model.onnx")
    assert flowc_main(["export", os.path.join(ROOT, "examples", example), "-o", path]) == 0
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    model = load_model(os.path.join(ROOT, "examples", example))
    x = np.random.RandomState(0).rand(*shape).astype(np.float32)
    name, want = flowc_outputs(model, x)
    got = ReferenceEvaluator(proto).run(None, {name: x})
    assert [o.name for o in proto.graph.output] == model.fetch_names
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])
    # the batch dim stays symbolic
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and [d.dim_value for d in dims[1:]] == list(shape[1:])


def test_op_by_op_against_the_reference_evaluator():
    g = fl.Graph()
    r = np.random.RandomState(1)
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 4], name="x")
        w = fl.constant(r.randn(3, 4).astype(np.float32))
        h = fl.matmul(x, w, transpose_b=True)                        # Gemm with transB
        outs = [fl.nn.relu6(h * 4.0), fl.rsqrt(fl.abs(h) + 1.0), fl.square(h),
                fl.reduce_mean(h, axis=1, keepdims=True), fl.reduce_sum(h, axis=0),
                fl.reduce_max(h, axis=1), fl.cast(fl.argmax(h, axis=1, output_type=fl.int32),
                                                  fl.f32),
                fl.concat([h, h], axis=1), fl.transpose(h), fl.expand_dims(h, 1),
                fl.squeeze(fl.expand_dims(h, 2), axis=[2]), fl.nn.log_softmax(h),
                fl.maximum(h, 0.5), fl.where(h > 0.0, h, -h),
                fl.where(fl.reduce_max(h, axis=1) > 0.5, h, -h)]     # Select: rows
    xv = r.rand(5, 4).astype(np.float32)
    feeds = [x.output]
    proto = export_onnx(g, feeds, [o.output for o in outs], [f"y{i}" for i in range(len(outs))])
    got = ReferenceEvaluator(proto).run(None, {"x": xv})
    with fl.Session(graph=g) as sess:
        want = sess.run(outs, {x: xv})
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"output {k}")


def test_variables_and_unmapped_ops_are_refused_at_once(tmp_path):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [2, 3], name="x")
        v = fl.Variable(np.ones((3, 3), np.float32), name="v")
        y = fl.tile(fl.matmul(x, v.read_value()), [2, 1])
        z = fl.tile(fl.log1p(fl.abs(y)), [1, 2])
    with pytest.raises(OnnxExportError) as e:
        export_onnx(g, [x.output], [z.output], ["z"])
    text = str(e.value)
    assert "variables have no ONNX form" in text and "ReadVariableOp x" in text
    assert "op(s) without an ONNX export" in text and "Tile x2" in text and "Log1p x1" in text


def test_cli_export_errors(tmp_path, capsys):
    out = str(tmp_path / "d.onnx")
    assert flowc_main(["export", os.path.join(ROOT, "examples", "digits_mlp.flow"), "-o",
                       out]) == 1
    assert "variables have no ONNX form" in capsys.readouterr().err
    assert not os.path.exists(out)
    assert flowc_main(["export", os.path.join(ROOT, "examples", "mlp.flow"), "-o", out,
                       "--after", "cse"]) == 1
    assert "--after applies to GraphDef exports" in capsys.readouterr().err


def test_inference_batch_norm_exports_and_training_mode_is_refused():
    g = fl.Graph()
    r = np.random.RandomState(3)
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 4, 4, 3], name="x")
        c = [fl.constant(v.astype(np.float32)) for v in (r.randn(3), r.randn(3), r.randn(3),
                                                         r.rand(3) + 0.5)]
        y, m, v = fl.nn.fused_batch_norm(x, *c, epsilon=0.01, is_training=False)
        nchw = fl.nn.fused_batch_norm(fl.transpose(x, [0, 3, 1, 2]), *c, is_training=False,
                                      data_format="NCHW")[0]
    xv = r.rand(2, 4, 4, 3).astype(np.float32)
    proto = export_onnx(g, [x.output], [y.output, m.output, nchw.output], ["y", "m", "nchw"])
    got = ReferenceEvaluator(proto).run(None, {"x": xv})
    with fl.Session(graph=g) as sess:
        want = sess.run([y, m, nchw], {x: xv})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    g2 = fl.Graph()
    with g2.as_default():
        x = fl.placeholder(fl.f32, [None, 4, 4, 3], name="x")
        train = fl.nn.fused_batch_norm(x, np.ones(3, np.float32), np.zeros(3, np.float32))[0]
    with pytest.raises(OnnxExportError, match="training mode"):
        export_onnx(g2, [x.output], [train.output], ["train"])
