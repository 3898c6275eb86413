"""Checkpoints between TensorFlow and flowc, in both directions, against files TensorFlow
wrote and read (tests/data/tf_checkpoints/, made by record_tf_checkpoints.py; this test needs
no TensorFlow): a TF1 program (linear_adam.py) restores in flowc what TensorFlow saved and
goes on training as TensorFlow did; what flowc saves is what TensorFlow was recorded reading."""
from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest

import dsl as tf
from repo_paths import ROOT
from runtime import checkpoint as ckpt
from runtime.checkpoint_state import parse_state_text

HERE = os.path.join(ROOT, "tests", "data", "tf_checkpoints")
TF_WRITTEN = os.path.join(HERE, "tf_written")
FLOWC_WRITTEN = os.path.join(HERE, "flowc_written")
BACKENDS = ("interpreter", "c")


def _program():
    spec = importlib.util.spec_from_file_location("linear_adam",
                                                  os.path.join(HERE, "linear_adam.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorded(name):
    with np.load(os.path.join(HERE, name + ".npz")) as z:
        return {k: z[k] for k in z.files}


def _listing(path):
    return [f"{n}:{s}" for n, s in tf.train.list_variables(path)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_checkpoint_tensorflow_wrote_restores_into_a_flowc_graph(backend):
    program, want = _program(), _recorded("tf_written")
    xs, _ = program.data()
    with tf.Graph().as_default():
        x, y, pred, train, saver = program.build()
        latest = tf.train.latest_checkpoint(TF_WRITTEN)      # TensorFlow's state file
        assert latest == os.path.join(TF_WRITTEN, "model.ckpt-5")
        with tf.Session(backend=backend) as sess:
            saver.restore(sess, latest)                      # every variable, Adam's too
            assert sess.run(tf.train.get_global_step()) == 5
            np.testing.assert_allclose(sess.run(pred, {x: xs}), want["pred"], rtol=1e-6)
            program.train(sess, x, y, train, 1)              # goes on as TensorFlow did
            np.testing.assert_allclose(sess.run(pred, {x: xs}),
                                       want["pred_after_one_more_step"], rtol=1e-5, atol=1e-6)


def test_listing_and_reading_a_tensorflow_checkpoint():
    want = _recorded("tf_written")
    assert _listing(TF_WRITTEN) == list(want["list_variables"])
    reader = tf.train.load_checkpoint(TF_WRITTEN)
    assert reader.get_variable_to_shape_map()["linear/w"] == [3, 1]
    assert reader.get_variable_to_dtype_map()["global_step"] == tf.int64
    assert reader.get_tensor("global_step") == 5
    assert tf.train.checkpoint_exists(os.path.join(TF_WRITTEN, "model.ckpt-5"))


def test_tensorflow_reads_what_flowc_writes(tmp_path):
    """TensorFlow was recorded restoring flowc_written/; flowc writes those very bytes for
    those values today, and the values TensorFlow read are flowc's."""
    read = _recorded("tf_reads_flowc")
    assert str(read["latest_checkpoint"]) == "model.ckpt-5"
    assert _listing(FLOWC_WRITTEN) == list(read["list_variables"])
    committed = os.path.join(FLOWC_WRITTEN, "model.ckpt-5")
    tensors = ckpt.load_checkpoint(committed)
    for name, value in tensors.items():
        np.testing.assert_array_equal(read["restored/" + name], value)
        np.testing.assert_array_equal(read["reader/" + name], value)
    program = _program()
    with tf.Graph().as_default():
        x, y, pred, train, saver = program.build()
        with tf.Session() as sess:
            saver.restore(sess, committed)
            np.testing.assert_allclose(sess.run(pred, {x: program.data()[0]}), read["pred"],
                                       rtol=1e-6)
            path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=5,
                              write_meta_graph=False)
    for suffix in (".index", ".data-00000-of-00001"):
        with open(path + suffix, "rb") as mine, open(committed + suffix, "rb") as theirs:
            assert mine.read() == theirs.read(), suffix
    # The state file holds TensorFlow's fields only, in text format.
    state = parse_state_text((tmp_path / "checkpoint").read_text())
    assert state["model_checkpoint_path"] == "model.ckpt-5"
    assert state["all_model_checkpoint_paths"] == ["model.ckpt-5"]
    assert len(state["all_model_checkpoint_timestamps"]) == 1
    assert not any(line.startswith("#") for line in
                   (tmp_path / "checkpoint").read_text().splitlines())


def test_the_bundle_writer_writes_tensorflows_bytes(tmp_path):
    """The same tensors written by flowc give TensorFlow's index and data, byte for byte."""
    theirs = os.path.join(TF_WRITTEN, "model.ckpt-5")
    mine = str(tmp_path / "copy")
    ckpt.write_checkpoint(mine, ckpt.load_checkpoint(theirs))
    for suffix in (".index", ".data-00000-of-00001"):
        with open(mine + suffix, "rb") as a, open(theirs + suffix, "rb") as b:
            assert a.read() == b.read(), suffix


def test_a_saved_checkpoint_has_tensorflows_files(graph, tmp_path):
    v = tf.Variable(np.arange(3.0, dtype=np.float32), name="v")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(v.initializer)
        p = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=3)
    assert tf.gfile.Exists(p + ".index")
    assert tf.gfile.Exists(p + ".data-00000-of-00001")
    assert tf.train.latest_checkpoint(str(tmp_path)) == p
    assert tf.train.list_variables(str(tmp_path)) == [("v", [3])]
    np.testing.assert_array_equal(tf.train.load_checkpoint(p).get_tensor("v"), [0, 1, 2])


def test_a_damaged_tensorflow_checkpoint_is_refused_by_file(tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(TF_WRITTEN, folder)
    data = folder / "model.ckpt-5.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:-10])
    program = _program()
    with tf.Graph().as_default():
        _, _, _, _, saver = program.build()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            with pytest.raises(tf.errors.DataLossError,
                               match=r"model.ckpt-5.data-00000-of-00001: '.*' .* runs past the "
                                     r"end of the file .*: the file is truncated"):
                saver.restore(sess, str(folder / "model.ckpt-5"))


def test_tensorflow_reads_a_sharded_flowc_checkpoint(tmp_path):
    """A sharded save is merged into one checkpoint (data shard per device); TensorFlow was
    recorded reading flowc_sharded/, and flowc writes those bytes today."""
    import sys
    sys.path.insert(0, HERE)
    try:
        import record_tf_checkpoints
    finally:
        sys.path.remove(HERE)
    read = _recorded("tf_reads_flowc_sharded")
    committed = os.path.join(HERE, "flowc_sharded", "model.ckpt-1")
    assert str(read["latest_checkpoint"]) == "model.ckpt-1"
    tensors = ckpt.load_checkpoint(committed)
    assert sorted(tensors) == ["a", "b", "c"]
    for name, value in tensors.items():
        np.testing.assert_array_equal(read[name], value)
        assert read[name].dtype == value.dtype
    path = record_tf_checkpoints.sharded(str(tmp_path))
    for suffix in (".index", ".data-00000-of-00002", ".data-00001-of-00002"):
        with open(path + suffix, "rb") as mine, open(committed + suffix, "rb") as theirs:
            assert mine.read() == theirs.read(), suffix
