"""Checkpoints: SaveV2/RestoreV2 in both backends, the files (safetensors + index, atomic), and
fl.train.Saver's policy (naming, state file, max_to_keep, keep-best). A checkpoint that does
not match is refused naming what does not, and leaves every variable as it was."""
import json
import os

import numpy as np
import pytest

import dsl as fl
from dsl.saver import (CheckpointError, Saver, best_checkpoint, get_checkpoint_state,
                       latest_checkpoint, list_variables, load_variable)
from runtime import checkpoint as ckpt
from runtime import resources
from runtime.dtypes import DType

BACKENDS = ("interpreter", "c")
F32 = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
F64 = np.array([1.5, -2.25, 1e300])
I64 = np.int64(2**40 + 3)


def _model():
    """Variables of three dtypes (one with a shape the checkpoint decides) and a Saver."""
    a = fl.Variable(F32, name="dense1/weights")
    b = fl.Variable(F64, name="b")
    c = fl.Variable(I64, name="global_step")
    d = fl.Variable(np.ones(2, np.float32), validate_shape=False, name="dyn")
    return [a, b, c, d]


def _scramble(sess, variables):
    """Give every variable another value (another size for the one that allows it)."""
    a, b, c, d = variables
    sess.run([a.assign(a * 0 - 7.0, read_value=False), b.assign(b * 0.0, read_value=False),
              c.assign(np.int64(-1), read_value=False),
              d.assign(np.full(5, 9.0, np.float32), read_value=False)])
    return _values(sess, variables)


def _values(sess, variables):
    return [np.asarray(x) for x in sess.run(list(variables))]


def _assert_values(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def _initial():
    return [F32, F64, np.asarray(I64), np.ones(2, np.float32)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_trip_restores_every_variable(graph, backend, tmp_path):
    variables = _model()
    saver = Saver()
    with fl.Session(backend=backend) as s:
        s.run(fl.global_variables_initializer())
        path = saver.save(s, str(tmp_path / "model.ckpt"), global_step=1000)
        assert path == str(tmp_path / "model.ckpt-1000") and ckpt.checkpoint_exists(path)
        assert latest_checkpoint(str(tmp_path)) == path
        assert _values(s, variables)[1].tolist() != _scramble(s, variables)[1].tolist()
        saver.restore(s, path)
        _assert_values(_values(s, variables), _initial())
    assert list_variables(str(tmp_path)) == [("b", [3]), ("dense1/weights", [2, 3]),
                                             ("dyn", [2]), ("global_step", [])]
    np.testing.assert_array_equal(load_variable(path, "b"), F64)


def test_checkpoints_move_between_backends_byte_for_byte(graph, tmp_path):
    variables = _model()
    saver = Saver()
    paths = {}
    for backend in BACKENDS:
        with fl.Session(backend=backend) as s:
            s.run(fl.global_variables_initializer())
            paths[backend] = saver.save(s, str(tmp_path / backend / "model.ckpt"))
    for suffix in (".index", ".data-00000-of-00001"):
        files = {b: open(p + suffix, "rb").read() for b, p in paths.items()}
        assert files["c"] == files["interpreter"]
    for writer, reader in (("c", "interpreter"), ("interpreter", "c")):
        with fl.Session(backend=reader) as s:
            saver.restore(s, paths[writer])
            _assert_values(_values(s, variables), _initial())


def test_saving_to_a_new_path_compiles_nothing(graph, tmp_path):
    _model()
    saver = Saver()
    with fl.Session(backend="c") as s:
        s.run(fl.global_variables_initializer())
        saver.save(s, str(tmp_path / "m"), global_step=1)
        count = s.compile_count
        saver.save(s, str(tmp_path / "other" / "m"), global_step=2)
        assert s.compile_count == count


def test_max_to_keep_deletes_the_oldest(graph, tmp_path):
    v = fl.Variable(np.zeros(2), name="v")
    saver = Saver(max_to_keep=2)
    run = tmp_path / "run"
    prefix = str(run / "model.ckpt")
    with fl.Session(backend="interpreter") as s:
        s.run(v.initializer)
        for step in range(4):
            s.run(v.assign_add([1.0, 1.0], read_value=False))
            saver.save(s, prefix, global_step=step)
    assert saver.last_checkpoints == [f"{prefix}-2", f"{prefix}-3"]
    assert sorted(os.listdir(run)) == sorted(
        ["checkpoint"] + [f"model.ckpt-{k}.index" for k in (2, 3)]
        + [f"model.ckpt-{k}.meta" for k in (2, 3)]           # the meta graphs go with them
        + [f"model.ckpt-{k}.data-00000-of-00001" for k in (2, 3)])
    state = get_checkpoint_state(str(run))
    assert state.model_checkpoint_path == f"{prefix}-3"
    assert state.all_model_checkpoint_paths == [f"{prefix}-2", f"{prefix}-3"]
    assert latest_checkpoint(str(run)) == f"{prefix}-3"
    np.testing.assert_array_equal(load_variable(f"{prefix}-2", "v"), [3.0, 3.0])
    # the state file is relative to its folder: a moved folder still works
    moved = tmp_path / "moved"
    os.rename(run, moved)
    assert latest_checkpoint(str(moved)) == str(moved / "model.ckpt-3")


def test_max_to_keep_none_keeps_everything_and_resaving_a_path_moves_it_last(graph, tmp_path):
    v = fl.Variable(1.0, name="v")
    saver = Saver(max_to_keep=None)
    with fl.Session(backend="interpreter") as s:
        s.run(v.initializer)
        for step in (1, 2, 3, 1):
            saver.save(s, str(tmp_path / "m"), global_step=step)
    assert saver.last_checkpoints == [str(tmp_path / f"m-{k}") for k in (2, 3, 1)]
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "m-1")
    assert all(ckpt.checkpoint_exists(str(tmp_path / f"m-{k}")) for k in (1, 2, 3))


def test_keep_best_keeps_the_best_checkpoints_however_old(graph, tmp_path):
    v = fl.Variable(0.0, name="v")
    saver = Saver(max_to_keep=1, keep_best="max", best_to_keep=2)
    prefix = str(tmp_path / "m")
    metrics = {0: 0.5, 1: 0.9, 2: 0.1, 3: 0.7, 4: 0.95, 5: float("nan")}
    with fl.Session(backend="interpreter") as s:
        s.run(v.initializer)
        for step, metric in metrics.items():
            s.run(v.assign(float(step), read_value=False))
            saver.save(s, prefix, global_step=step, metric=metric)
        saver.save(s, prefix, global_step=6)                    # no metric: only recent
    kept = {f"{prefix}-4", f"{prefix}-1", f"{prefix}-6"}
    assert saver.best_checkpoints == [(f"{prefix}-4", 0.95), (f"{prefix}-1", 0.9)]
    assert set(saver.last_checkpoints) == kept
    for step in range(7):
        assert ckpt.checkpoint_exists(f"{prefix}-{step}") == (f"{prefix}-{step}" in kept)
    state = get_checkpoint_state(str(tmp_path))
    assert state.keep_best == "max" and state.best_model_checkpoint_path == f"{prefix}-4"
    assert state.best_checkpoints == [(f"{prefix}-4", 0.95), (f"{prefix}-1", 0.9)]
    assert best_checkpoint(str(tmp_path)) == f"{prefix}-4"
    assert load_variable(best_checkpoint(str(tmp_path)), "v") == 4.0
    # a later run takes the books over and keeps rotating them
    again = Saver(max_to_keep=1, keep_best="max", best_to_keep=2)
    again.recover_last_checkpoints(state.all_model_checkpoint_paths, state.best_checkpoints)
    with fl.Session(backend="interpreter") as s:
        s.run(v.initializer)
        again.save(s, prefix, global_step=7, metric=0.99)
    assert again.best_checkpoints == [(f"{prefix}-7", 0.99), (f"{prefix}-4", 0.95)]
    assert not ckpt.checkpoint_exists(f"{prefix}-1") and not ckpt.checkpoint_exists(f"{prefix}-6")


def test_one_checkpoint_every_n_hours_is_kept_for_good(graph, tmp_path, monkeypatch):
    import dsl.saver as saver_module
    clock = {"now": 0.0}
    monkeypatch.setattr(saver_module, "time", type("Clock", (), {
        "time": staticmethod(lambda: clock["now"])}))
    v = fl.Variable(0.0, name="v")
    saver = Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1.0)     # next keeper: t > 3600
    with fl.Session(backend="interpreter") as s:
        s.run(v.initializer)
        for step, t in enumerate([1000, 2000, 4000, 5000, 6000]):
            clock["now"] = float(t)
            saver.save(s, str(tmp_path / "m"), global_step=step)
    assert [k for k in range(5) if ckpt.checkpoint_exists(str(tmp_path / f"m-{k}"))] == [2, 4]
    assert saver.last_checkpoints == [str(tmp_path / "m-4")]


def test_saver_arguments_are_checked(graph, tmp_path):
    with pytest.raises(ValueError, match="no variables to save"):
        Saver()
    v = fl.Variable(1.0, name="v")
    with pytest.raises(ValueError, match="keep_best"):
        Saver(keep_best="lowest")
    with pytest.raises(ValueError, match="saved twice"):
        Saver({"x": v, "y": v})
    saver = Saver({"renamed": v})
    with fl.Session(backend="interpreter") as s:
        s.run(v.initializer)
        with pytest.raises(ValueError, match="keep_best"):
            saver.save(s, str(tmp_path / "m"), metric=1.0)
        with pytest.raises(ValueError, match="None"):
            saver.restore(s, None)
        saver.save(s, str(tmp_path / "m"))
    assert list_variables(str(tmp_path / "m")) == [("renamed", [])]
    assert latest_checkpoint(str(tmp_path / "nothing here")) is None


# --- refused checkpoints ----------------------------------------------------------------------
def _data_path(prefix):
    return prefix + ".data-00000-of-00001"


def _truncate(prefix, tmp_path):
    p = _data_path(prefix)
    raw = open(p, "rb").read()
    open(p, "wb").write(raw[:-5])
    return r"data-00000-of-00001: '.*' \(\d+ bytes at offset \d+\) runs past the end of the " \
        r"file \(\d+ bytes\): the file is truncated"


def _flip_byte(prefix, tmp_path):
    p = _data_path(prefix)
    raw = bytearray(open(p, "rb").read())
    raw[-3] ^= 0x40
    open(p, "wb").write(bytes(raw))
    return r"data-00000-of-00001: checksum mismatch for '.*' \(\d+ bytes at offset \d+\): " \
        r"the file is damaged"


def _flip_index_byte(prefix, tmp_path):
    p = prefix + ".index"
    raw = bytearray(open(p, "rb").read())
    raw[20] ^= 0x40
    open(p, "wb").write(bytes(raw))
    return r"model.ckpt.index: not a readable tensor-bundle index \(truncated or damaged\): " \
        r"checksum mismatch"


def _truncate_index(prefix, tmp_path):
    p = prefix + ".index"
    raw = open(p, "rb").read()
    open(p, "wb").write(raw[:30])
    return r"model.ckpt.index: not a readable tensor-bundle index .*shorter than a table footer"


def _drop_index(prefix, tmp_path):
    os.unlink(prefix + ".index")
    return r"is incomplete: its index .*model.ckpt.index is missing"


def _other_data(prefix, tmp_path):
    other = ckpt.write_checkpoint(str(tmp_path / "other"), {"dense1/weights": F32 * 2})
    os.replace(_data_path(str(tmp_path / "other")), _data_path(prefix))
    assert other
    return r"data-00000-of-00001: .*(the file is truncated|checksum mismatch)"


# flowc's older checkpoints (safetensors + JSON index), still read
def _json_data_path(prefix):
    return os.path.join(os.path.dirname(prefix), ckpt.read_index(prefix)["data_file"])


def _as_json(prefix):
    tensors = ckpt.load_checkpoint(prefix)
    ckpt.delete_checkpoint(prefix)
    ckpt.write_checkpoint(prefix, tensors, format=ckpt.FLOWC_JSON)


def _json_truncate(prefix, tmp_path):
    _as_json(prefix)
    p = _json_data_path(prefix)
    raw = open(p, "rb").read()
    open(p, "wb").write(raw[:-5])
    return r"is truncated \(\d+ bytes, the index says \d+\)"


def _json_flip_byte(prefix, tmp_path):
    _as_json(prefix)
    p = _json_data_path(prefix)
    raw = bytearray(open(p, "rb").read())
    raw[-3] ^= 0x40
    open(p, "wb").write(bytes(raw))
    return r"is corrupt \(its SHA-256 does not match the index\)"


def _json_drop_index(prefix, tmp_path):
    _as_json(prefix)
    os.unlink(ckpt.index_path(prefix))
    return r"is incomplete: its index .* is missing"


def _json_other_data(prefix, tmp_path):
    _as_json(prefix)
    ckpt.write_checkpoint(str(tmp_path / "other"), {"dense1/weights": F32 * 2},
                          format=ckpt.FLOWC_JSON)
    os.replace(_json_data_path(str(tmp_path / "other")), _json_data_path(prefix))
    return r"data file .* is (truncated|longer than its index says|corrupt)"


def _rewrite(tensors):
    def corrupt(prefix, tmp_path):
        ckpt.write_checkpoint(prefix, tensors)
    return corrupt


_GOOD = {"dense1/weights": F32, "b": F64, "global_step": np.asarray(I64),
         "dyn": np.ones(3, np.float32)}
CORRUPTIONS = {
    "truncated": _truncate,
    "flipped_byte": _flip_byte,
    "missing_index": _drop_index,
    "index_data_mismatch": _other_data,
    "damaged_index": _flip_index_byte,
    "truncated_index": _truncate_index,
    "json_truncated": _json_truncate,
    "json_flipped_byte": _json_flip_byte,
    "json_missing_index": _json_drop_index,
    "json_index_data_mismatch": _json_other_data,
    "missing_variable": (_rewrite({k: v for k, v in _GOOD.items() if k != "b"}),
                         r"not in the checkpoint: 'b'"),
    "wrong_shape": (_rewrite(dict(_GOOD, **{"dense1/weights": F32.T.copy()})),
                    r"wrong shape: 'dense1/weights' is f32\[3,2\] in the checkpoint, "
                    r"f32\[2,3\] here"),
    "wrong_dtype": (_rewrite(dict(_GOOD, global_step=np.asarray(I64, np.int32))),
                    r"wrong dtype: 'global_step' is i32 in the checkpoint, i64 here"),
    "all_at_once": (_rewrite({"dense1/weights": F32.reshape(6), "b": np.zeros(3, np.float32)}),
                    r"not in the checkpoint: 'global_step', 'dyn'; wrong dtype: 'b' is f32 .*; "
                    r"wrong shape: 'dense1/weights' is f32\[6\]"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_a_bad_checkpoint_is_refused_and_changes_no_variable(graph, backend, kind, tmp_path):
    variables = _model()
    saver = Saver()
    prefix = str(tmp_path / "model.ckpt")
    with fl.Session(backend=backend) as s:
        s.run(fl.global_variables_initializer())
        saver.save(s, prefix)
        corrupt = CORRUPTIONS[kind]
        if isinstance(corrupt, tuple):
            corrupt, pattern = corrupt
            corrupt(prefix, tmp_path)
        else:
            pattern = corrupt(prefix, tmp_path)
        before = _scramble(s, variables)
        with pytest.raises(CheckpointError, match=pattern) as e:
            saver.restore(s, prefix)
        assert "save/RestoreV2" in str(e.value)
        _assert_values(_values(s, variables), before)


def test_a_missing_checkpoint_is_refused(graph, tmp_path):
    _model()
    saver = Saver()
    with fl.Session(backend="interpreter") as s:
        with pytest.raises(CheckpointError, match=r"no checkpoint at '.*nope' \(no file"):
            saver.restore(s, str(tmp_path / "nope"))


@pytest.mark.parametrize("text", ['model_checkpoint_path: "x', "model_checkpoint_path x",
                                  'all_model_checkpoint_paths: "x"', 'no_such_field: "x"',
                                  '{"format": "something else"}', "last_preserved_timestamp: y"])
def test_a_corrupt_state_file_is_an_error(tmp_path, text):
    (tmp_path / "checkpoint").write_text(text)
    with pytest.raises(CheckpointError, match="checkpoint state .*checkpoint is corrupt"):
        latest_checkpoint(str(tmp_path))


def test_the_c_runtime_checks_what_a_host_op_returns(graph, tmp_path, monkeypatch):
    """Static outputs are copied into after a dtype and shape check naming the tensor."""
    variables = _model()
    saver = Saver()
    with fl.Session(backend="c") as s:
        s.run(fl.global_variables_initializer())
        saver.save(s, str(tmp_path / "m"))
        before = _scramble(s, variables)
        monkeypatch.setitem(resources._host_ops, "RestoreV2", lambda store, node, attrs, prefix: [
            np.zeros((3, 2), np.float32), F64, np.asarray(I64), np.ones(3, np.float32)])
        with pytest.raises(CheckpointError, match=r"output 0 \('dense1/weights'\): the step "
                                                  r"expects f32\[2, 3\]"):
            saver.restore(s, str(tmp_path / "m"))
        _assert_values(_values(s, variables), before)


# --- crashes and unwritable folders -----------------------------------------------------------
def _fail_on_call(monkeypatch, module_attr, n):
    """Make ``os.<module_attr>`` raise an I/O error on its ``n``-th call (1-based)."""
    real = getattr(os, module_attr)
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == n:
            raise OSError(5, "Input/output error (simulated crash)")
        return real(*args, **kwargs)
    monkeypatch.setattr(os, module_attr, flaky)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("crash", [("fsync", 1), ("fsync", 2), ("replace", 1), ("replace", 2),
                                   ("fsync", 3)],
                         ids=["fsync_data", "fsync_index", "rename_data", "rename_index",
                              "fsync_folder"])
def test_a_crash_mid_save_leaves_the_previous_checkpoint(graph, backend, crash, tmp_path,
                                                          monkeypatch):
    v = fl.Variable(np.array([1.0, 2.0]), name="v")
    saver = Saver()
    prefix = str(tmp_path / "model.ckpt")
    with fl.Session(backend=backend) as s:
        s.run(v.initializer)
        first = saver.save(s, prefix, global_step=1)
        saver.save(s, prefix)                                 # an unnumbered one, overwritten below
        s.run(v.assign([5.0, 6.0], read_value=False))
        with monkeypatch.context() as m:
            _fail_on_call(m, *crash)
            with pytest.raises(CheckpointError, match="simulated crash"):
                saver.save(s, prefix, global_step=2)
        assert latest_checkpoint(str(tmp_path)) == prefix     # the state file was not touched
        assert ckpt.checkpoint_exists(f"{prefix}-2") == (crash == ("fsync", 3))
        with monkeypatch.context() as m:
            _fail_on_call(m, *crash)
            with pytest.raises(CheckpointError, match="simulated crash"):
                saver.save(s, prefix)                         # the same prefix again
        assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
        # A crash before the renames leaves the old checkpoint of the same prefix; one
        # between them leaves none there (a bundle's data file has a fixed name, so its old
        # index goes first), never an index over data it does not describe.
        renaming = crash[0] == "replace"
        assert ckpt.checkpoint_exists(prefix) == (not renaming)
        for path in (first,) if renaming else (first, prefix):
            saver.restore(s, path)
            want = [5.0, 6.0] if path == prefix and crash == ("fsync", 3) else [1.0, 2.0]
            np.testing.assert_array_equal(s.run(v), want)
            s.run(v.assign([5.0, 6.0], read_value=False))
        saver.save(s, prefix, global_step=2)                  # and saving works again
        saver.restore(s, f"{prefix}-2")
        np.testing.assert_array_equal(s.run(v), [5.0, 6.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_saving_into_an_unwritable_folder_is_a_clear_error(graph, backend, tmp_path):
    v = fl.Variable(1.0, name="v")
    saver = Saver()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with fl.Session(backend=backend) as s:
        s.run(v.initializer)
        with pytest.raises(CheckpointError, match=r"cannot write checkpoint '.*a_file/model.ckpt-3'"
                                                  r": cannot create the folder '.*a_file' "
                                                  r"\(File exists\)"):
            saver.save(s, str(blocker / "model.ckpt"), global_step=3)
    assert latest_checkpoint(str(tmp_path)) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_saving_into_a_read_only_folder_is_a_clear_error(graph, tmp_path):
    v = fl.Variable(1.0, name="v")
    saver = Saver()
    os.chmod(tmp_path, 0o500)
    try:
        with fl.Session(backend="interpreter") as s:
            s.run(v.initializer)
            with pytest.raises(CheckpointError, match="is not writable"):
                saver.save(s, str(tmp_path / "m"))
    finally:
        os.chmod(tmp_path, 0o700)


def test_index_is_written_last_and_describes_the_data(tmp_path):
    order = []
    real = os.replace

    def spy(src, dst):
        order.append(os.path.basename(dst))
        return real(src, dst)
    prefix = str(tmp_path / "x")
    try:
        os.replace = spy
        ckpt.write_checkpoint(prefix, {"t": np.arange(3, dtype=np.int16)})
        ckpt.write_checkpoint(prefix + "j", {"t": np.arange(3, dtype=np.int16)},
                              format=ckpt.FLOWC_JSON)
    finally:
        os.replace = real
    assert order[:2] == ["x.data-00000-of-00001", "x.index"]
    assert ckpt.list_checkpoint(prefix) == {"t": (DType.i16, (3,))}
    assert os.path.getsize(_data_path(prefix)) == 6
    assert order[-1] == "xj.index.json" and order[2].endswith(".safetensors")
    index = json.loads(open(ckpt.index_path(prefix + "j")).read())
    assert index["tensors"] == {"t": {"dtype": "i16", "shape": [3]}}
    assert index["data_size"] == os.path.getsize(_json_data_path(prefix + "j"))