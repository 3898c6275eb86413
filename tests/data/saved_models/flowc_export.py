"""A TF1 program that exports a SavedModel (``simple_save`` and ``Builder``): a small
classifier, trained a few steps. Run by flowc (``import dsl as tf``), its SavedModels are
loaded by TensorFlow in record_flowc_saved_models.py."""
import numpy as np

import dsl as tf


def inputs():
    return np.random.RandomState(7).randn(4, 5).astype(np.float32)


def build():
    x = tf.placeholder(tf.float32, [None, 5], name="x")
    with tf.variable_scope("dense"):
        w = tf.get_variable("kernel", initializer=np.linspace(-1, 1, 15, dtype=np.float32)
                            .reshape(5, 3))
        b = tf.get_variable("bias", initializer=np.array([0.1, 0.0, -0.1], np.float32))
    step = tf.train.get_or_create_global_step()
    logits = tf.matmul(x, w) + b
    hidden = tf.nn.relu(logits, name="hidden")
    probs = tf.nn.softmax(logits, name="probs")
    loss = -tf.reduce_mean(tf.log(probs[:, 0]))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return x, hidden, probs, train


def export(simple_dir, builder_dir):
    """Train 3 steps, then write both SavedModels; returns what the graph computes."""
    x, hidden, probs, train = build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train, {x: inputs()})
        tf.saved_model.simple_save(sess, simple_dir, inputs={"x": x}, outputs={"probs": probs})
        builder = tf.saved_model.Builder(builder_dir)
        serve = tf.saved_model.signature_def_utils.predict_signature_def(
            {"x": x}, {"probs": probs})
        both = tf.saved_model.signature_def_utils.predict_signature_def(
            {"inputs": x}, {"hidden": hidden, "probs": probs})
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={
            "serving_default": serve, "both": both})
        builder.add_meta_graph(["eval"], signature_def_map={"evaluate": both})
        builder.save()
        return dict(zip(["hidden", "probs"], sess.run([hidden, probs], {x: inputs()})))
