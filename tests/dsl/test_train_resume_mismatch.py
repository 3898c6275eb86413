"""Resuming from another model's checkpoint: one error naming the model file and the
checkpoint, nothing restored, nothing trained."""
from __future__ import annotations

import os

from cli_runner import flowc
from repo_paths import EXAMPLES


def test_resume_from_another_models_checkpoint_names_the_model(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    cnn = os.path.join(EXAMPLES, "digits_cnn.flow")
    mlp = os.path.join(EXAMPLES, "digits_mlp.flow")
    rc, out, err = flowc(capsys, "train", cnn, "--steps", "2", "--checkpoint-dir", ckpt, "-q")
    assert rc == 0, err
    before = sorted(os.listdir(ckpt))
    rc, out, err = flowc(capsys, "train", mlp, "--steps", "4", "--checkpoint-dir", ckpt,
                         "--resume", "-q")
    assert rc != 0
    assert err.startswith(f"flowc: error: {mlp}: cannot resume from checkpoint "), err
    assert "it was written by another model: not in the checkpoint: 'hidden/weights1'" in err
    assert "RestoreV2" not in err
    assert sorted(os.listdir(ckpt)) == before          # nothing written over
