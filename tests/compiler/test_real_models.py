"""Real models, as users bring them: small seeded models that PyTorch (ONNX) and Keras/TensorFlow
(frozen GraphDefs, a SavedModel) exported themselves, committed in tests/data/real_models/ with
their inputs and the reference runtime's outputs (onnxruntime, TensorFlow) by
``make_models.py`` there; ``manifest.json`` lists each model's file, format, family, input and
output names and tolerances.

Each model goes through the command line as a user's would: ``flowc compile MODEL -o DIR``
(a SavedModel: ``flowc compile DIR --signature NAME``), then ``flowc run DIR --feeds
INPUTS.npz --save OUT.npz``, and every reference output is compared with what flowc computed.
Neither PyTorch, TensorFlow nor onnxruntime is needed: only onnx (ONNX files) and tensorboardX
(TensorFlow's protobufs), both in the test extra.

Models flowc cannot compile and run yet are strict expected failures (``NOT_YET``, with the
first line of today's error): the day one passes, its test fails until its line is removed.
While a model fails, ``test_failure_is_one_clean_error`` checks that the failure is one
``flowc: error:`` naming the model file, never a Python traceback.
"""
from __future__ import annotations

import json
import os
import traceback
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np
import pytest

from cli_runner import flowc
from repo_paths import ROOT

FOLDER = os.path.join("tests", "data", "real_models")    # from ROOT: errors name models so
with open(os.path.join(ROOT, FOLDER, "manifest.json"), encoding="utf-8") as _f:
    MODELS: Dict[str, dict] = json.load(_f)["models"]

# Models flowc cannot compile and run yet -> the first line of the failure today (`flowc
# compile MODEL` run from the repository root). Remove a model's line when it passes.
NOT_YET: Dict[str, str] = {
}

# Failing models whose failure is not one clean `flowc: error:` naming the model file yet.
UNCLEAN: Dict[str, str] = {
}

# What reading each format needs (the test extra has both).
NEEDS = {"onnx": "onnx", "graphdef": "google.protobuf", "saved_model": "google.protobuf"}


@dataclass
class Outcome:
    """What the command line did with one model."""
    stage: str                        # "compile" or "run": the last command run
    rc: Optional[int]                 # its exit status (None: it raised)
    err: str                          # its stderr, or the traceback it raised
    crashed: bool = False             # a Python exception escaped flowc's main()
    saved: Optional[str] = None       # the fetched values (.npz) when both commands succeeded

    @property
    def first_line(self) -> str:
        lines = [ln for ln in self.err.splitlines() if ln.strip()]
        if self.crashed:
            return lines[-1] if lines else "(no message)"
        errors = [ln for ln in lines if ln.startswith("flowc: error:")]
        return (errors or lines or ["(no message)"])[0]


_OUTCOMES: Dict[str, Outcome] = {}


def _flowc(capsys, *args) -> tuple:
    """``flowc args``: (exit status, stderr, crashed); a Python exception out of flowc's main
    (or a traceback on stderr, which cli_runner refuses) is kept as the message."""
    try:
        rc, _, err = flowc(capsys, *args)
        return rc, err, False
    except Exception:                                    # noqa: BLE001  (reported, not raised)
        capsys.readouterr()
        return None, traceback.format_exc(), True


def outcome(name: str, capsys, monkeypatch, tmp_path_factory) -> Outcome:
    """Compile and run model ``name`` once per test session; both tests use the result."""
    if name not in _OUTCOMES:
        entry = MODELS[name]
        pytest.importorskip(NEEDS[entry["format"]])
        monkeypatch.chdir(ROOT)                # relative paths: messages name the file as given
        work = tmp_path_factory.mktemp(name)
        artifact, saved = work / "artifact", work / "outputs.npz"
        args = ["compile", os.path.join(FOLDER, entry["file"]), "-o", artifact]
        if entry.get("signature"):
            args += ["--signature", entry["signature"]]
        rc, err, crashed = _flowc(capsys, *args)
        result = Outcome("compile", rc, err, crashed)
        if rc == 0:
            rc, err, crashed = _flowc(capsys, "run", artifact, "--feeds",
                                      os.path.join(FOLDER, name + ".inputs.npz"),
                                      "--save", saved)
            result = Outcome("run", rc, err, crashed, str(saved) if rc == 0 else None)
        _OUTCOMES[name] = result
    return _OUTCOMES[name]


def _not_yet(name: str) -> List:
    return [pytest.mark.xfail(strict=True, reason=NOT_YET[name])] if name in NOT_YET else []


def _unclean(name: str) -> List:
    return [pytest.mark.xfail(strict=True, reason=UNCLEAN[name])] if name in UNCLEAN else []


@pytest.fixture(scope="module")
def scoreboard(report_summary):
    """Which models pass, for the terminal summary (how the importers are coming along)."""
    passed: Dict[str, bool] = {}
    yield passed
    if passed:
        failing = sorted(n for n, ok in passed.items() if not ok)
        report_summary(f"real models ({FOLDER}): {sum(passed.values())} of {len(passed)} "
                       "compile, run and match their reference"
                       + (f"; not yet: {', '.join(failing)}" if failing else ""))


@pytest.mark.parametrize("name", [pytest.param(n, marks=_not_yet(n)) for n in MODELS])
def test_compiles_runs_and_matches_reference(name, capsys, monkeypatch, tmp_path_factory,
                                             scoreboard):
    entry = MODELS[name]
    scoreboard[name] = False
    result = outcome(name, capsys, monkeypatch, tmp_path_factory)
    assert result.saved is not None, f"flowc {result.stage} failed: {result.first_line}"
    with np.load(os.path.join(ROOT, FOLDER, name + ".outputs.npz")) as ref, \
            np.load(result.saved) as got:
        assert list(ref.files) == list(entry["outputs"])
        for out in entry["outputs"]:
            assert out in got.files, f"no fetch '{out}' in the artifact; it fetches {got.files}"
            want, have = ref[out], got[out]
            assert have.dtype == want.dtype and have.shape == want.shape, \
                f"{out}: {have.dtype}{list(have.shape)}, expected {want.dtype}{list(want.shape)}"
            np.testing.assert_allclose(have, want, rtol=entry["rtol"], atol=entry["atol"],
                                       err_msg=f"{name}: output {out}")
    scoreboard[name] = True


@pytest.mark.parametrize("name", [pytest.param(n, marks=_unclean(n)) for n in NOT_YET])
def test_failure_is_one_clean_error(name, capsys, monkeypatch, tmp_path_factory):
    """A model flowc cannot take yet fails with one ``flowc: error:`` that names its file
    (details on indented lines after it), exit status 1, and no Python traceback."""
    result = outcome(name, capsys, monkeypatch, tmp_path_factory)
    assert not result.crashed, f"flowc {result.stage} raised:\n{result.err}"
    if result.saved is not None:
        pytest.skip("no error to check: the model compiles and runs (its outputs differ)")
    assert result.rc == 1, f"exit status {result.rc}: {result.err}"
    lines = result.err.splitlines()
    assert lines and lines[0].startswith("flowc: error: "), result.err
    assert sum(ln.startswith("flowc: error:") for ln in lines) == 1, result.err
    assert all(ln.startswith((" ", "\t", "flowc: note: ")) for ln in lines[1:] if ln), result.err
    if result.stage == "compile":
        model = os.path.join(FOLDER, MODELS[name]["file"])
        assert model in lines[0], f"the error does not name {model}: {lines[0]}"


def test_manifest_lists_every_model_with_its_files():
    """The manifest, the files make_models.py wrote and the lists above agree."""
    assert set(NOT_YET) <= set(MODELS) and set(UNCLEAN) <= set(NOT_YET)
    for name, entry in MODELS.items():
        assert entry["format"] in NEEDS, name
        assert os.path.exists(os.path.join(ROOT, FOLDER, entry["file"])), name
        if entry["format"] == "saved_model":
            assert entry.get("signature"), name
        with np.load(os.path.join(ROOT, FOLDER, name + ".inputs.npz")) as inputs:
            assert list(inputs.files) == list(entry["inputs"]), name
        assert entry["rtol"] <= 1e-3 and entry["atol"] <= 1e-4, name
