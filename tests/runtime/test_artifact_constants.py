"""An artifact stores each big constant once: in its ``.bin`` blob, which the loader maps,
hashes and binds to the module (the module does not include it). The artifact is about the size
of its constants, a damaged blob is a clear error naming it, what the module reads is the bytes
that were hashed, and the results are the interpreter's."""
import gc
import os
import shutil
import subprocess

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.build import BASE_FLAGS, RUNTIME_INCLUDE, compiler_command, feature_flags
from compiler.codegen.emitter import emit_c
from compiler.interpreter import Interpreter
from compiler.step import make_step_graph, optimize, write_artifact
from runtime import ArtifactError, load_artifact
from runtime.artifact import sha256_file, write_manifest
from runtime.errors import FailedPreconditionError
from runtime.module import CModule, Executable, TensorSpec
from runtime.dtypes import DType
from artifact_cases import read_manifest

N = 1024                  # two N x N f32 weights: 8 MiB of constants


def _step(seed: int):
    rng = np.random.RandomState(seed)
    g = fl.Graph("consts")
    with g.as_default():
        x = fl.placeholder(fl.f32, [2, N], name="x")
        w0 = fl.constant((rng.randn(N, N) / 32).astype(np.float32), name="w0")
        w1 = fl.constant((rng.randn(N, N) / 32).astype(np.float32), name="w1")
        y = fl.identity(fl.matmul(fl.nn.relu(fl.matmul(x, w0)), w1), name="y")
    step = make_step_graph(g, [x.output], [y.output])
    want = Interpreter(step.graph).run([r.inputs[0] for r in step.retvals],
                                       {step.feeds[0].output(0): FEED})[0]
    optimize(step)
    return step, want


FEED = np.random.RandomState(7).randn(2, N).astype(np.float32)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    step, want = _step(0)
    return write_artifact(step, str(tmp_path_factory.mktemp("consts") / "good")), want


@pytest.fixture
def art(built, tmp_path):
    path = tmp_path / "art"
    shutil.copytree(built[0], path)
    return str(path), built[1]


def _blobs(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".bin"))


def _size(path):
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))


def test_the_artifact_is_about_the_size_of_its_constants_and_runs_as_the_interpreter(built):
    path, want = built
    constants = 2 * N * N * 4
    assert _size(path) < 1.3 * constants, sorted((n, os.path.getsize(os.path.join(path, n)))
                                                 for n in os.listdir(path))
    assert os.path.getsize(os.path.join(path, "cpu_0.so")) < constants / 8
    (entry,) = read_manifest(path)["devices"]
    assert [c["nbytes"] for c in entry["constants"]] == [N * N * 4] * 2
    assert {c["file"] for c in entry["constants"]} == set(_blobs(path))
    (got,) = load_artifact(path).run({"x": FEED})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("damage", ["flipped", "truncated", "empty", "missing"])
def test_a_damaged_blob_is_refused_naming_it(art, damage):
    path, _ = art
    blob = os.path.join(path, _blobs(path)[0])
    if damage == "flipped":
        with open(blob, "r+b") as f:
            f.seek(12345)
            f.write(b"\xff\xfe")
    elif damage == "truncated":
        os.truncate(blob, os.path.getsize(blob) // 2)
    elif damage == "empty":
        os.truncate(blob, 0)
    else:
        os.remove(blob)
    with pytest.raises(ArtifactError) as info:
        load_artifact(path)
    assert blob in str(info.value)


def test_a_manifest_that_gives_a_blob_another_size_is_refused(art):
    """Even with its hash recorded anew, a blob of a size the module was not generated for
    is not bound (the manifest's ``nbytes`` and the module's own table both say so)."""
    path, _ = art
    blob = _blobs(path)[0]
    with open(os.path.join(path, blob), "ab") as f:
        f.write(b"\0" * 64)
    manifest = read_manifest(path)
    manifest["files"][blob] = sha256_file(os.path.join(path, blob))
    write_manifest(path, manifest)
    with pytest.raises(ArtifactError, match="holds"):
        load_artifact(path)
    for c in manifest["devices"][0]["constants"]:
        if c["file"] == blob:
            c["nbytes"] += 64
    write_manifest(path, manifest)
    with pytest.raises(ArtifactError, match="generated for another size"):
        load_artifact(path)


def test_the_module_reads_the_bytes_that_were_hashed(art, monkeypatch):
    """A blob replaced after the artifact was verified does not reach the module: it reads the
    mapping that was hashed."""
    import runtime.artifact as artifact_mod
    path, want = art
    real_check = artifact_mod._checked_folder

    def check_then_swap(p, *args, **kwargs):
        folder = real_check(p, *args, **kwargs)
        for blob in _blobs(path):
            with open(os.path.join(path, blob + ".new"), "wb") as f:
                f.write(np.full(N * N, 1e6, np.float32).tobytes())
            os.replace(os.path.join(path, blob + ".new"), os.path.join(path, blob))
        return folder
    monkeypatch.setattr(artifact_mod, "_checked_folder", check_then_swap)
    (got,) = load_artifact(path).run({"x": FEED})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_one_artifact_loaded_twice_keeps_its_constants_while_either_is_loaded(built):
    """A shared object opened twice is one library with one table of constants: dropping one
    of the two loads leaves the other running; after both are gone it loads again."""
    path, want = built
    first, second = load_artifact(path), load_artifact(path)
    del first
    gc.collect()
    np.testing.assert_allclose(second.run({"x": FEED})[0], want, rtol=1e-4, atol=1e-4)
    del second
    gc.collect()
    np.testing.assert_allclose(load_artifact(path).run({"x": FEED})[0], want, rtol=1e-4,
                               atol=1e-4)


def test_a_module_without_its_constants_bound_refuses_to_run(built):
    path, _ = built
    module = CModule(os.path.join(path, "cpu_0.so"))        # loaded outside load_artifact
    exe = Executable(module, [TensorSpec("x", DType.f32, (2, N))],
                     [TensorSpec("y", DType.f32, (2, N))])
    with pytest.raises(FailedPreconditionError, match="not bound"):
        exe.run([FEED])


def test_the_module_rebuilt_from_the_artifacts_source_runs(art):
    """``cpu_0.c`` compiles on its own (the blobs are read at load, not assembled in), and the
    rebuilt module, with its hash in the manifest, runs with the artifact's blobs."""
    path, want = art
    (entry,) = read_manifest(path)["devices"]
    out = os.path.join(path, "cpu_0.so")
    cmd = ([compiler_command()] + list(BASE_FLAGS) + [f"-I{RUNTIME_INCLUDE}",
           os.path.join(path, "cpu_0.c"), "-o", out] + feature_flags(entry["features"]) + ["-lm"])
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    manifest = read_manifest(path)
    manifest["files"]["cpu_0.so"] = sha256_file(out)
    write_manifest(path, manifest)
    np.testing.assert_allclose(load_artifact(path).run({"x": FEED})[0], want, rtol=1e-4,
                               atol=1e-4)


def test_new_weights_of_the_same_shapes_reuse_the_compiled_module(built, tmp_path):
    """The module does not depend on its constants' values: a step with other weights of the
    same shapes gets the same object from the build cache, and its own results."""
    step, want = _step(1)
    other = write_artifact(step, str(tmp_path / "other"))
    assert read_manifest(other)["files"]["cpu_0.so"] == read_manifest(built[0])["files"]["cpu_0.so"]
    np.testing.assert_allclose(load_artifact(other).run({"x": FEED})[0], want, rtol=1e-4,
                               atol=1e-4)


def test_emitted_on_its_own_a_module_still_embeds_its_constants(built):
    """What is not an artifact (the C library, a module built and loaded by hand) keeps its
    constants inside (``.incbin``) and binds nothing."""
    step, _ = _step(0)
    emitted = emit_c(step.graph, step.feeds, step.retvals)
    assert ".incbin" in emitted.source and not emitted.loaded_constants


def test_a_module_built_as_several_units_reads_its_constants(tmp_path, monkeypatch):
    """Parts in other translation units than the table's definition read it too (``extern``):
    a chain of 140 MatMuls, each with its own 4 KiB constant, is three parts."""
    monkeypatch.setenv("FLOWC_CC_MIN_UNIT_COST", "0")
    monkeypatch.setenv("FLOWC_CC_JOBS", "2")
    rng = np.random.RandomState(3)
    g = fl.Graph("units")
    with g.as_default():
        x = fl.placeholder(fl.f32, [32, 32], name="x")
        h = x
        for _ in range(140):
            h = fl.matmul(h, fl.constant((np.eye(32) + rng.randn(32, 32) * 0.01)
                                         .astype(np.float32)))
        y = fl.identity(h, name="y")
    step = make_step_graph(g, [x.output], [y.output])
    xv = rng.randn(32, 32).astype(np.float32)
    want = Interpreter(step.graph).run([r.inputs[0] for r in step.retvals],
                                       {step.feeds[0].output(0): xv})[0]
    optimize(step)
    path = write_artifact(step, str(tmp_path / "art"))
    source = open(os.path.join(path, "cpu_0.c")).read()
    assert source.count("int flowc_part") > 1 and "flowc_consts[139]" in source
    (got,) = load_artifact(path).run({"x": xv})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
