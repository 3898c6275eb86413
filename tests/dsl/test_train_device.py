"""``flowc train --device`` and ``--losses``: the digits models trained on the GPU reach the
CPU's losses step for step (on a real GPU where there is one, marked ``gpu``, and on the CUDA
simulator everywhere), and the device choice fails clearly where it cannot be met."""
import os

import numpy as np
import pytest

from cli_runner import flowc
from repo_paths import ROOT

EXAMPLES = os.path.join(ROOT, "examples")
GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"


def losses(path) -> np.ndarray:
    rows = [line.split("\t") for line in open(path, encoding="utf-8").read().splitlines()]
    assert [int(step) for step, _ in rows] == list(range(1, len(rows) + 1))
    return np.array([float(value) for _, value in rows])


@pytest.mark.parametrize("model,steps,rtol", [("digits_mlp.flow", 12, 1e-4),
                                              ("digits_cnn.flow", 3, 1e-3)])
def test_training_on_the_gpu_reaches_the_cpus_losses(capsys, tmp_path, gpu_target, model,
                                                     steps, rtol):
    path = os.path.join(EXAMPLES, model)
    runs = {}
    for device in ("gpu", "cpu"):
        rc, out, err = flowc(capsys, "train", path, "--device", device, "--steps", str(steps),
                             "--losses", tmp_path / f"{device}.tsv", "--quiet")
        assert rc == 0, err
        where = GPU0 if device == "gpu" else "the CPU"
        assert f"flowc: training on {where}" in err
        runs[device] = losses(tmp_path / f"{device}.tsv")
    assert len(runs["gpu"]) == steps
    np.testing.assert_allclose(runs["gpu"], runs["cpu"], rtol=rtol)
    assert runs["gpu"][-1] < runs["gpu"][0]


@pytest.mark.cpu_only
def test_device_gpu_without_a_gpu_is_a_clear_error(capsys, tmp_path):
    rc, out, err = flowc(capsys, "train", os.path.join(EXAMPLES, "digits_mlp.flow"),
                         "--device", "gpu", "--steps", "2", "--losses", tmp_path / "l.tsv")
    assert rc != 0
    assert "--device gpu, but no GPU is usable" in err and "digits_mlp.flow" in err
    assert not os.path.exists(tmp_path / "l.tsv")          # nothing written before the error


def test_losses_file_that_cannot_be_written_is_a_clear_error(capsys, tmp_path):
    rc, out, err = flowc(capsys, "train", os.path.join(EXAMPLES, "digits_mlp.flow"),
                         "--device", "cpu", "--steps", "2",
                         "--losses", tmp_path / "missing" / "l.tsv")
    assert rc != 0 and "cannot write the losses file" in err
