"""An artifact loads nothing from outside its folder, nothing its manifest does not hash, and
nothing that is not a flowc module: each such artifact is refused *before* any ``dlopen`` (a
shared object's constructor runs as it is loaded) with an ArtifactError that names the artifact
and the manifest entry. The manifest's own checksum is recomputed in every case: anyone can
recompute it, so it is no defence against an edit (the key is: test_artifact_signing.py)."""
import hashlib
import os
import shutil
import threading

import numpy as np
import pytest

import runtime.artifact as artifact_mod
from runtime import ArtifactError, load_artifact
from runtime.artifact import MANIFEST, write_manifest
from runtime.cuda_module import load_cuda_artifact
from artifact_cases import (BIG, build_foreign_library, read_manifest, small_feeds,
                            write_small_artifact)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return write_small_artifact(tmp_path_factory.mktemp("confine") / "good")


@pytest.fixture
def art(built, tmp_path):
    path = tmp_path / "art"
    shutil.copytree(built, path)
    return path


@pytest.fixture
def foreign(tmp_path):
    """A foreign shared object outside the artifact, and the marker its constructor writes."""
    return build_foreign_library(tmp_path / "evil")


def edit(path, change):
    manifest = read_manifest(path)
    change(manifest)
    write_manifest(str(path), manifest)           # a valid checksum: anyone can write one


def refused_unloaded(path, marker, *words, load=load_artifact):
    with pytest.raises(ArtifactError) as info:
        load(str(path))
    assert not os.path.exists(marker), "the foreign shared object was loaded (its constructor ran)"
    msg = str(info.value)
    for word in (str(path),) + words:
        assert word in msg, msg
    return msg


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_good_artifact_still_loads_and_runs(built):
    y, z = load_artifact(built).run(small_feeds())
    np.testing.assert_array_equal(y, [[0.0, 1.0, 5.0]])
    np.testing.assert_array_equal(z, np.arange(BIG, dtype=np.float32))


def test_module_outside_the_folder_is_refused(art, foreign):
    so, marker = foreign
    rel = os.path.relpath(so, str(art))                 # ../evil/foreign.so
    assert rel.startswith("..")
    edit(art, lambda m: m["devices"][0].update(module=rel))
    msg = refused_unloaded(art, marker, "devices[0].module", rel)
    assert "outside" in msg or "plain file name" in msg


def test_module_by_absolute_path_is_refused(art, foreign):
    so, marker = foreign
    edit(art, lambda m: m["devices"][0].update(module=so))
    refused_unloaded(art, marker, "devices[0].module")


def test_module_not_in_the_hashed_files_is_refused(art, foreign):
    so, marker = foreign
    shutil.copyfile(so, art / "extra.so")             # inside the folder, but not hashed
    edit(art, lambda m: m["devices"][0].update(module="extra.so"))
    msg = refused_unloaded(art, marker, "devices[0].module", "extra.so")
    assert "files" in msg


def test_a_hashed_shared_object_that_is_not_a_flowc_module_is_never_loaded(art, foreign):
    so, marker = foreign
    shutil.copyfile(so, art / "extra.so")

    def change(m):
        m["files"]["extra.so"] = sha(art / "extra.so")
        m["devices"][0]["module"] = "extra.so"
    edit(art, change)
    msg = refused_unloaded(art, marker, "devices[0].module", "not a flowc module")
    assert "flowc_abi_version" in msg


def test_a_module_that_is_a_symbolic_link_is_refused(art, tmp_path):
    outside = tmp_path / "elsewhere.so"
    shutil.copyfile(art / "cpu_0.so", outside)         # the same bytes: its hash matches
    os.remove(art / "cpu_0.so")
    os.symlink(outside, art / "cpu_0.so")
    msg = refused_unloaded(art, str(tmp_path / "no-marker"), "cpu_0.so")
    assert "symbolic link" in msg


def test_a_module_that_is_a_named_pipe_is_refused_without_hanging(art):
    """Opening a FIFO for reading blocks until a writer comes; the loader must not wait."""
    os.remove(art / "cpu_0.so")
    os.mkfifo(art / "cpu_0.so")
    outcome = []

    def load():
        try:
            load_artifact(str(art))
        except ArtifactError as e:
            outcome.append(str(e))
    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(120)                                # a bound on a hang, not a timing check
    if worker.is_alive():                           # unblock the reader so the test can end
        with open(art / "cpu_0.so", "wb"):
            pass
        worker.join(30)
        pytest.fail("loading an artifact whose module is a named pipe hung")
    assert outcome and "not a regular file" in outcome[0] and "cpu_0.so" in outcome[0]


@pytest.mark.parametrize("name", ["../graph.ir", "/etc/hostname", ".", "", "sub/graph.ir",
                                  MANIFEST])
def test_files_entries_must_be_plain_names_in_the_folder(art, name):
    edit(art, lambda m: m["files"].update({name: "0" * 64}))
    refused_unloaded(art, str(art / "no-marker"), "files")


def test_ir_entry_must_be_a_hashed_file_of_the_folder(art):
    edit(art, lambda m: m.update(ir="../outside.ir"))
    refused_unloaded(art, str(art / "no-marker"), "ir")


def test_big_constants_blobs_are_hashed_and_checked(art):
    blobs = sorted(n for n in os.listdir(art) if n.endswith(".bin"))
    assert blobs, "the fixture has a big constant: its .bin blob"
    files = read_manifest(art)["files"]
    assert set(blobs) <= set(files)
    with open(art / blobs[0], "r+b") as f:
        f.write(b"\x01\x02\x03\x04")
    refused_unloaded(art, str(art / "no-marker"), blobs[0], "does not match")


def test_module_swapped_after_verification_is_not_loaded(art, foreign, monkeypatch):
    """What ``dlopen`` loads is the file that was hashed: swapping the module between the
    hash check and the load is refused (the module is hashed through the descriptor that is
    then loaded)."""
    so, marker = foreign
    real_check = artifact_mod._checked_folder

    def verify_then_swap(path, *args, **kwargs):
        folder = real_check(path, *args, **kwargs)
        shutil.copyfile(so, os.path.join(path, "cpu_0.so.new"))
        os.replace(os.path.join(path, "cpu_0.so.new"), os.path.join(path, "cpu_0.so"))
        return folder
    monkeypatch.setattr(artifact_mod, "_checked_folder", verify_then_swap)
    refused_unloaded(art, marker, "cpu_0.so", "does not match")


def test_gpu_device_code_outside_the_folder_is_refused(art, foreign):
    """A GPU module's fatbin is read from the folder only: checked before any GPU is touched."""
    so, marker = foreign

    def change(m):
        m["devices"][0].update(kind="cuda", arch="sm_90", fatbin=so)
    edit(art, change)
    refused_unloaded(art, marker, "devices[0].fatbin", load=load_cuda_artifact)
