"""fl.train.summary_iterator reads the event files FileWriter writes (TFRecord framing of Event
protos, checksums verified), with TF's Event fields; fl.io.tf_record_iterator gives the raw
records; damaged and truncated files are DataLossErrors."""
import glob
import os

import numpy as np
import pytest

pytest.importorskip("tensorboardX", reason="TensorBoard support needs the tensorboard extra")

import dsl as fl  # noqa: E402


def _event_file(tmp_path):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [3], name="x")
        fl.summary.scalar("loss", fl.reduce_sum(x))
        fl.summary.histogram("x", x)
        merged = fl.summary.merge_all()
    logdir = str(tmp_path / "run")
    with fl.Session(graph=g) as sess, fl.summary.FileWriter(logdir, graph=g) as writer:
        for step in range(3):
            writer.add_summary(sess.run(merged, {x: np.full(3, step, np.float32)}), step)
        writer.add_scalar("lr", 0.5, 10)
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    return path


def test_reads_filewriter_events(tmp_path):
    path = _event_file(tmp_path)
    events = list(fl.train.summary_iterator(path))
    assert events[0].file_version.startswith("brain.Event:")
    assert any(ev.graph_def for ev in events)
    seen = {}
    for ev in events:
        assert ev.wall_time > 0
        for v in ev.summary.value:
            if v.HasField("simple_value"):
                seen.setdefault(v.tag, []).append((ev.step, v.simple_value))
            else:
                assert v.tag == "x" and v.histo.num == 3
    assert seen == {"loss": [(0, 0.0), (1, 3.0), (2, 6.0)], "lr": [(10, 0.5)]}
    assert fl.compat.v1.train.summary_iterator is fl.train.summary_iterator
    records = list(fl.io.tf_record_iterator(path))
    assert len(records) == len(events) and records[0] == events[0].SerializeToString()


def test_damaged_and_truncated_files(tmp_path):
    path = _event_file(tmp_path)
    data = open(path, "rb").read()
    bad = tmp_path / "events.out.tfevents.bad"
    bad.write_bytes(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:])        # in record 0's data
    with pytest.raises(fl.errors.DataLossError, match="corrupted record at 0"):
        list(fl.train.summary_iterator(str(bad)))
    cut = tmp_path / "events.out.tfevents.cut"
    cut.write_bytes(data[:-3])
    with pytest.raises(fl.errors.DataLossError, match="truncated record"):
        list(fl.train.summary_iterator(str(cut)))
    with pytest.raises(fl.errors.NotFoundError):
        list(fl.train.summary_iterator(str(tmp_path / "missing")))
