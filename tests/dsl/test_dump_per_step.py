"""``--dump-to`` under a Session (and so ``flowc train``): one folder per compiled step, and a
table saying which step each folder holds; ``flowc ir --step``; printing IR without --after."""
from __future__ import annotations

import os

import numpy as np

import dsl as fl
from cli_runner import flowc
from compiler.options import PipelineOptions
from repo_paths import EXAMPLES


def test_each_compiled_step_dumps_to_its_own_folder(tmp_path):
    dump = tmp_path / "dump"
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        y = fl.reduce_sum(x * 2.0, name="total")
        z = fl.reduce_max(x, name="biggest")
    with fl.Session(graph=g, options=PipelineOptions(dump_to=str(dump))) as sess:
        feed = {x: np.ones((2, 3), np.float32)}
        sess.run(y, feed)
        sess.run(z, feed)
        sess.run(y, feed)                      # the same step again: no new folder
    folders = sorted(p for p in os.listdir(dump) if p.startswith("step-"))
    assert len(folders) == 2
    for f in folders:
        assert os.path.exists(dump / f / "0000.input.ir")
        assert any(name.endswith(".after_prune.ir") for name in os.listdir(dump / f))
    rows = (dump / "steps.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["folder", "fetches", "feeds", "nodes"]
    fetched = {r.split("\t")[0]: r.split("\t")[1] for r in rows[1:]}
    assert set(fetched) == set(folders)
    assert sorted(fetched.values()) == ["biggest", "total"]


def test_ir_step_train_shows_the_optimizer_update(capsys):
    model = os.path.join(EXAMPLES, "digits_mlp.flow")
    rc, out, err = flowc(capsys, "ir", model, "--step", "train", "--after", "prune")
    assert rc == 0, err
    assert "AssignSubVariableOp" in out or "AssignVariableOp" in out
    assert "global_step" in out
    rc, out, err = flowc(capsys, "check", model, "--step", "eval")
    assert rc == 0 and "outputs: loss f32[], accuracy f32[]" in out
    rc, out, err = flowc(capsys, "check", model, "--step", "nope")
    assert rc != 0
    assert "no step named 'nope' (the file defines: eval, train)" in err


def test_print_ir_after_all_without_after_runs_the_pipeline(capsys):
    model = os.path.join(EXAMPLES, "digits_mlp.flow")
    rc, out, err = flowc(capsys, "ir", model, "--print-ir-after-all")
    assert rc == 0, err
    printed = out + err
    assert "IR after prune" in printed and "IR after plan-memory" in printed
    assert "no passes run" not in printed


def test_unknown_suffix_lists_every_model_type(tmp_path, capsys):
    path = tmp_path / "model.xyz"
    path.write_text("")
    rc, out, err = flowc(capsys, "check", path)
    assert rc != 0
    for suffix in (".ir", ".py", ".flow", ".pb", ".pbtxt"):
        assert suffix in err
