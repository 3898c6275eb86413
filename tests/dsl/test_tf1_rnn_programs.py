"""TF1 RNN programs written as ``import dsl as tf`` (tests/data/tf1_programs/): an LSTM
language model trained with dynamic_rnn, every cell under dynamic_rnn, static_rnn and
bidirectional_dynamic_rnn, and an RNN restored from a checkpoint TensorFlow wrote. flowc must
give what TensorFlow gave for the same programs with only the import changed (recorded by
record_tf1_programs.py into tf1_programs.npz); where TensorFlow with its TF1 cells is
installed, the language model also runs under it here."""
import importlib.util
import os

import numpy as np
import pytest

from repo_paths import ROOT

HERE = os.path.join(ROOT, "tests", "data", "tf1_programs")
RECORDED = os.path.join(HERE, "tf1_programs.npz")


def _program(name: str):
    spec = importlib.util.spec_from_file_location(f"tf1_{name}", os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _recorded(prefix: str) -> dict:
    with np.load(RECORDED) as data:
        return {k[len(prefix) + 1:]: data[k] for k in data.files if k.startswith(prefix + "/")}


def test_the_programs_say_flowc_only_in_their_import_line():
    for name in ("lstm_language_model", "rnn_cell_zoo", "rnn_checkpoint"):
        with open(os.path.join(HERE, name + ".py")) as f:
            lines = [ln for ln in f if "dsl" in ln]
        assert lines == ["import dsl as tf\n"], (name, lines)


def test_lstm_language_model_learns_and_gives_tensorflows_losses():
    train, valid, names = _program("lstm_language_model").main()
    want = _recorded("lstm_language_model")
    assert names == list(want["variables"])         # TF1's names, Adam's slots included
    assert "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel:0" in names
    np.testing.assert_allclose(train, want["train_losses"], rtol=2e-4)
    np.testing.assert_allclose(valid, want["valid_losses"], rtol=2e-4)
    # it learns: the held-out loss falls well below the uniform guess, log(24) = 3.18
    assert valid[-1] < 2.2 and valid[-1] < valid[0] - 0.8, valid


def test_every_cell_and_rnn_gives_tensorflows_outputs_states_and_gradients():
    got = _program("rnn_cell_zoo").main()
    want = _recorded("rnn_cell_zoo")
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        if key.endswith("/variables"):
            assert list(got[key]) == list(want[key]), key
            continue
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=2e-5, err_msg=key)


def test_a_checkpoint_tensorflow_wrote_loads_by_tf1s_variable_names():
    import dsl as fl
    from compiler.interop.tensor_bundle import open_bundle
    program = _program("rnn_checkpoint")
    want = _recorded("rnn_checkpoint")
    bundle = open_bundle(os.path.join(HERE, "rnn_checkpoint", "model.ckpt"))
    with fl.Graph().as_default():
        x, lengths, fetches = program.build()
        variables = fl.global_variables()
        assert sorted(v.name for v in variables) == list(want["variables"])
        assert sorted(bundle.keys()) == sorted(v.name[:-2] for v in variables)
        with fl.Session() as s:
            for v in variables:                       # each by its own name
                v.load(bundle.read(v.name[:-2]), s)
            got = s.run(fetches, {x: program.inputs(), lengths: [5, 3]})
    for k, value in enumerate(got):
        np.testing.assert_allclose(value, want[f"fetch{k}"], rtol=1e-5, atol=1e-6)


def _tensorflow_v1():
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    tf = pytest.importorskip("tensorflow.compat.v1")
    try:
        tf.nn.rnn_cell.BasicLSTMCell
    except (AttributeError, ImportError):
        pytest.skip("this TensorFlow has no TF1 RNN cells (install tf-keras)")
    tf.disable_v2_behavior()
    return tf


def test_the_same_program_under_tensorflow_gives_the_same_losses():
    _tensorflow_v1()
    import sys
    sys.path.insert(0, HERE)
    try:
        from record_tf1_programs import TF_IMPORT, load_under
    finally:
        sys.path.remove(HERE)
    tf_train, tf_valid, tf_names = load_under("lstm_language_model", TF_IMPORT).main()
    train, valid, names = _program("lstm_language_model").main()
    assert names == tf_names
    np.testing.assert_allclose(train, tf_train, rtol=2e-4)
    np.testing.assert_allclose(valid, tf_valid, rtol=2e-4)
