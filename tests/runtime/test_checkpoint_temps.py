"""Temporary files of checkpoint saves (``runtime/checkpoint.py``): a save killed mid-write
leaves its ``.<name>.<12 hex>.tmp`` file behind; the next save of the same prefix (or the next
write of the same index or state file) removes it. Only flowc's own temporary names of that
file are removed, and only those no live writer holds: a concurrent save keeps its own, and
every other file stays."""
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

from repo_paths import ROOT
from runtime import checkpoint as ckpt
from runtime.dtypes import DType

pytestmark = pytest.mark.skipif(ckpt.fcntl is None, reason="no flock: temporary files are kept")

# A child that writes checkpoint ``argv[1]`` and stops at the ``argv[2]``-th fsync (1: the
# data file's, 2: the index's, both still temporary files; 3: the folder's), its temporary
# files written and held, to be killed there.
_KILLED_SAVE = """
import os, sys
import numpy as np
from runtime import checkpoint
calls = [0]
real = os.fsync
def fsync(fd):
    calls[0] += 1
    if calls[0] == int(sys.argv[2]):
        print("writing", flush=True)
        sys.stdin.read()                 # until the parent kills this process
    return real(fd)
os.fsync = fsync
checkpoint.write_checkpoint(sys.argv[1], {"v": np.arange(1000.0)})
"""


def _temps(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


@pytest.mark.parametrize("stop", [1, 2], ids=["killed_writing_data", "killed_writing_index"])
def test_the_next_save_removes_what_a_killed_save_left(tmp_path, stop):
    prefix = str(tmp_path / "model.ckpt")
    ckpt.write_checkpoint(prefix, {"v": np.zeros(3)})
    child = subprocess.Popen([sys.executable, "-c", _KILLED_SAVE, prefix, str(stop)], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": ROOT}, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = threading.Timer(120, child.kill)         # bounded, whatever the child does
    deadline.start()
    try:
        line = child.stdout.readline()                 # EOF if the child failed
        assert line == "writing\n", child.stderr.read()
        left = _temps(tmp_path)
        assert len(left) == stop                       # the killed save's, half done
    finally:
        deadline.cancel()
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
    assert ckpt.read_checkpoint(prefix, ["v"], [DType.f64], [None])[0].tolist() == [0] * 3
    ckpt.write_checkpoint(prefix, {"v": np.ones(3)})
    assert _temps(tmp_path) == []
    assert ckpt.read_checkpoint(prefix, ["v"], [DType.f64], [None])[0].tolist() == [1] * 3


def test_only_flowc_temporary_names_of_the_same_file_are_removed(tmp_path):
    prefix = str(tmp_path / "model.ckpt")
    stale = [".model.ckpt.0123456789ab.tmp",            # a data file's
             ".model.ckpt.index.json.a1b2c3d4e5f6.tmp",  # the index's
             ".checkpoint.00000000ffff.tmp"]             # a Saver state file's
    others = ["model.ckpt.tmp", ".model.ckpt.tmp", ".model.ckpt.notes.tmp",
              ".model.ckpt.0123456789AB.tmp", ".model.ckpt.0123456789ab.tmp.bak",
              ".model.ckpt.0123456789abc.tmp", "model.ckpt.0123456789ab.tmp",
              ".model.ckpt-1.0123456789ab.tmp",          # another prefix's
              ".other.0123456789ab.tmp"]
    for name in stale + others:
        (tmp_path / name).write_text("left behind")
    (tmp_path / "user_file").write_text("keep me")
    os.mkdir(tmp_path / ".model.ckpt.aaaaaaaaaaaa.tmp")  # not a regular file
    os.symlink(tmp_path / "user_file", tmp_path / ".model.ckpt.bbbbbbbbbbbb.tmp")
    ckpt.write_checkpoint(prefix, {"v": np.ones(2)})
    ckpt.write_checkpoint(prefix, {"v": np.ones(2)}, format=ckpt.FLOWC_JSON)  # its index's
    ckpt.write_file_atomically(str(tmp_path / "checkpoint"), b"{}\n")
    left = set(os.listdir(tmp_path))
    assert not left & set(stale)
    assert set(others) <= left
    assert {".model.ckpt.aaaaaaaaaaaa.tmp", ".model.ckpt.bbbbbbbbbbbb.tmp"} <= left
    assert (tmp_path / "user_file").read_text() == "keep me"


def test_a_save_in_progress_keeps_its_temporary_file(tmp_path, monkeypatch):
    """Two saves of one prefix at once: the second does not take the first's temporary file
    for a stale one; both finish."""
    prefix = str(tmp_path / "model.ckpt")
    writing, release = threading.Event(), threading.Event()
    first = threading.current_thread()
    real = os.fsync
    done = []

    def fsync(fd):
        if threading.current_thread() is not first and not writing.is_set():
            writing.set()
            assert release.wait(60)
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)

    def slow_save():
        ckpt.write_checkpoint(prefix, {"v": np.full(4, 2.0)})
        done.append(True)
    thread = threading.Thread(target=slow_save)
    thread.start()
    try:
        assert writing.wait(60)
        held = _temps(tmp_path)
        assert len(held) == 1
        ckpt.write_checkpoint(prefix, {"v": np.full(4, 3.0)})
        assert set(held) <= set(_temps(tmp_path))      # still there, still being written
    finally:
        release.set()
        thread.join(60)
    assert done and _temps(tmp_path) == []
    assert ckpt.read_checkpoint(prefix, ["v"], [DType.f64], [None])[0].tolist() == [2] * 4
