"""Artifacts: the runtime refuses tampered, incomplete or foreign-version artifacts with an
ArtifactError naming the file, and runs a good one without importing the compiler or the DSL."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dsl as fl
from compiler.step import make_step_graph, optimize, write_artifact
from runtime import ArtifactError, load_artifact
from runtime.artifact import MANIFEST, write_manifest
from repo_paths import ROOT



@pytest.fixture(scope="module")
def artifact_dir(tmp_path_factory):
    """One compiled artifact (x -> relu(2x + 1)); tests copy it before changing anything."""
    g = fl.Graph("art")
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 3], name="x")
        y = fl.nn.relu(x * 2.0 + 1.0, name="y")
    step = make_step_graph(g, [x.output], [y.output])
    optimize(step)
    return write_artifact(step, str(tmp_path_factory.mktemp("art") / "good"))


@pytest.fixture
def copy(artifact_dir, tmp_path):
    path = tmp_path / "copy"
    shutil.copytree(artifact_dir, path)
    return path


def refused(path, *names):
    with pytest.raises(ArtifactError) as info:
        load_artifact(str(path))
    for name in names:
        assert name in str(info.value)
    return str(info.value)


def test_good_artifact_loads_and_runs(artifact_dir):
    art = load_artifact(artifact_dir)
    assert [f.name for f in art.feeds] == ["x"] and [f.name for f in art.fetches] == ["y"]
    x = np.array([[-1.0, 0.0, 2.0]], dtype=np.float32)
    (y,) = art.run({"x": x})
    np.testing.assert_array_equal(y, np.maximum(2 * x + 1, 0))


def test_tampered_module_is_refused(copy):
    with open(copy / "cpu_0.so", "ab") as f:
        f.write(b"\0")
    msg = refused(copy, str(copy / "cpu_0.so"))
    assert "does not match its manifest hash" in msg


def test_tampered_source_is_refused(copy):
    text = (copy / "cpu_0.c").read_text()
    (copy / "cpu_0.c").write_text(text.replace("flowc_entry", "flowc_entry ", 1))
    refused(copy, "cpu_0.c")


def test_tampered_manifest_is_refused(copy):
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["fetches"][0]["name"] = "renamed"
    (copy / MANIFEST).write_text(json.dumps(manifest))
    msg = refused(copy, MANIFEST)
    assert "modified" in msg


def test_missing_file_is_refused(copy):
    os.remove(copy / "graph.ir")
    msg = refused(copy, str(copy / "graph.ir"))
    assert "missing" in msg


def test_missing_manifest_is_refused(copy):
    os.remove(copy / MANIFEST)
    refused(copy, MANIFEST)


def test_wrong_format_version_is_refused(copy):
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["format_version"] = 99
    write_manifest(str(copy), manifest)          # a valid checksum: only the version is wrong
    msg = refused(copy, MANIFEST)
    assert "format version 99" in msg


RUN_ALONE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import runtime
    art = runtime.load_artifact(sys.argv[1])
    (y,) = art.run({"x": np.array([[-1.0, 0.5, 3.0]], dtype=np.float32)})
    leaked = sorted(m for m in sys.modules
                    if m.split(".")[0] in ("compiler", "dsl", "codegen_templates"))
    print(json.dumps({"y": y.tolist(), "leaked": leaked}))
""")


def test_artifact_runs_with_the_runtime_alone(artifact_dir):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", RUN_ALONE, str(artifact_dir)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["leaked"] == []
    assert result["y"] == [[0.0, 2.0, 7.0]]
