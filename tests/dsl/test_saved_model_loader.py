"""``tf.saved_model.loader.load(sess, tags, export_dir)``: TF1 SavedModels TensorFlow wrote
(tests/data/saved_models/, recorded by make_saved_models.py with what TensorFlow computed)
loaded into a flowc session, run by their signatures' tensor names on both backends, and
trained and saved further: their reference variables become flowc variables."""
import os

import numpy as np
import pytest

import dsl as tf
from compiler.interop.saved_model import SavedModelError
from repo_paths import ROOT

pytest.importorskip("google.protobuf")

DATA = os.path.join(ROOT, "tests", "data", "saved_models")
BACKENDS = ("interpreter", "c")


def _recorded(name):
    with np.load(os.path.join(DATA, name + ".npz")) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model, tags, signature", [
    ("tf1_builder", ["serve"], "serving_default"), ("tf1_builder", ["serve"], "hidden"),
    ("tf1_builder", ["eval"], "evaluate"), ("tf1_simple_save", ["serve"], "serving_default")])
def test_signatures_give_what_tensorflow_gave(backend, model, tags, signature):
    want = _recorded(model)
    with tf.Graph().as_default():
        with tf.Session(backend=backend) as sess:
            mg = tf.saved_model.loader.load(sess, tags, os.path.join(DATA, model))
            sig = mg.signature_def[signature]
            feed = {info.name: want[f"in:{signature}:{key}"] for key, info in sig.inputs.items()}
            keys = sorted(sig.outputs)
            got = sess.run([sig.outputs[k].name for k in keys], feed)
    for key, value in zip(keys, got):
        np.testing.assert_allclose(value, want[f"out:{signature}:{key}"], rtol=1e-5, atol=1e-6)


def test_loaded_variables_train_and_save_under_their_tf_names(tmp_path):
    want = _recorded("tf1_builder")
    x_val = want["in:serving_default:x"]
    with tf.Graph().as_default() as g:
        with tf.Session() as sess:
            tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING],
                                       os.path.join(DATA, "tf1_builder"))
            assert sorted(v.op.name for v in tf.trainable_variables()) == \
                ["dense/bias", "dense/kernel", "head/kernel"]
            probs = g.get_tensor_by_name("probs:0")
            loss = -tf.reduce_mean(tf.log(probs[:, 0]))
            train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
            before = sess.run(loss, {"x:0": x_val})
            for _ in range(5):
                sess.run(train, {"x:0": x_val})
            after = sess.run(loss, {"x:0": x_val})
            assert after < before
            saver = tf.train.Saver()
            path = saver.save(sess, str(tmp_path / "model.ckpt"), write_meta_graph=False)
            trained = sess.run(tf.trainable_variables())
    assert [n for n, _ in tf.train.list_variables(path)] == \
        ["dense/bias", "dense/kernel", "head/kernel"]
    names = [v for v in ("dense/kernel", "dense/bias", "head/kernel")]
    for name, value in zip(names, trained):
        np.testing.assert_array_equal(tf.train.load_variable(path, name), value)


def test_import_scope_prefixes_every_name():
    want = _recorded("tf1_simple_save")
    with tf.Graph().as_default():
        with tf.Session() as sess:
            tf.saved_model.loader.load(sess, ["serve"], os.path.join(DATA, "tf1_simple_save"),
                                       import_scope="m")
            got = sess.run("m/probs:0", {"m/x:0": want["in:serving_default:x"]})
            assert all(v.op.name.startswith("m/") for v in tf.global_variables())
    np.testing.assert_allclose(got, want["out:serving_default:probs"], rtol=1e-5)


def test_unknown_tags_and_folders_are_errors_naming_the_file(tmp_path):
    assert tf.saved_model.loader.maybe_saved_model_directory(os.path.join(DATA, "tf1_builder"))
    assert not tf.saved_model.loader.maybe_saved_model_directory(str(tmp_path))
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(SavedModelError, match=r"saved_model.pb.*(gpu|tag)"):
            tf.saved_model.loader.load(sess, ["gpu"], os.path.join(DATA, "tf1_builder"))
        with pytest.raises(SavedModelError, match="not a SavedModel folder"):
            tf.saved_model.loader.load(sess, ["serve"], str(tmp_path))
