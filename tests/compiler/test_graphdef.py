"""TensorFlow GraphDef import and export: frozen MLP and CNN GraphDefs written here with
protobuf alone (as TensorFlow 1.x writes them) compile and match the flowc-built twins; the
round trip keeps the IR; what flowc cannot take is reported all at once."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("google.protobuf", reason="GraphDef support needs the protobuf package")

import dsl as fl  # noqa: E402
from compiler.cli import main as flowc_main  # noqa: E402
from compiler.interop.graphdef import (GraphDefImportError, graph_to_graphdef,  # noqa: E402
                                       graphdef_to_graph, load_graphdef_model, read_graphdef,
                                       write_graphdef)
from compiler.interop.protos import tf_protos  # noqa: E402
from compiler.ir.printer import print_graph  # noqa: E402
from compiler.model_loader import load_model  # noqa: E402
from dsl.tensor import Tensor  # noqa: E402
from repo_paths import ROOT

PB = tf_protos()
DT_FLOAT, DT_INT32, DT_INT64 = 1, 3, 9


# --- GraphDefs written the way TensorFlow 1.x writes them -------------------------------------
class GraphDefWriter:
    def __init__(self):
        self.gd = PB.graph_pb2.GraphDef()
        self.gd.versions.producer = 1087

    def node(self, name, op, inputs=(), **attrs):
        nd = self.gd.node.add(name=name, op=op)
        nd.input.extend(inputs)
        for k, v in attrs.items():
            nd.attr[k].CopyFrom(v)
        return name

    def const(self, name, value: np.ndarray):
        dtype = {np.float32: DT_FLOAT, np.int32: DT_INT32, np.int64: DT_INT64}[value.dtype.type]
        t = PB.tensor_pb2.TensorProto(dtype=dtype, tensor_content=value.tobytes())
        for d in value.shape:
            t.tensor_shape.dim.add(size=d)
        return self.node(name, "Const", value=attr(tensor=t), dtype=attr(type=dtype))


def attr(**kw):
    a = PB.attr_value_pb2.AttrValue()
    for k, v in kw.items():
        if k == "ints":
            a.list.i.extend(v)
        elif k == "tensor":
            a.tensor.CopyFrom(v)
        elif k == "shape":
            for d in v:
                a.shape.dim.add(size=d)
        else:
            setattr(a, k, v)
    return a


F32 = attr(type=DT_FLOAT)


def mlp_weights(seed=0):
    r = np.random.RandomState(seed)
    return [(r.randn(*s) * 0.1).astype(np.float32) for s in [(784, 64), (64,), (64, 10), (10,)]]


def frozen_mlp() -> GraphDefWriter:
    w1, b1, w2, b2 = mlp_weights()
    g = GraphDefWriter()
    g.node("x", "Placeholder", dtype=F32, shape=attr(shape=[-1, 784]))
    g.const("dense1/kernel", w1)
    g.const("dense1/bias", b1)
    g.node("dense1/MatMul", "MatMul", ["x", "dense1/kernel"], T=F32,
           transpose_a=attr(b=False), transpose_b=attr(b=False))
    g.node("dense1/BiasAdd", "BiasAdd", ["dense1/MatMul", "dense1/bias"], T=F32,
           data_format=attr(s=b"NHWC"))
    g.node("dense1/Relu", "Relu", ["dense1/BiasAdd"], T=F32)
    g.const("dense2/kernel", w2)
    g.const("dense2/bias", b2)
    g.node("dense2/MatMul", "MatMul", ["dense1/Relu", "dense2/kernel"], T=F32,
           transpose_a=attr(b=False), transpose_b=attr(b=False))
    g.node("dense2/BiasAdd", "BiasAdd", ["dense2/MatMul", "dense2/bias"], T=F32,
           data_format=attr(s=b"NHWC"))
    g.node("probs", "Softmax", ["dense2/BiasAdd"], T=F32)
    return g


def builder_mlp():
    w1, b1, w2, b2 = mlp_weights()
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 784], name="x")
        h = fl.nn.relu(fl.nn.bias_add(fl.matmul(x, fl.constant(w1)), fl.constant(b1)))
        probs = fl.nn.softmax(fl.nn.bias_add(fl.matmul(h, fl.constant(w2)), fl.constant(b2)))
    return g, x, probs


def cnn_weights(seed=1):
    r = np.random.RandomState(seed)
    shapes = [(5, 5, 1, 8), (8,), (5, 5, 8, 16), (16,), (7 * 7 * 16, 10), (10,)]
    return [(r.randn(*s) * 0.1).astype(np.float32) for s in shapes]


def frozen_cnn() -> GraphDefWriter:
    k1, c1, k2, c2, w, b = cnn_weights()
    g = GraphDefWriter()
    g.node("x", "Placeholder", dtype=F32, shape=attr(shape=[-1, 28, 28, 1]))
    h = "x"
    for i, (k, c) in enumerate([(k1, c1), (k2, c2)], 1):
        g.const(f"conv{i}/kernel", k)
        g.const(f"conv{i}/bias", c)
        g.node(f"conv{i}/Conv2D", "Conv2D", [h, f"conv{i}/kernel"], T=F32,
               strides=attr(ints=[1, 1, 1, 1]), padding=attr(s=b"SAME"),
               data_format=attr(s=b"NHWC"), use_cudnn_on_gpu=attr(b=True),
               dilations=attr(ints=[1, 1, 1, 1]), explicit_paddings=attr(ints=[]))
        g.node(f"conv{i}/BiasAdd", "BiasAdd", [f"conv{i}/Conv2D", f"conv{i}/bias"], T=F32,
               data_format=attr(s=b"NHWC"))
        g.node(f"conv{i}/Relu", "Relu", [f"conv{i}/BiasAdd"], T=F32)
        h = g.node(f"pool{i}/MaxPool", "MaxPool", [f"conv{i}/Relu"], T=F32,
                   ksize=attr(ints=[1, 2, 2, 1]), strides=attr(ints=[1, 2, 2, 1]),
                   padding=attr(s=b"VALID"), data_format=attr(s=b"NHWC"))
    g.const("flatten/shape", np.array([-1, 7 * 7 * 16], np.int32))
    g.node("flatten/Reshape", "Reshape", [h, "flatten/shape"], T=F32, Tshape=attr(type=DT_INT32))
    g.const("dense/kernel", w)
    g.const("dense/bias", b)
    g.node("dense/MatMul", "MatMul", ["flatten/Reshape", "dense/kernel"], T=F32,
           transpose_a=attr(b=False), transpose_b=attr(b=False), grad_a=attr(b=False),
           grad_b=attr(b=False))
    g.node("dense/BiasAdd", "BiasAdd", ["dense/MatMul", "dense/bias"], T=F32)
    g.node("probs", "Softmax", ["dense/BiasAdd"], T=F32)
    g.const("pred/dimension", np.array(1, np.int32))
    g.node("pred", "ArgMax", ["probs", "pred/dimension"], T=F32, Tidx=attr(type=DT_INT32),
           output_type=attr(type=DT_INT64))
    return g


def builder_cnn():
    k1, c1, k2, c2, w, b = cnn_weights()
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 28, 28, 1], name="x")
        h = x
        for k, c in [(k1, c1), (k2, c2)]:
            h = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(h, fl.constant(k), [1, 1, 1, 1], "SAME"),
                                          fl.constant(c)))
            h = fl.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        h = fl.reshape(h, [-1, 7 * 7 * 16])
        probs = fl.nn.softmax(fl.nn.bias_add(fl.matmul(h, fl.constant(w)), fl.constant(b)))
        pred = fl.argmax(probs, axis=1)
    return g, x, probs, pred


def run_graph(graph, fetches, feeds, backend="c"):
    with fl.Session(graph=graph, backend=backend) as sess:
        return sess.run(fetches, feeds)


def test_frozen_mlp_matches_the_builder_twin(tmp_path):
    path = str(tmp_path / "mlp.pb")
    with open(path, "wb") as f:
        f.write(frozen_mlp().gd.SerializeToString())
    model = load_graphdef_model(path)
    assert model.fetch_names == ["probs"]
    x = np.random.RandomState(2).rand(5, 784).astype(np.float32)
    got = run_graph(model.graph, Tensor(model.fetches[0]), {Tensor(model.graph.output("x")): x})
    g, xt, probs = builder_mlp()
    want = run_graph(g, probs, {xt: x})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    ref = run_graph(model.graph, Tensor(model.fetches[0]), {Tensor(model.graph.output("x")): x},
                    backend="interpreter")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)


def test_frozen_cnn_text_graphdef_matches_the_builder_twin(tmp_path):
    from google.protobuf import text_format
    path = str(tmp_path / "cnn.pbtxt")
    with open(path, "w") as f:
        f.write(text_format.MessageToString(frozen_cnn().gd))
    model = load_graphdef_model(path)
    assert model.fetch_names == ["pred"]
    graph = model.graph
    assert graph.node("conv1/Conv2D").attrs["padding"] == "SAME"
    x = np.random.RandomState(3).rand(4, 28, 28, 1).astype(np.float32)
    got_p, got_c = run_graph(graph, [Tensor(graph.output("probs")), Tensor(graph.output("pred"))],
                             {Tensor(graph.output("x")): x})
    g, xt, probs, pred = builder_cnn()
    want_p, want_c = run_graph(g, [probs, pred], {xt: x})
    np.testing.assert_allclose(got_p, want_p, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_c, want_c)


def test_compile_and_run_a_graphdef_from_the_command_line(tmp_path, capsys):
    path = str(tmp_path / "mlp.pb")
    with open(path, "wb") as f:
        f.write(frozen_mlp().gd.SerializeToString())
    x = np.random.RandomState(4).rand(2, 784).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = str(tmp_path / "art")
    assert flowc_main(["compile", path, "-o", out]) == 0
    assert flowc_main(["run", out, "--feed", f"x={tmp_path / 'x.npy'}",
                       "--save", str(tmp_path / "p.npy")]) == 0
    g, xt, probs = builder_mlp()
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), run_graph(g, probs, {xt: x}),
                               rtol=1e-6, atol=1e-7)


def test_graphdef_suffixes_are_registered_model_loaders():
    from importlib.metadata import entry_points
    names = {ep.name: ep.value for ep in entry_points(group="flowc.model_loaders")}
    assert names.get("pb") == names.get("pbtxt") == "compiler.interop.graphdef:load_graphdef_model"


@pytest.mark.parametrize("example", ["examples/mlp.flow", "examples/cnn_forward.flow",
                                     "examples/digits_mlp.flow"])
@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_export_then_import_keeps_the_ir(tmp_path, example, suffix):
    model = load_model(os.path.join(ROOT, example))
    path = str(tmp_path / ("model" + suffix))
    write_graphdef(model.as_built, path)
    back = load_graphdef_model(path)
    body = lambda g: print_graph(g).split("\n", 1)[1]     # noqa: E731  (graph names differ)
    assert body(back.graph) == body(model.as_built)


def test_export_after_partition_keeps_devices_and_send_recv(tmp_path, capsys):
    model_py = tmp_path / "two_devices.py"
    model_py.write_text(
        "import dsl as fl\n"
        "def build():\n"
        "    g = fl.Graph()\n"
        "    with g.as_default():\n"
        "        x = fl.placeholder(fl.f32, [4], name='x')\n"
        "        with fl.device('/device:CPU:1'):\n"
        "            y = fl.exp(x)\n"
        "        with fl.device('/device:CPU:0'):\n"
        "            z = fl.reduce_sum(y)\n"
        "    return g, [z]\n")
    out = str(tmp_path / "p.pbtxt")
    assert flowc_main(["export", str(model_py), "-o", out, "--after", "partition",
                       "--cpu-devices", "2"]) == 0
    gd = read_graphdef(out)
    ops = [n.op for n in gd.node]
    assert "_Send" in ops and "_Recv" in ops
    assert {n.device for n in gd.node if n.op == "Exp"} == {"/device:CPU:1"}
    back = graphdef_to_graph(gd, out)
    assert [n.op for n in back].count("_Send") == ops.count("_Send")
    assert {n.assigned_device for n in back if n.op == "Exp"} == \
        {"/job:localhost/replica:0/task:0/device:CPU:1"}


def test_unknown_ops_and_attrs_are_listed_at_once_with_counts(tmp_path):
    g = frozen_mlp()
    g.node("trees1", "BoostedTreesPredict", ["dense1/Relu"])
    g.node("trees2", "BoostedTreesPredict", ["dense1/Relu"])
    g.node("q", "QuantizeV2", ["x"])
    g.node("odd", "Relu", ["x"], T=F32, bogus=attr(i=3))
    g.node("late", "MatMul", ["x", "x"], T=F32, grad_a=attr(b=True))
    path = str(tmp_path / "bad.pb")
    with open(path, "wb") as f:
        f.write(g.gd.SerializeToString())
    with pytest.raises(GraphDefImportError) as e:
        load_graphdef_model(path)
    text = str(e.value)
    assert ("2 op(s) flowc does not implement (3 node(s)): BoostedTreesPredict x2, "
            "QuantizeV2 x1") in text
    assert "MatMul.grad_a=true (default false) x1" in text and "Relu.bogus=3 x1" in text


def test_attrs_flowc_lacks_import_at_tensorflows_default(tmp_path):
    r = np.random.RandomState(7)
    a, b = r.randn(2, 3, 4).astype(np.float32), r.randn(2, 4, 5).astype(np.float32)
    g = GraphDefWriter()
    g.const("a", a)
    g.const("b", b)
    g.node("mm", "BatchMatMulV2", ["a", "b"], T=F32, adj_x=attr(b=False), adj_y=attr(b=False),
           grad_x=attr(b=False), grad_y=attr(b=False))
    g.node("v", "VarHandleOp", dtype=F32, shape=attr(shape=[2, 3, 5]), container=attr(s=b""),
           shared_name=attr(s=b"v"), debug_name=attr(s=b""), allowed_devices=attr(ints=[]))
    g.node("assign", "AssignVariableOp", ["v", "mm"], dtype=F32, validate_shape=attr(b=False))
    g.node("read", "ReadVariableOp", ["v", "^assign"], dtype=F32)
    graph = graphdef_to_graph(g.gd)
    assert "grad_x" not in graph.node("mm").attrs
    assert "allowed_devices" not in graph.node("v").attrs
    got = run_graph(graph, Tensor(graph.output("read")), {})
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)


def test_attrs_away_from_tensorflows_default_are_refused_by_name_all_at_once():
    g = frozen_mlp()
    g.node("bmm", "BatchMatMulV2", ["x", "x"], T=F32, grad_x=attr(b=True), grad_y=attr(b=False))
    devices = PB.attr_value_pb2.AttrValue()
    devices.list.s.append(b"/job:ps")
    g.node("v", "VarHandleOp", dtype=F32, shape=attr(shape=[2]), allowed_devices=devices)
    g.node("acc", "ConditionalAccumulator", dtype=F32, shape=attr(shape=[2]),
           reduction_type=attr(s=b"SUM"))
    with pytest.raises(GraphDefImportError) as e:
        graphdef_to_graph(g.gd, "m.pb")
    text = str(e.value)
    assert 'BatchMatMulV2.grad_x=true (default false) x1' in text
    assert 'ConditionalAccumulator.reduction_type="SUM" (default "MEAN") x1' in text
    assert 'VarHandleOp.allowed_devices=["/job:ps"] (default []) x1' in text
    assert "grad_y" not in text


def test_a_frozen_depthwise_block_imports_and_matches_the_builder_twin():
    """Depthwise 3x3 (multiplier 2, stride 2) + bias + Relu6, then a 1x1 Conv2D, as a Keras
    MobileNet block is frozen."""
    r = np.random.RandomState(8)
    dk, db = r.randn(3, 3, 4, 2).astype(np.float32), r.randn(8).astype(np.float32)
    pk = r.randn(1, 1, 8, 5).astype(np.float32)
    g = GraphDefWriter()
    g.node("x", "Placeholder", dtype=F32, shape=attr(shape=[-1, 9, 9, 4]))
    g.const("dw/kernel", dk)
    g.const("dw/bias", db)
    g.const("pw/kernel", pk)
    g.node("dw/depthwise", "DepthwiseConv2dNative", ["x", "dw/kernel"], T=F32,
           strides=attr(ints=[1, 2, 2, 1]), padding=attr(s=b"SAME"), data_format=attr(s=b"NHWC"),
           dilations=attr(ints=[1, 1, 1, 1]), explicit_paddings=attr(ints=[]))
    g.node("dw/BiasAdd", "BiasAdd", ["dw/depthwise", "dw/bias"], T=F32)
    g.node("dw/Relu6", "Relu6", ["dw/BiasAdd"], T=F32)
    g.node("pw/Conv2D", "Conv2D", ["dw/Relu6", "pw/kernel"], T=F32,
           strides=attr(ints=[1, 1, 1, 1]), padding=attr(s=b"VALID"), use_cudnn_on_gpu=attr(b=True))
    graph = graphdef_to_graph(g.gd)
    xv = r.rand(3, 9, 9, 4).astype(np.float32)
    got = run_graph(graph, Tensor(graph.output("pw/Conv2D")), {Tensor(graph.output("x")): xv})
    twin = fl.Graph()
    with twin.as_default():
        x = fl.placeholder(fl.f32, [None, 9, 9, 4])
        h = fl.nn.relu6(fl.nn.bias_add(fl.nn.depthwise_conv2d(x, fl.constant(dk), [1, 2, 2, 1],
                                                              "SAME"), fl.constant(db)))
        y = fl.nn.conv2d(h, fl.constant(pk), 1, "VALID")
    assert got.shape == (3, 5, 5, 5)
    np.testing.assert_allclose(got, run_graph(twin, y, {x: xv}), rtol=1e-5, atol=1e-5)


def test_tensorflow_defaults_agree_with_flowcs_declared_defaults():
    from compiler.interop.tf_attr_defaults import TF_ATTR_DEFAULTS, holds_tf_default
    from compiler.ir.op_registry import get_op, has_op
    checked = 0
    for op_name, defaults in TF_ATTR_DEFAULTS.items():
        if not has_op(op_name):
            continue
        op = get_op(op_name)
        for key, value in defaults.items():
            a = op.attrs.get(key)
            if a is not None and a.has_default:
                assert holds_tf_default(op_name, key, a.default), (op_name, key, a.default, value)
                checked += 1
    assert checked > 40


def test_bad_inputs_names_and_files_are_clear_errors(tmp_path):
    g = frozen_mlp()
    g.node("dangling", "Relu", ["nowhere:0"], T=F32)
    path = str(tmp_path / "dangling.pb")
    with open(path, "wb") as f:
        f.write(g.gd.SerializeToString())
    with pytest.raises(GraphDefImportError, match="input 'nowhere:0' names no node"):
        load_graphdef_model(path)
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\xff\xfe not a protobuf \x00\x01" * 7)
    with pytest.raises(GraphDefImportError, match="not a binary GraphDef"):
        load_graphdef_model(str(junk))
    bad_text = tmp_path / "junk.pbtxt"
    bad_text.write_text("node { name: 'a' op: \n")
    with pytest.raises(GraphDefImportError, match="not a text GraphDef"):
        load_graphdef_model(str(bad_text))


def test_shape_errors_point_at_the_graphdef_node(tmp_path):
    g = GraphDefWriter()
    g.node("a", "Placeholder", dtype=F32, shape=attr(shape=[2, 3]))
    g.node("b", "Placeholder", dtype=F32, shape=attr(shape=[4, 5]))
    g.node("mm", "MatMul", ["a", "b"], T=F32)
    path = str(tmp_path / "shapes.pb")
    with open(path, "wb") as f:
        f.write(g.gd.SerializeToString())
    with pytest.raises(GraphDefImportError) as e:
        load_graphdef_model(path)
    assert str(e.value).startswith(f"{path}:3:0: node 'mm' (MatMul): ")


def test_cli_reports_import_errors_without_a_traceback(tmp_path):
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    proc = subprocess.run([sys.executable, "-m", "compiler.cli", "check", str(junk)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("flowc: error: ") and "Traceback" not in proc.stderr


def test_a_graphdef_written_by_tensorflow_imports_and_matches(tmp_path):
    tf = pytest.importorskip("tensorflow")
    tf1 = tf.compat.v1
    g = tf1.Graph()
    r = np.random.RandomState(5)
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 12, 12, 1], name="x")
        k = tf.constant((r.randn(3, 3, 1, 4) * 0.2).astype(np.float32))
        h = tf.nn.relu(tf.nn.conv2d(x, k, strides=[1, 1, 1, 1], padding="SAME"))
        h = tf.nn.max_pool2d(h, 2, 2, "SAME")
        h = tf.reshape(h, [-1, 6 * 6 * 4])
        w = tf.constant((r.randn(6 * 6 * 4, 3) * 0.1).astype(np.float32))
        probs = tf.nn.softmax(tf.matmul(h, w), name="probs")
    xv = r.rand(2, 12, 12, 1).astype(np.float32)
    with tf1.Session(graph=g) as s:
        want = s.run(probs, {x: xv})
    path = str(tmp_path / "tf.pb")
    with open(path, "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    model = load_graphdef_model(path)
    got = run_graph(model.graph, Tensor(model.graph.output("probs")),
                    {Tensor(model.graph.output("x")): xv})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_exported_graphdef_is_what_tensorflow_reads():
    tf = pytest.importorskip("tensorflow")
    g, x, probs = builder_mlp()
    gd = graph_to_graphdef(g)
    tf_gd = tf.compat.v1.GraphDef()
    tf_gd.ParseFromString(gd.SerializeToString())
    with tf.Graph().as_default() as tg:
        tf.graph_util.import_graph_def(tf_gd, name="")
    xv = np.random.RandomState(6).rand(3, 784).astype(np.float32)
    with tf.compat.v1.Session(graph=tg) as s:
        want = s.run(probs.name, {"x:0": xv})
    np.testing.assert_allclose(run_graph(g, probs, {x: xv}), want, rtol=1e-5, atol=1e-6)
