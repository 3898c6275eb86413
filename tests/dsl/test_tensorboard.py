"""TensorBoard: fl.summary scalars and histograms, FileWriter event files, the graph view
(`flowc ir --format tensorboard`) and `flowc train --logdir`."""
from __future__ import annotations

import glob
import os
import struct

import numpy as np
import pytest

pytest.importorskip("tensorboardX", reason="TensorBoard support needs the tensorboard extra")

import dsl as fl  # noqa: E402
from compiler.cli import main as flowc_main  # noqa: E402
from compiler.errors import ShapeError  # noqa: E402
from compiler.interop.protos import event_protos, tf_protos  # noqa: E402
from repo_paths import ROOT

PB = tf_protos()
EV = event_protos()


def read_events(logdir):
    """Every Event in the event files of ``logdir`` (TFRecord framing: length, crc, data, crc)."""
    events = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        data = open(path, "rb").read()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            ev = EV.event_pb2.Event()
            ev.ParseFromString(data[pos + 12:pos + 12 + n])
            events.append(ev)
            pos += 16 + n
    return events


def scalars(events):
    out = {}
    for ev in events:
        for v in ev.summary.value:
            if v.WhichOneof("value") == "simple_value":
                out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def small_model():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 3], name="x")
        with fl.name_scope("layer"):
            w = fl.Variable(np.array([[1, -2], [3, 0.5], [np.nan, 1]], np.float32), name="w")
            y = fl.reduce_mean(fl.matmul(x, fl.constant(np.ones((3, 2), np.float32))))
            fl.summary.scalar("loss", y)
            fl.summary.histogram("w", w)
        g.init = fl.global_variables_initializer()
    return g, x, y


@pytest.mark.parametrize("backend", ["c", "interpreter"])
def test_summaries_fetch_as_serialized_summary_protos(backend):
    g, x, y = small_model()
    with g.as_default():
        merged = fl.summary.merge_all()
    with fl.Session(graph=g, backend=backend) as sess:
        sess.run(g.init)
        data, loss = sess.run([merged, y], {x: np.ones((4, 3), np.float32)})
    assert isinstance(data, bytes)
    s = EV.summary_pb2.Summary()
    s.ParseFromString(data)
    by_tag = {v.tag: v for v in s.value}
    assert set(by_tag) == {"layer/loss", "layer/w"}
    assert by_tag["layer/loss"].simple_value == pytest.approx(float(loss)) == 3.0
    h = by_tag["layer/w"].histo
    assert h.num == 5 and h.min == -2 and h.max == 3             # NaN left out
    assert h.sum == pytest.approx(3.5) and h.sum_squares == pytest.approx(1 + 4 + 9 + 0.25 + 1)
    assert sum(h.bucket) == 5 and list(h.bucket_limit) == sorted(h.bucket_limit)
    assert h.bucket_limit[0] == pytest.approx(-2, rel=0.1) and h.bucket_limit[0] >= -2
    assert h.bucket_limit[-1] == pytest.approx(3, rel=0.1) and h.bucket_limit[-1] >= 3


def test_summary_api_checks_its_arguments():
    g = fl.Graph()
    with g.as_default():
        assert fl.summary.merge_all() is None
        v = fl.constant(np.zeros((2, 2), np.float32), name="v")
        with pytest.raises(ShapeError, match=r"fl.summary.scalar\('v'\) needs a scalar"):
            fl.summary.scalar("v", v)
        with pytest.raises(TypeError, match="is not a summary"):
            fl.summary.merge([v])
        s = fl.summary.scalar("c", fl.constant(1.0), collections=["mine"])
        assert fl.summary.merge_all() is None and fl.summary.merge_all("mine").entries == s.entries


def test_file_writer_writes_graph_and_summaries(tmp_path):
    g, x, y = small_model()
    with g.as_default():
        merged = fl.summary.merge_all()
    logdir = str(tmp_path / "run")
    with fl.Session(graph=g) as sess, fl.summary.FileWriter(logdir, graph=g) as writer:
        sess.run(g.init)
        for step in range(3):
            writer.add_summary(sess.run(merged, {x: np.full((2, 3), step, np.float32)}), step)
        writer.add_scalar("custom/rate", 12.5, 3)
    events = read_events(logdir)
    graphs = [ev for ev in events if ev.graph_def]
    assert len(graphs) == 1
    gd = PB.graph_pb2.GraphDef()
    gd.ParseFromString(graphs[0].graph_def)
    assert "layer/MatMul" in {n.name for n in gd.node}
    assert scalars(events) == {"layer/loss": [(0, 0.0), (1, 3.0), (2, 6.0)],
                               "custom/rate": [(3, 12.5)]}


def test_tensorflow_reads_the_event_files(tmp_path):
    tf = pytest.importorskip("tensorflow")
    g, x, y = small_model()
    with g.as_default():
        merged = fl.summary.merge_all()
    logdir = str(tmp_path / "tf")
    with fl.Session(graph=g) as sess, fl.summary.FileWriter(logdir, graph=g) as writer:
        sess.run(g.init)
        writer.add_summary(sess.run(merged, {x: np.ones((1, 3), np.float32)}), 7)
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    seen = {}
    for ev in tf.compat.v1.train.summary_iterator(path):
        for v in ev.summary.value:
            seen[v.tag] = (ev.step, v.simple_value if v.HasField("simple_value") else v.histo.num)
    assert seen == {"layer/loss": (7, 3.0), "layer/w": (7, 5.0)}


def test_flowc_ir_writes_the_graph_for_tensorboard(tmp_path, capsys):
    logdir = str(tmp_path / "graph")
    model = os.path.join(ROOT, "examples", "mlp.flow")
    assert flowc_main(["ir", model, "--format", "tensorboard", "--logdir", logdir]) == 0
    assert "tensorboard --logdir" in capsys.readouterr().out
    (ev,) = [e for e in read_events(logdir) if e.graph_def]
    gd = PB.graph_pb2.GraphDef()
    gd.ParseFromString(ev.graph_def)
    names = {n.name for n in gd.node}
    assert {"dense1/MatMul", "dense2/Relu", "dense3/BiasAdd"} <= names      # name scopes
    mm = next(n for n in gd.node if n.name == "dense1/MatMul")
    assert [d.size for d in mm.attr["_output_shapes"].list.shape[0].dim] == [-1, 256]
    assert flowc_main(["ir", model, "--format", "tensorboard"]) == 1
    assert "--format tensorboard needs --logdir" in capsys.readouterr().err


def test_flowc_train_logs_scalars(tmp_path, capsys):
    logdir = str(tmp_path / "train")
    status = flowc_main(["train", os.path.join(ROOT, "examples", "digits_mlp.flow"), "--steps",
                         "20", "--eval-every", "10", "--logdir", logdir, "-q"])
    assert status == 0
    values = scalars(read_events(logdir))
    assert [s for s, _ in values["train/loss"]] == list(range(1, 21))
    assert [s for s, _ in values["eval/loss"]] == [10, 20]
    assert [s for s, _ in values["eval/accuracy"]] == [10, 20]
    assert all(v > 0 for _, v in values["train/steps_per_sec"])
    assert any(ev.graph_def for ev in read_events(logdir))


def test_tensorboards_own_reader_loads_the_training_scalars_and_the_graph(tmp_path):
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="the tensorboard package (TensorBoard's own reader) is not installed")
    logdir = str(tmp_path / "train")
    assert flowc_main(["train", os.path.join(ROOT, "examples", "digits_mlp.flow"), "--steps",
                       "10", "--eval-every", "5", "--logdir", logdir, "-q"]) == 0
    acc = accumulator.EventAccumulator(logdir)
    acc.Reload()
    tags = acc.Tags()
    assert {"train/loss", "eval/loss", "eval/accuracy", "train/steps_per_sec"} <= \
        set(tags["scalars"])
    assert [e.step for e in acc.Scalars("eval/accuracy")] == [5, 10]
    assert tags["graph"] is True
    graph = acc.Graph()
    assert "hidden/MatMul" in {n.name for n in graph.node}
