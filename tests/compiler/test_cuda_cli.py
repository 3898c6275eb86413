"""``flowc compile MODEL --target cuda -o DIR`` cross-compiles without a GPU: the artifact
holds the generated .cu and nvcc's output (host shared object, cubin, fatbin, PTX), and
running it without a GPU is one plain error. Without nvcc the command fails with one clear
error. An artifact built for the CUDA simulator (`--cuda-arch sim`) runs anywhere."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from cli_runner import flowc
from compiler.codegen.cuda_build import find_nvcc
from repo_paths import ROOT

MLP = os.path.join(ROOT, "examples", "digits_mlp.flow")
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc (the CUDA compiler) is not installed")
@pytest.mark.cpu_only
def test_compile_target_cuda_writes_cu_source_and_nvcc_output(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "mlp"
    rc, stdout, err = flowc(capsys, "compile", MLP, "--target", "cuda", "-o", out,
                            "--log-device-placement")
    assert rc == 0, err
    with open(out / "manifest.json") as f:
        manifest = json.load(f)
    gpu = [d for d in manifest["devices"] if d["device"] == GPU0]
    assert len(gpu) == 1 and gpu[0]["kind"] == "cuda" and gpu[0]["arch"] == "sm_90"
    for key, suffix in (("source", ".cu"), ("module", ".so"), ("fatbin", ".fatbin"),
                        ("ptx", ".ptx"), ("cubin", ".cubin")):
        name = gpu[0][key]
        assert name.endswith(suffix) and os.path.getsize(out / name) > 0
        assert name in manifest["files"]
    with open(out / gpu[0]["source"]) as f:
        source = f.read()
    assert "__global__" in source and "FLOWC_LAUNCH(" in source and "flowc_stream" in source
    with open(out / gpu[0]["ptx"]) as f:
        assert ".target sm_90" in f.read()
    # the model's matrix products and softmax were placed on the GPU
    assert "MatMul" in err and "device:GPU:0" in err
    # without a GPU (or pycuda), running it is one plain error
    from runtime.cuda_module import cuda_status
    if not cuda_status()[0]:
        rc, _, err = flowc(capsys, "run", out)
        assert rc == 1 and ("GPU" in err or "CUDA" in err), err


SMALL_MODEL = """input x: f32[?, 5]
input w: f32[5, 3]
output y = nn.softmax(nn.relu(x @ w) - 0.5)
output s = reduce_sum(x * x, axis=0)
"""


def test_an_artifact_built_for_the_cuda_simulator_runs_with_flowc_run(capsys, tmp_path,
                                                                      monkeypatch):
    """`--cuda-arch sim` needs no nvcc and no GPU: the artifact holds the .cu and the host
    object the C++ compiler built, and `flowc run` gives the CPU artifact's values."""
    monkeypatch.setenv("FLOWC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FLOWC_NVCC", str(tmp_path / "no-such-nvcc"))
    model = tmp_path / "small.flow"
    model.write_text(SMALL_MODEL)
    rng = np.random.default_rng(3)
    np.save(tmp_path / "x.npy", rng.uniform(-1, 1, (4, 5)).astype(np.float32))
    np.save(tmp_path / "w.npy", rng.uniform(-1, 1, (5, 3)).astype(np.float32))
    feeds = ["--feed", f"x={tmp_path / 'x.npy'}", "--feed", f"w={tmp_path / 'w.npy'}"]
    values = {}
    for name, target in (("cpu", []), ("sim", ["--target", "cuda", "--cuda-arch", "sim"])):
        rc, _, err = flowc(capsys, "compile", model, *target, "-o", tmp_path / name)
        assert rc == 0, err
        rc, _, err = flowc(capsys, "run", tmp_path / name, *feeds, "--save",
                           tmp_path / f"{name}.npz")
        assert rc == 0, err
        values[name] = dict(np.load(tmp_path / f"{name}.npz"))
    with open(tmp_path / "sim" / "manifest.json") as f:
        gpu = [d for d in json.load(f)["devices"] if d["device"] == GPU0]
    assert gpu and gpu[0]["arch"] == "sim" and "fatbin" not in gpu[0]
    assert set(values["sim"]) == {"y", "s"}
    for k in values["cpu"]:
        np.testing.assert_allclose(values["sim"][k], values["cpu"][k], rtol=1e-6, atol=1e-7)


@pytest.mark.cpu_only
def test_compile_target_cuda_without_nvcc_is_one_clear_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWC_NVCC", str(tmp_path / "no-such-nvcc"))
    rc, _, err = flowc(capsys, "compile", MLP, "--target", "cuda", "-o", tmp_path / "out")
    assert rc == 1
    assert "nvcc (the CUDA compiler) was not found" in err
    assert not (tmp_path / "out").exists()


def test_compile_target_cuda_rejects_a_malformed_architecture(capsys, tmp_path):
    if find_nvcc() is None:
        pytest.skip("nvcc (the CUDA compiler) is not installed")
    rc, _, err = flowc(capsys, "compile", MLP, "--target", "cuda", "--cuda-arch", "hopper",
                       "-o", tmp_path / "out")
    assert rc == 1 and "sm_NN" in err
