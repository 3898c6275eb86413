"""``flowc compile --sign-key`` / ``flowc run --verify-key``, and ``flowc run`` on hostile or
malformed artifacts: every refusal is one ``flowc: error: ...`` line (exit status 1), never a
traceback (cli_runner.flowc asserts that)."""
import json
import os
import shutil
import textwrap

import numpy as np
import pytest

from cli_runner import flowc
from runtime.artifact import MANIFEST, write_manifest
from artifact_cases import build_foreign_library, read_manifest

MODEL = textwrap.dedent("""
    import dsl as fl

    def build():
        g = fl.Graph("keyed")
        with g.as_default():
            x = fl.placeholder(fl.f32, [None, 3], name="x")
            h = fl.nn.relu(x * 2.0 + 1.0, name="h")
        return g, {"h": h}
""")
KEY = b"0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A model, a feed, a key file, and the model compiled with --sign-key."""
    d = tmp_path_factory.mktemp("keys")
    (d / "model.py").write_text(MODEL)
    np.save(d / "x.npy", np.array([[-2.0, 0.0, 1.5]], dtype=np.float32))
    (d / "key").write_bytes(KEY)
    (d / "other.key").write_bytes(KEY[::-1])
    from compiler.cli import main
    assert main(["compile", str(d / "model.py"), "-o", str(d / "signed"),
                 "--sign-key", str(d / "key")]) == 0
    return d


@pytest.fixture
def art(work, tmp_path):
    path = tmp_path / "art"
    shutil.copytree(work / "signed", path)
    return path


def run(capsys, work, path, *extra):
    return flowc(capsys, "run", path, "--feed", f"x={work / 'x.npy'}", *extra)


def test_compile_signs_and_run_verifies(work, capsys):
    assert "manifest_hmac_sha256" in read_manifest(work / "signed")
    rc, out, err = run(capsys, work, work / "signed", "--verify-key", work / "key")
    assert rc == 0, err
    assert out == "h = array([[0., 1., 4.]], dtype=float32)\n"


def test_run_with_the_wrong_key_is_refused(work, capsys):
    rc, out, err = run(capsys, work, work / "signed", "--verify-key", work / "other.key")
    assert rc == 1 and out == ""
    assert err.startswith("flowc: error: ") and "signature" in err


def test_run_with_a_key_refuses_an_unsigned_artifact(work, capsys, tmp_path):
    rc, _, err = flowc(capsys, "compile", work / "model.py", "-o", tmp_path / "plain")
    assert rc == 0, err
    rc, _, err = run(capsys, work, tmp_path / "plain", "--verify-key", work / "key")
    assert rc == 1 and "not signed" in err


def test_compile_with_a_missing_or_short_key_is_refused_before_compiling(work, capsys, tmp_path):
    rc, _, err = flowc(capsys, "compile", work / "model.py", "-o", tmp_path / "a",
                       "--sign-key", tmp_path / "no.key")
    assert rc == 1 and err.startswith("flowc: error: ") and "no.key" in err
    (tmp_path / "short.key").write_bytes(b"short")
    rc, _, err = flowc(capsys, "compile", work / "model.py", "-o", tmp_path / "a",
                       "--sign-key", tmp_path / "short.key")
    assert rc == 1 and "16 bytes" in err
    assert not (tmp_path / "a").exists()


def test_sign_key_does_not_apply_to_a_c_library(work, capsys, tmp_path):
    rc, _, err = flowc(capsys, "compile", work / "model.py", "-o", tmp_path / "lib",
                       "--emit", "c-library", "--sign-key", work / "key")
    assert rc == 1 and "--sign-key" in err


def _edit(path, change):
    manifest = read_manifest(path)
    change(manifest)
    write_manifest(str(path), manifest)


def _raw(path, text):
    with open(os.path.join(str(path), MANIFEST), "w") as f:
        f.write(text)


CASES = {
    "missing feeds": lambda p: _edit(p, lambda m: m.pop("feeds")),
    "missing fetches": lambda p: _edit(p, lambda m: m.pop("fetches")),
    "bogus dtype": lambda p: _edit(p, lambda m: m["feeds"][0].update(dtype="f99")),
    "device not an object": lambda p: _edit(p, lambda m: m["devices"].__setitem__(0, 3)),
    "deep nesting": lambda p: _raw(p, '{"format": "flowc-artifact", "a": '
                                   + "[" * 50_000 + "]" * 50_000 + "}"),
    "huge integer": lambda p: _raw(p, (p / MANIFEST).read_text().replace(
        '"rendezvous_slots": 0', '"rendezvous_slots": ' + "7" * 6000)),
    "huge shape": lambda p: _edit(p, lambda m: m["feeds"][0].update(shape=[10 ** 40, 3])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_on_a_malformed_manifest_is_a_flowc_error(work, art, capsys, case):
    CASES[case](art)
    rc, out, err = run(capsys, work, art)
    assert rc == 1 and out == ""
    assert err.startswith("flowc: error: ") and str(art) in err, err


def test_run_never_loads_a_module_from_outside_the_artifact(work, art, capsys, tmp_path):
    so, marker = build_foreign_library(tmp_path / "evil")
    _edit(art, lambda m: m["devices"][0].update(module="../evil/foreign.so"))
    rc, _, err = run(capsys, work, art)
    assert rc == 1 and "devices[0].module" in err
    assert not os.path.exists(marker)
    json.loads((art / MANIFEST).read_text())          # untouched by the refusal


def test_run_checks_a_cpu_artifact_once_and_still_refuses_a_changed_file(work, art, capsys,
                                                                         monkeypatch):
    """``flowc run`` hashes a CPU artifact's files once (the loader's check), not twice; a file
    changed after compiling is still refused."""
    from runtime.artifact_files import ArtifactFolder
    checked = []
    real = ArtifactFolder.verify_all

    def counting(self, *args, **kwargs):
        checked.append(self.path)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ArtifactFolder, "verify_all", counting)
    rc, out, _ = run(capsys, work, art, "--verify-key", work / "key")
    assert rc == 0 and "h = " in out
    assert checked == [str(art)]
    with open(art / "graph.ir", "a") as f:
        f.write("# changed\n")
    rc, out, err = run(capsys, work, art)
    assert rc == 1 and out == "" and "graph.ir does not match its manifest hash" in err, err
