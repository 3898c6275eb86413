"""The compile cache's verification record (``runtime/verified_files.py``): a start from the
cache does not hash files it hashed before while they are the same files, and a file changed
after that is hashed again and refused all the same; artifacts from elsewhere, and loads that
check a signature, always hash every file."""
import json
import logging
import os
import shutil
import time

import numpy as np
import pytest

import dsl as fl
from compiler.master import artifact_path, compile_step, verification_record
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize, write_artifact
from runtime import ArtifactError, load_artifact
from runtime.artifact import verify_artifact
from runtime.artifact_files import ArtifactFolder
from runtime.verified_files import VerificationRecord

TABLE = np.arange(4096, dtype=np.float32).reshape(64, 64) / 7.0     # 16 KiB: a .bin blob


def _step(optimized: bool = True):
    g = fl.Graph("vf")
    with g.as_default():
        x = fl.placeholder(fl.f32, [2, 64], name="x")
        y = fl.matmul(x, fl.constant(TABLE), name="y")
    step = make_step_graph(g, [x.output], [y.output])
    if optimized:
        optimize(step)
    return step


FEED = np.ones((2, 64), np.float32)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """An artifact written with a record of its files (as the compile cache writes one)."""
    folder = tmp_path_factory.mktemp("vf")
    path = str(folder / "art")
    write_artifact(_step(), path, verified=VerificationRecord(path + ".verified"))
    return path


@pytest.fixture
def art(written, tmp_path):
    """A copy of the artifact and a record of the copy's files, made by a first full load."""
    path = str(tmp_path / "art")
    shutil.copytree(written, path)
    load_artifact(path, verified=VerificationRecord(path + ".verified"))
    return path


@pytest.fixture
def hashes(monkeypatch):
    """The names of the files whose hash a load checks."""
    checked = []
    real = ArtifactFolder._check_hash

    def spy(self, actual, fpath, name):
        checked.append(name)
        return real(self, actual, fpath, name)
    monkeypatch.setattr(ArtifactFolder, "_check_hash", spy)
    return checked


def _record(path):
    return VerificationRecord(path + ".verified")


def test_the_writer_records_its_files_and_a_load_hashes_none(written, hashes):
    art = load_artifact(written, verified=_record(written))
    assert hashes == []
    np.testing.assert_allclose(art.run({"x": FEED})[0], FEED @ TABLE, rtol=1e-5)
    files = json.load(open(written + ".verified"))["files"]
    assert set(files) == set(json.load(open(os.path.join(written, "manifest.json")))["files"])


def test_a_copy_is_hashed_once_then_trusted(written, tmp_path, hashes):
    path = str(tmp_path / "copy")
    shutil.copytree(written, path)
    load_artifact(path, verified=_record(path))
    assert "cpu_0.so" in hashes and len(hashes) >= 3      # another folder: other inodes
    hashes.clear()
    load_artifact(path, verified=_record(path))
    assert hashes == []


@pytest.mark.parametrize("name", ["cpu_0.so", "cpu_0.c", "graph.ir", "blob"])
def test_a_file_changed_in_place_with_its_mtime_set_back_is_refused(art, name):
    """Same size, same inode, the old mtime: only the ctime tells it changed."""
    if name == "blob":
        name = next(f for f in os.listdir(art) if f.endswith(".bin"))
    fpath = os.path.join(art, name)
    before = os.stat(fpath)
    with open(fpath, "r+b") as f:
        f.seek(before.st_size // 2)
        byte = f.read(1)
        f.seek(before.st_size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(fpath, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(fpath)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == \
        (before.st_ino, before.st_size, before.st_mtime_ns)
    with pytest.raises(ArtifactError, match="does not match its manifest hash"):
        load_artifact(art, verified=_record(art))


def test_a_replaced_module_is_refused(art):
    so = os.path.join(art, "cpu_0.so")
    data = bytearray(open(so, "rb").read())
    data[len(data) // 2] ^= 0xFF
    os.remove(so)
    with open(so, "wb") as f:
        f.write(data)
    with pytest.raises(ArtifactError, match="cpu_0.so does not match its manifest hash"):
        load_artifact(art, verified=_record(art))


def test_a_record_no_older_than_a_file_is_not_trusted(art, hashes):
    """git's racy rule: a file whose ctime is not before the record's writing could have
    changed within one clock tick of it, so it is hashed."""
    record = art + ".verified"
    newest = max(os.stat(os.path.join(art, f)).st_ctime_ns for f in os.listdir(art))
    os.utime(record, ns=(newest, newest))
    load_artifact(art, verified=_record(art))
    assert "cpu_0.so" in hashes
    hashes.clear()
    load_artifact(art, verified=_record(art))         # rewritten by that load: trusted now
    assert hashes == []


@pytest.mark.parametrize("text", ["", "{", "[]", '{"format": "flowc-verified-files"}',
                                  '{"format": "flowc-verified-files", "version": 1, '
                                  '"files": {"cpu_0.so": [1, 2, 3]}}'])
def test_a_damaged_record_means_the_full_check(art, hashes, text):
    with open(art + ".verified", "w") as f:
        f.write(text)
    load_artifact(art, verified=_record(art))
    assert "cpu_0.so" in hashes


def test_a_record_that_lies_about_a_hash_is_not_believed(art, hashes):
    """A record entry counts only with the hash the manifest records."""
    record = json.load(open(art + ".verified"))
    for entry in record["files"].values():
        entry[5] = "0" * 64
    with open(art + ".verified", "w") as f:
        json.dump(record, f)
    os.utime(art + ".verified", ns=(time.time_ns() + 10**9,) * 2)
    load_artifact(art, verified=_record(art))
    assert "cpu_0.so" in hashes


def test_a_load_that_checks_a_signature_hashes_every_file(tmp_path, hashes):
    key = b"k" * 32
    path = str(tmp_path / "signed")
    write_artifact(_step(), path, sign_key=key, verified=_record(path))
    load_artifact(path, verify_key=key, verified=_record(path))
    assert "cpu_0.so" in hashes and "graph.ir" in hashes


def test_a_load_without_a_record_hashes_every_file(art, hashes):
    load_artifact(art)
    assert "cpu_0.so" in hashes


def test_the_compile_cache_starts_without_hashing_and_rebuilds_a_tampered_entry(
        tmp_path, monkeypatch, hashes, caplog):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path))
    art = compile_step(_step(False), PipelineOptions())
    assert hashes == []                                  # written, then loaded: no hashing
    path = art.path
    assert os.path.isfile(verification_record(path).path)
    again = compile_step(_step(False), PipelineOptions())
    assert hashes == []
    np.testing.assert_allclose(again.run({"x": FEED})[0], FEED @ TABLE, rtol=1e-5)
    so = os.path.join(path, "cpu_0.so")
    with open(so, "ab") as f:
        f.write(b"\0")
    with caplog.at_level(logging.WARNING, logger="flowc"):
        rebuilt = compile_step(_step(False), PipelineOptions())
    assert "does not load" in caplog.text and "cpu_0.so" in caplog.text
    assert rebuilt.path == artifact_path(os.path.basename(path))
    np.testing.assert_allclose(rebuilt.run({"x": FEED})[0], FEED @ TABLE, rtol=1e-5)


def test_a_file_that_changes_while_it_is_hashed_is_not_recorded(art, monkeypatch, hashes):
    os.remove(art + ".verified")
    real = ArtifactFolder._check_hash
    so = os.path.join(art, "cpu_0.so")

    touched = []

    def touch_while_hashing(self, actual, fpath, name):
        if name == "cpu_0.so" and not touched:     # the first check (verify_all's)
            touched.append(name)
            time.sleep(0.01)
            os.utime(so)                      # a new mtime and ctime: another version
        return real(self, actual, fpath, name)
    monkeypatch.setattr(ArtifactFolder, "_check_hash", touch_while_hashing)
    verify_artifact(art, verified=_record(art))          # hashes each file once
    monkeypatch.setattr(ArtifactFolder, "_check_hash", real)     # (the ``hashes`` spy)
    hashes.clear()
    verify_artifact(art, verified=_record(art))
    assert hashes == ["cpu_0.so"]
