"""``Saver(sharded=True)``: one SaveV2/RestoreV2 per device its variables asked for, each
writing its own shard, merged into one checkpoint as TensorFlow's sharded saver leaves it
(``<prefix>.index`` and ``<prefix>.data-0000k-of-0000n``); reading, listing, rotating and
refusing sharded checkpoints."""
import os

import numpy as np
import pytest

import dsl as fl
from runtime.checkpoint import CheckpointError, FLOWC_JSON, shard_prefix, write_checkpoint
from runtime.tensor_bundle import open_bundle

THREE = fl.ConfigProto(device_count={"CPU": 3})


def _variables():
    with fl.device("/cpu:1"):
        a = fl.Variable(np.arange(4, dtype=np.float32), name="a")
        b = fl.Variable(np.int32(7), name="b")
    with fl.device("/cpu:2"):
        c = fl.Variable(np.full([2, 3], 0.5, np.float32), name="c")
    return a, b, c


def test_each_device_writes_its_own_shard_and_restore_reads_them_back(graph, tmp_path):
    a, b, c = _variables()
    saver = fl.train.Saver(sharded=True)
    with fl.Session(config=THREE) as sess:
        sess.run([v.initializer for v in (a, b, c)])
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=3)
        assert fl.train.latest_checkpoint(str(tmp_path)) == path
        assert sorted(n for n in os.listdir(tmp_path) if "ckpt" in n) == [
            "model.ckpt-3.data-00000-of-00002", "model.ckpt-3.data-00001-of-00002",
            "model.ckpt-3.index", "model.ckpt-3.meta"]
        bundle = open_bundle(path)
        assert bundle.num_shards == 2
        assert [bundle.entry(k).shard_id for k in ("a", "b", "c")] == [0, 0, 1]
        assert fl.train.list_variables(path) == [("a", [4]), ("b", []), ("c", [2, 3])]
        np.testing.assert_array_equal(fl.train.load_variable(path, "c"), np.full([2, 3], 0.5))
        sess.run([a.assign(a * 0.0), c.assign(c + 1.0)])
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(a), np.arange(4))
        np.testing.assert_array_equal(sess.run(c), np.full([2, 3], 0.5))


def test_a_missing_shard_is_refused_by_name_and_nothing_is_restored(graph, tmp_path):
    a, b, c = _variables()
    saver = fl.train.Saver(sharded=True)
    with fl.Session(config=THREE) as sess:
        sess.run([v.initializer for v in (a, b, c)])
        path = saver.save(sess, str(tmp_path / "model.ckpt"))
        os.unlink(path + ".data-00001-of-00002")
        sess.run(a.assign(a + 10.0))
        with pytest.raises(CheckpointError, match=r"model.ckpt.data-00001-of-00002: no such "
                                                  r"file \(data shard 1 of the checkpoint"):
            saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(a), np.arange(4) + 10.0)


def test_old_sharded_checkpoints_are_rotated_shard_by_shard(graph, tmp_path):
    a, b, c = _variables()
    saver = fl.train.Saver(sharded=True, max_to_keep=2)
    with fl.Session(config=THREE) as sess:
        sess.run([v.initializer for v in (a, b, c)])
        for step in range(4):
            saver.save(sess, str(tmp_path / "m"), global_step=step)
    left = sorted(n for n in os.listdir(tmp_path) if n.endswith(".index"))
    assert left == ["m-2.index", "m-3.index"]
    assert sorted(n for n in os.listdir(tmp_path) if ".data-" in n) == [
        f"m-{s}.data-0000{k}-of-00002" for s in (2, 3) for k in (0, 1)]


def test_an_older_per_shard_checkpoint_still_restores(graph, tmp_path):
    """flowc's earlier sharded checkpoints: a JSON checkpoint per shard, read as one."""
    a, b, c = _variables()
    path = str(tmp_path / "old.ckpt")
    write_checkpoint(shard_prefix(path, 0, 2), {"a": np.ones(4, np.float32), "b": np.int32(2)},
                     format=FLOWC_JSON)
    write_checkpoint(shard_prefix(path, 1, 2), {"c": np.zeros([2, 3], np.float32)},
                     format=FLOWC_JSON)
    saver = fl.train.Saver(sharded=True)
    with fl.Session(config=THREE) as sess:
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(a), np.ones(4))
        assert sess.run(b) == 2
