"""Records what TensorFlow 1.x's API computes for fixed inputs into tf1_api.npz: tf.losses
(every loss, with weights and each reduction), tf.metrics.accuracy/mean over batches,
tf.train.exponential_decay/piecewise_constant, and tf.layers (dense, conv2d, pooling,
batch_normalization fused and not, in training and inference, with the moving averages after
the update ops ran). Run with TensorFlow and tf_keras installed:
``TF_USE_LEGACY_KERAS=1 TF_ENABLE_ONEDNN_OPTS=0 python record_tf1_api.py``. The tests only
read the .npz (tests/dsl/test_tf1_losses_metrics.py, tests/dsl/test_layers.py)."""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REDUCTIONS = ["none", "weighted_sum", "weighted_mean", "weighted_sum_over_batch_size",
              "weighted_sum_by_nonzero_weights"]


def inputs(rng):
    return {
        "labels": rng.standard_normal((4, 3)).astype(np.float32),
        "predictions": rng.standard_normal((4, 3)).astype(np.float32) * 2,
        "probs": rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32),
        "bits": (rng.random((4, 3)) < 0.5).astype(np.float32),
        "weights_row": np.array([[1.0], [0.0], [2.0], [0.5]], np.float32),
        "weights_full": rng.uniform(0, 2, (4, 3)).astype(np.float32) *
        (rng.random((4, 3)) < 0.7),
        "class_ids": np.array([2, 0, 1, 2], np.int32),
        "weights_batch": np.array([1.0, 0.0, 3.0, 1.0], np.float32),
        "image": rng.standard_normal((2, 6, 6, 3)).astype(np.float32),
        "kernel": rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3,
        "dense_kernel": rng.standard_normal((3, 5)).astype(np.float32),
        "bn_batches": rng.standard_normal((3, 4, 3, 3, 2)).astype(np.float32) * 2 + 1,
        "bn_flat": rng.standard_normal((3, 5, 4)).astype(np.float32) * 3 - 1,
        "metric_preds": np.array([[0, 1, 2, 2], [1, 1, 0, 2], [2, 0, 0, 1]], np.int64),
        "metric_labels": np.array([[0, 1, 1, 2], [1, 0, 0, 2], [2, 2, 0, 1]], np.int64),
        "metric_weights": np.array([[1, 1, 0, 1], [0.5, 1, 1, 0], [1, 2, 1, 1]], np.float32),
    }


def record_losses(x, out):
    g = tf.Graph()
    with g.as_default():
        L = tf.losses
        c = {k: tf.constant(v) for k, v in x.items()}
        fetch = {}
        for red in REDUCTIONS:
            for wname, w in (("scalar", 0.7), ("row", c["weights_row"]),
                             ("full", c["weights_full"])):
                k = f"{red}/{wname}"
                fetch[f"loss/absolute_difference/{k}"] = L.absolute_difference(
                    c["labels"], c["predictions"], w, reduction=red)
                fetch[f"loss/mean_squared_error/{k}"] = L.mean_squared_error(
                    c["labels"], c["predictions"], w, reduction=red)
                fetch[f"loss/huber_loss/{k}"] = L.huber_loss(
                    c["labels"], c["predictions"], w, delta=1.5, reduction=red)
                fetch[f"loss/log_loss/{k}"] = L.log_loss(c["bits"], c["probs"], w,
                                                         reduction=red)
                fetch[f"loss/hinge_loss/{k}"] = L.hinge_loss(c["bits"], c["predictions"], w,
                                                             reduction=red)
                fetch[f"loss/sigmoid_cross_entropy/{k}"] = L.sigmoid_cross_entropy(
                    c["bits"], c["predictions"], w, label_smoothing=0.1, reduction=red)
            onehot = tf.one_hot(c["class_ids"], 3)
            for wname, w in (("scalar", 1.0), ("batch", c["weights_batch"])):
                k = f"{red}/{wname}"
                fetch[f"loss/softmax_cross_entropy/{k}"] = L.softmax_cross_entropy(
                    onehot, c["predictions"], w, label_smoothing=0.2, reduction=red)
                fetch[f"loss/sparse_softmax_cross_entropy/{k}"] = \
                    L.sparse_softmax_cross_entropy(c["class_ids"], c["predictions"], w,
                                                   reduction=red)
        fetch["loss/cosine_distance"] = L.cosine_distance(
            tf.nn.l2_normalize(c["labels"], 1), tf.nn.l2_normalize(c["predictions"], 1),
            axis=1)
        fetch["loss/mean_pairwise_squared_error"] = L.mean_pairwise_squared_error(
            c["labels"], c["predictions"], c["weights_batch"][:, None])
        with tf.Session() as s:
            for k, v in s.run(fetch).items():
                out[k] = v


def record_metrics(x, out):
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.int64, [4])
        lab = tf.placeholder(tf.int64, [4])
        w = tf.placeholder(tf.float32, [4])
        acc, acc_up = tf.metrics.accuracy(lab, p)
        wacc, wacc_up = tf.metrics.accuracy(lab, p, weights=w)
        mean, mean_up = tf.metrics.mean(tf.cast(p, tf.float32) * 1.5, weights=w)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            for i in range(3):
                feed = {p: x["metric_preds"][i], lab: x["metric_labels"][i],
                        w: x["metric_weights"][i]}
                ups = s.run([acc_up, wacc_up, mean_up], feed)
                vals = s.run([acc, wacc, mean])
                out[f"metric/update/{i}"] = np.array(ups, np.float32)
                out[f"metric/value/{i}"] = np.array(vals, np.float32)


def record_schedules(out):
    g = tf.Graph()
    with g.as_default():
        step = tf.placeholder(tf.int64, [])
        e = tf.train.exponential_decay(0.1, step, 100, 0.5)
        es = tf.train.exponential_decay(0.1, step, 100, 0.5, staircase=True)
        pc = tf.train.piecewise_constant(step, [10, 50], [1.0, 0.5, 0.1])
        steps = np.array([0, 1, 10, 11, 50, 51, 99, 150, 250], np.int64)
        with tf.Session() as s:
            out["schedule/steps"] = steps
            out["schedule/values"] = np.array([s.run([e, es, pc], {step: i}) for i in steps],
                                              np.float32)


def record_layers(x, out):
    g = tf.Graph()
    with g.as_default():
        img = tf.constant(x["image"])
        conv = tf.layers.conv2d(img, 4, 3, padding="same", activation=tf.nn.relu,
                                kernel_initializer=tf.constant_initializer(x["kernel"]),
                                bias_initializer=tf.constant_initializer(0.1))
        conv_valid = tf.layers.conv2d(img, 4, 3, strides=2, padding="valid",
                                      kernel_initializer=tf.constant_initializer(x["kernel"]))
        mp = tf.layers.max_pooling2d(conv, 2, 2)
        ap = tf.layers.average_pooling2d(conv, 3, 2, padding="same")
        flat = tf.layers.flatten(mp)
        dense = tf.layers.dense(tf.constant(x["labels"]), 5, activation=tf.nn.tanh,
                                kernel_initializer=tf.constant_initializer(x["dense_kernel"]))
        training = tf.placeholder_with_default(False, [])
        xb = tf.placeholder(tf.float32, [None, 3, 3, 2])
        xf = tf.placeholder(tf.float32, [None, 4])
        bn_fused = tf.layers.batch_normalization(xb, training=training, momentum=0.9,
                                                 name="bn_fused")
        bn_plain = tf.layers.batch_normalization(xf, training=training, momentum=0.8,
                                                 epsilon=0.01, name="bn_plain")
        updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        moving = [v for v in tf.global_variables() if "moving" in v.name]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for k, v in s.run({"conv": conv, "conv_valid": conv_valid, "max_pool": mp,
                               "avg_pool": ap, "flatten": flat, "dense": dense}).items():
                out[f"layer/{k}"] = v
            for i in range(3):
                feed = {xb: x["bn_batches"][i], xf: x["bn_flat"][i], training: True}
                yf, yp, _ = s.run([bn_fused, bn_plain, updates], feed)
                out[f"bn/train/{i}/fused"], out[f"bn/train/{i}/plain"] = yf, yp
                for v, val in zip(moving, s.run(moving)):
                    out[f"bn/moving/{i}/{v.name[:-2]}"] = val
            yf, yp = s.run([bn_fused, bn_plain], {xb: x["bn_batches"][0], xf: x["bn_flat"][0]})
            out["bn/infer/fused"], out["bn/infer/plain"] = yf, yp


def main():
    tf.disable_eager_execution()
    x = inputs(np.random.default_rng(20261202))
    out = {f"input/{k}": v for k, v in x.items()}
    record_losses(x, out)
    record_metrics(x, out)
    record_schedules(out)
    record_layers(x, out)
    path = os.path.join(HERE, "tf1_api.npz")
    np.savez_compressed(path, **out)
    print(f"wrote {len(out)} arrays to {path} (TensorFlow {tf.__version__})")


if __name__ == "__main__":
    main()
