"""``tf.saved_model.simple_save`` and ``tf.saved_model.Builder``: SavedModels TensorFlow
loads. tests/data/saved_models/flowc_{simple_save,builder} were written by flowc_export.py and
loaded by TensorFlow (record_flowc_saved_models.py recorded its outputs); flowc writes the same
saved_model.pb today, and its outputs are TensorFlow's. This test needs no TensorFlow."""
import os
import sys

import numpy as np
import pytest

import dsl as tf
from repo_paths import ROOT

pytest.importorskip("google.protobuf")

DATA = os.path.join(ROOT, "tests", "data", "saved_models")
SIGNATURES = [("flowc_simple_save", "serve", "serving_default"),
              ("flowc_builder", "serve", "serving_default"), ("flowc_builder", "serve", "both"),
              ("flowc_builder", "eval", "evaluate")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    sys.path.insert(0, DATA)
    try:
        import flowc_export
    finally:
        sys.path.remove(DATA)
    folder = tmp_path_factory.mktemp("export")
    with tf.Graph().as_default():
        outputs = flowc_export.export(str(folder / "flowc_simple_save"),
                                      str(folder / "flowc_builder"))
    return folder, outputs, flowc_export.inputs()


def _recorded():
    with np.load(os.path.join(DATA, "flowc_saved_models.tf.npz")) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("model", ["flowc_simple_save", "flowc_builder"])
def test_the_saved_model_tensorflow_loaded_is_what_flowc_writes(exported, model):
    folder, _, _ = exported
    with open(folder / model / "saved_model.pb", "rb") as mine, \
            open(os.path.join(DATA, model, "saved_model.pb"), "rb") as theirs:
        assert mine.read() == theirs.read()
    names = [n for n, _ in tf.train.list_variables(str(folder / model / "variables" /
                                                       "variables"))]
    assert names == ["dense/bias", "dense/kernel", "global_step"]
    assert list(_recorded()[f"{model}:serve:variables"]) == names


def test_tensorflow_computes_what_flowc_computes(exported):
    _, outputs, _ = exported
    recorded = _recorded()
    for model, tag, signature in SIGNATURES:
        for key in ("hidden", "probs"):
            name = f"{model}:{tag}:{signature}:{key}"
            if name in recorded:
                np.testing.assert_allclose(recorded[name], outputs[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["interpreter", "c"])
@pytest.mark.parametrize("model, tag, signature", SIGNATURES)
def test_flowc_loads_what_it_wrote(exported, backend, model, tag, signature):
    folder, outputs, x = exported
    with tf.Graph().as_default():
        with tf.Session(backend=backend) as sess:
            mg = tf.saved_model.loader.load(sess, [tag], str(folder / model))
            sig = mg.signature_def[signature]
            got = sess.run({k: v.name for k, v in sig.outputs.items()},
                           {v.name: x for v in sig.inputs.values()})
    for key, value in got.items():
        np.testing.assert_allclose(value, outputs[key], rtol=1e-5, atol=1e-6)


def test_builder_misuse_is_refused(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "f").write_text("x")
    with pytest.raises(AssertionError, match="already exists, and isn't empty"):
        tf.saved_model.Builder(str(tmp_path / "taken"))
    builder = tf.saved_model.Builder(str(tmp_path / "new"))
    with pytest.raises(AssertionError, match="add_meta_graph_and_variables"):
        builder.add_meta_graph(["serve"])
    with pytest.raises(ValueError, match="outputs cannot be None or empty"):
        tf.saved_model.signature_def_utils.predict_signature_def(
            {"x": tf.placeholder(tf.float32, [2])}, {})
    assert not (tmp_path / "new").exists()
