"""``flowc compile MODEL --target cuda -o DIR`` cross-compiles without a GPU: the artifact
holds the generated .cu and nvcc's output (host shared object, cubin, fatbin, PTX), and the
CPU-only loader refuses it plainly. Without nvcc the command fails with one clear error."""
from __future__ import annotations

import json
import os

import pytest

from cli_runner import flowc
from compiler.codegen.cuda_build import find_nvcc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MLP = os.path.join(ROOT, "examples", "digits_mlp.flow")
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc (the CUDA compiler) is not installed")
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
    assert "__global__" in source and "<<<" in source and "flowc_stream" in source
    with open(out / gpu[0]["ptx"]) as f:
        assert ".target sm_90" in f.read()
    # the model's matrix products and softmax were placed on the GPU
    assert "MatMul" in err and "device:GPU:0" in err
    # the CPU-only runtime loader refuses the artifact with a plain reason
    rc, _, err = flowc(capsys, "run", out)
    assert rc == 1 and "cuda" in err


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
