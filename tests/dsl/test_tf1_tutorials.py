"""TF1 tutorial-style programs nobody on the project wrote for flowc, each written as
``import dsl as tf`` with the idioms TF1 users write (tests/data/tf1_programs/): softmax
regression with feed_dict and GradientDescentOptimizer, an autoencoder with variable dicts and
RMSProp, skip-gram word2vec with nce_loss, and linear regression under
MonitoredTrainingSession with summaries, checkpoints, a resumed run and a Saver restore. The
same files ran under ``tensorflow.compat.v1`` (record_tf1_tutorials.py) and recorded what they
gave into tf1_tutorials.npz; flowc must give the same. TensorFlow is not needed here."""
import importlib.util
import os

import numpy as np
import pytest

from repo_paths import ROOT

HERE = os.path.join(ROOT, "tests", "data", "tf1_programs")
PROGRAMS = ("logistic_regression", "autoencoder", "word2vec", "monitored_training",
            "conv_autoencoder_ema")


def _program(name: str):
    spec = importlib.util.spec_from_file_location(f"tf1_{name}", os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorded(prefix: str) -> dict:
    with np.load(os.path.join(HERE, "tf1_tutorials.npz")) as data:
        return {k[len(prefix) + 1:]: data[k] for k in data.files if k.startswith(prefix + "/")}


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_program_says_flowc_only_in_its_import_line(name):
    with open(os.path.join(HERE, name + ".py")) as f:
        lines = [ln for ln in f if "dsl" in ln]
    assert lines == ["import dsl as tf\n"], lines


def test_softmax_regression_gives_tensorflows_losses_weights_and_accuracy():
    got, want = _program("logistic_regression").main(), _recorded("logistic_regression")
    assert list(got["variables"]) == list(want["variables"])
    assert list(want["variables"]) == ["softmax_regression/weights:0", "softmax_regression/bias:0"]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["weights"], want["weights"], rtol=1e-3, atol=1e-5)
    assert got["accuracy"] == pytest.approx(float(want["accuracy"]), abs=1e-6)
    assert got["losses"][-1] < 0.6 * got["losses"][0]


def test_autoencoder_gives_tensorflows_losses_and_codes():
    got, want = _program("autoencoder").main(), _recorded("autoencoder")
    assert list(got["encoder_variables"]) == list(want["encoder_variables"])
    assert list(got["variables"]) == list(want["variables"])
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(got["codes"], want["codes"], rtol=2e-3, atol=1e-4)
    assert got["worst"] == pytest.approx(float(want["worst"]), rel=2e-3)
    assert got["losses"][-10:].mean() < 0.9 * got["losses"][:10].mean()


def test_word2vec_with_nce_loss_learns_as_much_as_under_tensorflow():
    # the negatives are sampled: flowc's and TensorFlow's differ, so compare what was learned
    got, want = _program("word2vec").main(), _recorded("word2vec")
    assert tuple(got["similarity_shape"]) == tuple(want["similarity_shape"]) == (4, 40)
    start, end = got["full_loss"]
    assert start == pytest.approx(float(want["full_loss"][0]), rel=1e-5)     # the same start
    assert end < start - 1.0                                   # the full softmax loss fell
    # TensorFlow itself ends between 2.25 and 2.71 from run to run (its sampler is unseeded)
    assert abs(end - float(want["full_loss"][1])) < 0.5, (end, want["full_loss"])
    assert got["losses"][-20:].mean() < 0.5 * got["losses"][:20].mean()


def test_monitored_training_resumes_and_restores_as_under_tensorflow(tmp_path):
    got, want = _program("monitored_training").main(str(tmp_path)), _recorded("monitored_training")
    assert len(got["first_run"]) == 20 and len(got["second_run"]) == 10   # resumed at step 20
    np.testing.assert_allclose(got["first_run"], want["first_run"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["second_run"], want["second_run"], rtol=1e-4, atol=1e-6)
    assert got["restored_step"] == want["restored_step"] == 30
    np.testing.assert_allclose(got["w"], want["w"], rtol=1e-4)
    np.testing.assert_allclose(got["b"], want["b"], rtol=1e-4)
    assert got["total"] == want["total"] == 45
    assert got["big"] == pytest.approx(float(want["big"]), rel=1e-4)
    # the summaries: the program's FileWriter's, and the SummarySaverHook's in checkpoint_dir
    events = os.listdir(tmp_path / "events")
    assert events and all(e.startswith("events.out.tfevents.") for e in events)
    assert any(e.startswith("events.out.tfevents.") for e in os.listdir(tmp_path))


def test_conv_autoencoder_with_flags_template_ema_and_print(tmp_path, capfd):
    # conv2d_transpose, make_template, ExponentialMovingAverage + variables_to_restore,
    # tf.Print (first_n=1), tf.app.flags and tf.gfile in one TF1 program
    path = os.path.join(HERE, "conv_autoencoder_ema.py")
    with open(path) as f:
        assert [ln for ln in f if "dsl" in ln] == ["import dsl as tf\n"]
    got = _program("conv_autoencoder_ema").main(str(tmp_path))
    want = _recorded("conv_autoencoder_ema")
    assert list(got["variables"]) == list(want["variables"])
    assert list(got["average_names"]) == list(want["average_names"])
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got["shared_code"], want["shared_code"], rtol=1e-4, atol=1e-6)
    assert got["raw_test_loss"] == pytest.approx(float(want["raw_test_loss"]), rel=1e-4)
    assert got["averaged_test_loss"] == pytest.approx(float(want["averaged_test_loss"]),
                                                      rel=1e-4)
    assert capfd.readouterr().err.count("loss: [0.1039892") == 1
