"""Records what TensorFlow 1.x computes for the programs of nn_extra_programs.py into
tf1_nn_extra.npz: the nn functions, the conv1d layers, STEPS steps of each optimizer
(variables and slots), and each metric's value after each of two batches. Run with TensorFlow
and tf_keras installed: ``TF_ENABLE_ONEDNN_OPTS=0 python record_tf1_nn_extra.py``. The tests
only read the .npz (tests/dsl/test_tf1_nn_extra.py)."""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nn_extra_programs as programs  # noqa: E402

tf.disable_v2_behavior()


def main() -> None:
    X = programs.inputs()
    out = {f"input/{k}": v for k, v in X.items()}
    with tf.Graph().as_default(), tf.Session() as s:
        for k, v in s.run(programs.nn_functions(tf, X)).items():
            out[f"nn/{k}"] = v
    with tf.Graph().as_default(), tf.Session() as s:
        fetches = programs.layers(tf, X)
        s.run(tf.global_variables_initializer())
        for k, v in s.run(fetches).items():
            out[f"layers/{k}"] = v
        out["names/layers"] = np.array(sorted(v.op.name for v in tf.global_variables()))
    for name in programs.OPTIMIZERS:
        with tf.Graph().as_default(), tf.Session() as s:
            train, tracked = programs.optimizer_model(tf, X, name)
            s.run(tf.global_variables_initializer())
            for _ in range(programs.STEPS):
                s.run(train)
            for k, v in s.run(tracked).items():
                out[f"opt/{name}/{k}"] = v
            out[f"names/{name}"] = np.array(sorted(v.op.name for v in tf.global_variables()))
    with tf.Graph().as_default(), tf.Session() as s:
        ph = dict(labels=tf.placeholder(tf.int32, [None]), probs=tf.placeholder(tf.float32, [None]),
                  weights=tf.placeholder(tf.float32, [None]),
                  classes_true=tf.placeholder(tf.int32, [None]),
                  classes_pred=tf.placeholder(tf.int32, [None]))
        at_k = dict(scores=tf.placeholder(tf.float32, [None, 6]),
                    label_sets=tf.placeholder(tf.int64, [None, 3]),
                    single_labels=tf.placeholder(tf.int64, [None]),
                    row_weights=tf.placeholder(tf.float32, [None]))
        pairs = programs.metrics(tf, **ph)
        pairs.update(programs.metrics_at_k(tf, **at_k))
        s.run(tf.local_variables_initializer())
        for batch in range(2):
            feed = {ph["labels"]: X["labels"][batch], ph["probs"]: X["probs"][batch],
                    ph["weights"]: X["metric_weights"][batch],
                    ph["classes_true"]: X["classes_true"][batch],
                    ph["classes_pred"]: X["classes_pred"][batch]}
            feed.update({at_k[k]: X[k][batch] for k in at_k})
            updates = s.run({k: u for k, (_, u) in pairs.items()}, feed)
            values = s.run({k: v for k, (v, _) in pairs.items()})
            for k in pairs:
                out[f"metric/{k}/update{batch}"] = np.asarray(updates[k])
                out[f"metric/{k}/value{batch}"] = np.asarray(values[k])
        out["names/local_variables"] = np.array(sorted(v.op.name for v in tf.local_variables()))
    np.savez(os.path.join(HERE, "tf1_nn_extra.npz"), **out)
    print(f"wrote {len(out)} arrays")


if __name__ == "__main__":
    main()
