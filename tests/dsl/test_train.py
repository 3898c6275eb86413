"""``flowc train``: the digits examples train to their stated accuracy, the .flow MLP and its
Python twin are one graph, a killed run resumes from its checkpoint, signals checkpoint and
stop, and bad data or options are reported as ``flowc: error: ...``."""
import gzip
import io
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import dsl as fl
from compiler.ir.printer import print_graph
from dsl.flow import load_flow
from dsl.trainer import TrainError, load_spec, train
from cli_runner import flowc
from repo_paths import ROOT, TESTS

EXAMPLES = os.path.join(ROOT, "examples")
MLP = os.path.join(EXAMPLES, "digits_mlp.flow")
MLP_PY = os.path.join(EXAMPLES, "digits_mlp.py")
CNN = os.path.join(EXAMPLES, "digits_cnn.flow")
DIGITS = os.path.join(EXAMPLES, "data", "digits.npz")

SUMMARY = re.compile(r"^step (\d+): loss ([0-9.e+-]+|nan), accuracy ([0-9.]+) "
                     r"\(held-out, (\d+) examples\)(, \d+ steps/s)?$")


def final(out: str):
    """(step, loss, accuracy, examples) of the last summary line of ``flowc train``."""
    m = SUMMARY.match(out.strip().splitlines()[-1])
    assert m, out
    return int(m[1]), float(m[2]), float(m[3]), int(m[4])


def without_locations(text: str) -> str:
    return re.sub(r"  # [^\n]*", "", text)


def load_twin():
    sys.path.insert(0, EXAMPLES)
    try:
        import digits_mlp
    finally:
        sys.path.remove(EXAMPLES)
    return digits_mlp


# --- the data -----------------------------------------------------------------------------------
def test_digits_file_holds_the_uci_digits_with_a_stratified_split():
    with np.load(DIGITS) as f:
        x, y, is_test = f["x"], f["y"], f["is_test"]
    assert (x.dtype, x.shape, y.dtype, y.shape) == (np.float32, (1797, 64), np.int32, (1797,))
    assert is_test.dtype == np.bool_ and is_test.shape == (1797,)
    assert x.min() == 0.0 and x.max() == 1.0 and np.all((x * 16) == np.round(x * 16))
    assert sorted(set(y.tolist())) == list(range(10))
    per_class = np.bincount(y[is_test]) / np.bincount(y)
    assert np.all(np.abs(per_class - 0.2) < 0.01) and is_test.sum() == 359


def test_make_digits_reproduces_the_file_from_the_csv(tmp_path):
    """The CSV scikit-learn ships, rebuilt from the npz, gives the npz back."""
    with np.load(DIGITS) as f:
        x, y, is_test = f["x"], f["y"], f["is_test"]
    rows = np.concatenate([np.round(x * 16).astype(int), y[:, None]], axis=1)
    csv = tmp_path / "digits.csv.gz"
    csv.write_bytes(gzip.compress("\n".join(",".join(map(str, r)) for r in rows).encode()))
    out = tmp_path / "digits.npz"
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "data", "make_digits.py"),
                           str(csv), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    with np.load(out) as f:
        np.testing.assert_array_equal(f["x"], x)
        np.testing.assert_array_equal(f["y"], y)
        np.testing.assert_array_equal(f["is_test"], is_test)


# --- the models ---------------------------------------------------------------------------------
def test_mlp_flow_builds_the_same_ir_as_its_python_twin():
    program = load_flow(MLP)
    graph, fetches = load_twin().build()
    assert list(program.outputs) == list(fetches) == ["probs", "predictions"]
    assert without_locations(print_graph(program.graph, elide_constants=True)) == \
        without_locations(print_graph(graph, elide_constants=True))
    nodes = {n.name: n for n in program.graph}
    assert nodes["hidden/weights1"].op == "VarHandleOp"
    assert str(nodes["hidden/weights1"].location) == f"{MLP}:13:3"


def test_flow_training_declarations_reach_the_trainer():
    spec = load_spec(MLP)
    twin = load_twin().train_spec()
    assert (spec.steps, spec.batch_size, spec.eval_every) == (twin.steps, twin.batch_size,
                                                              twin.eval_every) == (600, 64, 200)
    assert spec.loss.name == "loss:0" and list(spec.metrics) == ["accuracy"]
    assert type(spec.optimizer) is type(twin.optimizer) is fl.train.AdamOptimizer
    assert spec.data == twin.data == DIGITS


def test_flow_and_twin_train_to_the_same_numbers():
    results = [train(spec, steps=30, eval_every=30, backend="interpreter", out=io.StringIO(),
                     err=io.StringIO())
               for spec in (load_spec(MLP), load_twin().train_spec())]
    assert results[0].loss == results[1].loss and results[0].metrics == results[1].metrics
    assert results[0].step == 30 and results[0].examples == 359


def test_variables_get_their_declared_initial_values():
    program = load_flow(MLP)
    with program.graph.as_default():
        init = fl.global_variables_initializer()
    with fl.Session(graph=program.graph, backend="interpreter") as sess:
        sess.run(init)
        w1 = sess.run("hidden/weights1/Read/ReadVariableOp:0")
        b1 = sess.run("hidden/bias1/Read/ReadVariableOp:0")
    limit = np.sqrt(6.0 / (64 + 128))
    assert w1.shape == (64, 128) and np.all(np.abs(w1) <= limit) and w1.std() > limit / 3
    assert np.all(b1 == 0)


# --- training through the command line ----------------------------------------------------------
def test_flowc_train_mlp_reaches_95_percent(capsys, tmp_path):
    rc, out, err = flowc(capsys, "train", MLP, "--checkpoint-dir", tmp_path / "ckpt")
    assert rc == 0, err
    lines = out.strip().splitlines()
    assert [final(line)[0] for line in lines] == [200, 400, 600]     # every 200 steps, the end
    step, loss, accuracy, examples = final(out)
    assert (step, examples) == (600, 359) and accuracy >= 0.95 and loss < 0.3
    assert lines[-1].endswith("steps/s")
    assert os.path.exists(tmp_path / "ckpt" / "checkpoint")
    assert f"flowc: saved {tmp_path / 'ckpt' / 'model.ckpt-600'}" in err
    # The trained model as an artifact, run by the runtime alone with the checkpoint's weights.
    rc, out, err = flowc(capsys, "compile", MLP, "-o", tmp_path / "art", "--fetch", "predictions")
    assert rc == 0, err
    data = np.load(os.path.join(EXAMPLES, "data", "digits.npz"))
    np.save(tmp_path / "x.npy", data["x"][data["is_test"]])
    rc, out, err = flowc(capsys, "run", tmp_path / "art", "--feed", f"x={tmp_path / 'x.npy'}",
                         "--checkpoint", tmp_path / "ckpt" / "model.ckpt-600",
                         "--save", tmp_path / "pred.npy")
    assert rc == 0, err
    predicted = np.load(tmp_path / "pred.npy")
    assert (predicted == data["y"][data["is_test"]]).mean() == pytest.approx(accuracy, abs=1e-3)
    rc, out, err = flowc(capsys, "run", tmp_path / "art", "--feed", f"x={tmp_path / 'x.npy'}")
    assert rc == 1 and "is not initialized" in err                    # no checkpoint: no weights


def test_flowc_train_cnn_reaches_97_percent(capsys):
    rc, out, err = flowc(capsys, "train", CNN, "--quiet")
    assert rc == 0, err
    step, _, accuracy, _ = final(out)
    assert step == 600 and accuracy >= 0.97


def test_options_override_the_model_settings(capsys, tmp_path):
    rc, out, err = flowc(capsys, "train", MLP_PY, "--steps", "40", "--eval-every", "20",
                         "--batch-size", "16", "--seed", "3", "--backend", "interpreter")
    assert rc == 0, err
    assert [final(line)[0] for line in out.strip().splitlines()] == [20, 40]


def test_progress_bar_goes_to_stderr_and_the_results_to_stdout():
    out, err = io.StringIO(), io.StringIO()
    train(load_spec(MLP), steps=20, eval_every=10, progress=True, out=out, err=err)
    assert "0/20" in err.getvalue() and "step/s" in err.getvalue()
    assert [final(line)[0] for line in out.getvalue().splitlines()] == [10, 20]


# --- checkpoints, resuming and signals -----------------------------------------------------------
def start_training(ckpt, *extra):
    return subprocess.Popen([sys.executable, "-m", "compiler.cli", "train", MLP, "--quiet",
                             "--checkpoint-dir", str(ckpt), *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_checkpoint(proc, ckpt, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(os.path.join(ckpt, "checkpoint")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.05)


def test_a_killed_run_resumes_from_its_last_checkpoint(capsys, tmp_path):
    from dsl.saver import latest_checkpoint
    ckpt = tmp_path / "ckpt"
    proc = start_training(ckpt, "--steps", "100000", "--eval-every", "50")
    try:
        wait_for_checkpoint(proc, ckpt)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    latest = latest_checkpoint(str(ckpt))
    saved_step = int(latest.rsplit("-", 1)[1])
    assert saved_step > 0 and saved_step % 50 == 0
    rc, out, err = flowc(capsys, "train", MLP, "--checkpoint-dir", ckpt, "--resume",
                         "--steps", saved_step + 30, "--eval-every", 1000)
    assert rc == 0, err
    assert f"flowc: resuming from {latest} (step {saved_step})" in err
    step, _, accuracy, _ = final(out)
    assert step == saved_step + 30 and accuracy > 0.8          # trained weights, not fresh ones
    assert latest_checkpoint(str(ckpt)).endswith(f"model.ckpt-{saved_step + 30}")


def test_resume_continues_exactly_where_the_run_stopped(capsys, tmp_path):
    """Optimizer slots and the global step come back: 20 + 20 steps = 40 steps."""
    rc, out, _ = flowc(capsys, "train", MLP, "--steps", 40, "--eval-every", 1000)
    straight = final(out)
    ckpt = tmp_path / "ckpt"
    assert flowc(capsys, "train", MLP, "--steps", 20, "--checkpoint-dir", ckpt)[0] == 0
    rc, out, err = flowc(capsys, "train", MLP, "--steps", 40, "--eval-every", 1000,
                         "--checkpoint-dir", ckpt, "--resume")
    assert rc == 0 and "(step 20)" in err
    assert final(out)[:3] == straight[:3]


def test_resume_without_a_checkpoint_starts_from_zero(capsys, tmp_path):
    rc, out, err = flowc(capsys, "train", MLP, "--steps", 5, "--checkpoint-dir",
                         tmp_path / "none", "--resume")
    assert rc == 0 and "no checkpoint in" in err and final(out)[0] == 5


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_saves_a_checkpoint_and_stops(tmp_path, sig, status):
    ckpt = tmp_path / "ckpt"
    proc = start_training(ckpt, "--steps", "100000", "--eval-every", "50")
    try:
        wait_for_checkpoint(proc, ckpt)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, err
    m = re.search(r"flowc: (SIG\w+) at step (\d+): stopped \(saved (\S+)\)", err)
    assert m and m[1] == signal.Signals(sig).name, err
    assert m[3].endswith(f"model.ckpt-{m[2]}") and os.path.exists(m[3] + ".index")
    assert "Traceback" not in err


# --- errors -------------------------------------------------------------------------------------
def write_npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


@pytest.fixture(scope="module")
def digits():
    with np.load(DIGITS) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("y"), "no array 'y' for input 'y' i32[?] (the file has: is_test, x)"),
    (lambda d: d.update(x=d["x"][:, :63]), "array 'x' has shape [1797, 63]; input 'x' is "
                                           "f32[?,64]"),
    (lambda d: d.update(y=d["y"] + 0.5), "array 'y' is float64; input 'y' is i32[?]"),
    (lambda d: d.update(y=d["y"][:100]), "different numbers of rows: 'x' 1797, 'y' 100"),
    (lambda d: d.update(is_test=d["is_test"][:5]), "array 'is_test' must be a bool vector of "
                                                   "1797 rows"),
])
def test_bad_data_is_reported_naming_the_array(capsys, tmp_path, digits, change, message):
    arrays = dict(digits)
    change(arrays)
    bad = write_npz(tmp_path / "bad.npz", **arrays)
    rc, out, err = flowc(capsys, "train", MLP, "--data", bad, "--steps", 1)
    assert rc == 1 and out == ""
    assert err.startswith(f"flowc: error: {bad}: ") and message in err, err


def test_data_without_a_mask_holds_out_a_seeded_fifth(capsys, tmp_path, digits):
    data = write_npz(tmp_path / "plain.npz", x=digits["x"], y=digits["y"])
    rc, out, err = flowc(capsys, "train", MLP, "--data", data, "--steps", 2)
    assert rc == 0 and "has no 'is_test' array: holding out 359 of 1797" in err
    assert final(out)[3] == 359


def test_user_errors(capsys, tmp_path):
    no_loss = tmp_path / "no_loss.flow"
    no_loss.write_text("input x: f32[?, 2]\noutput y = x * 2.0\n")
    rc, _, err = flowc(capsys, "train", no_loss)
    assert rc == 1 and "declares no loss" in err
    no_data = tmp_path / "no_data.flow"
    no_data.write_text("input x: f32[?, 2]\nvar w: f32[2]\nloss = reduce_sum(x * w)\n"
                       "optimizer = sgd(learning_rate=0.1)\n")
    rc, _, err = flowc(capsys, "train", no_data)
    assert rc == 1 and "no data: declare 'data = \"file.npz\"'" in err
    rc, _, err = flowc(capsys, "train", MLP, "--resume")
    assert rc == 1 and "--resume needs --checkpoint-dir" in err
    rc, _, err = flowc(capsys, "train", tmp_path / "missing.flow")
    assert rc == 1 and "no such file" in err
    bad = os.path.join(TESTS, "flow_errors", "unknown_optimizer.flow")
    rc, _, err = flowc(capsys, "train", bad)
    assert rc == 1 and f"{bad}:5:13: unknown optimizer 'adma'; did you mean 'adam'?" in err


def test_a_missing_declared_data_file_may_be_replaced_with_data(capsys, tmp_path):
    text = open(MLP, encoding="utf-8").read().replace('"data/digits.npz"', '"nowhere.npz"')
    model = tmp_path / "moved.flow"
    model.write_text(text)
    rc, _, err = flowc(capsys, "train", model, "--steps", 1)
    assert rc == 1 and "data file 'nowhere.npz' not found" in err
    rc, out, err = flowc(capsys, "train", model, "--steps", 1, "--data", DIGITS)
    assert rc == 0 and final(out)[0] == 1


def test_train_is_a_plugin_command():
    """The compiler finds `train` through the flowc.commands entry points."""
    from importlib.metadata import entry_points
    names = {ep.name: ep.value for ep in entry_points(group="flowc.commands")}
    assert names.get("train") == "dsl.trainer:register_command"
    proc = subprocess.run([sys.executable, "-m", "compiler.cli", "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "train" in proc.stdout


def test_train_errors_are_train_errors():
    with pytest.raises(TrainError, match="batch size must be at least 1"):
        train(load_spec(MLP), batch_size=0, out=io.StringIO(), err=io.StringIO())


def test_a_python_spec_with_a_non_scalar_loss_is_refused():
    from dsl.trainer import TrainSpec
    g = fl.Graph("vector_loss")
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 64], name="x")
        w = fl.Variable(fl.zeros_initializer(), shape=[64], name="w")
        spec = TrainSpec(g, x * w, fl.train.GradientDescentOptimizer(0.1), data=DIGITS)
    with pytest.raises(TrainError, match=r"the loss must be a scalar, but Mul:0 is f32\[\?,64\]"):
        train(spec, out=io.StringIO(), err=io.StringIO())
