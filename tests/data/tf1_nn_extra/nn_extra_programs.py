"""TF1 programs over the nn functions, optimizers and metrics of this group, written once
against a ``tf`` module: record_tf1_nn_extra.py runs them with ``tensorflow.compat.v1`` and
stores the results in tf1_nn_extra.npz; tests/dsl/test_tf1_nn_extra.py runs them with
``import dsl as tf`` and compares."""
import numpy as np


def inputs() -> dict:
    rng = np.random.default_rng(7)
    probs = rng.uniform(0, 1, (2, 12)).astype(np.float32)
    probs[0, :3] = [0.0, 1.0, 0.5]
    return {
        "image": rng.standard_normal((2, 3, 3, 7)).astype(np.float32),
        "lrn_weights": rng.standard_normal((2, 3, 3, 7)).astype(np.float32),
        "seq": rng.standard_normal((2, 9, 3)).astype(np.float32),
        "seq_filter": rng.standard_normal((3, 3, 4)).astype(np.float32) * 0.5,
        "picture": rng.standard_normal((2, 7, 7, 3)).astype(np.float32),
        "kernel": rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3,
        "depthwise": rng.standard_normal((3, 3, 3, 2)).astype(np.float32) * 0.3,
        "pointwise": rng.standard_normal((1, 1, 6, 5)).astype(np.float32) * 0.3,
        "targets": rng.uniform(0, 1, (4, 3)).astype(np.float32),
        "logits": rng.standard_normal((4, 3)).astype(np.float32) * 3,
        "sparse": (rng.standard_normal((3, 5)) * (rng.random((3, 5)) < 0.4)).astype(np.float32),
        "x": rng.standard_normal((5, 3)).astype(np.float32),
        "w0": rng.standard_normal((3, 4)).astype(np.float32) * 0.5,
        "emb0": rng.standard_normal((6, 4)).astype(np.float32) * 0.5,
        "ids": np.array([1, 4, 1, 0], np.int32),
        "t": rng.standard_normal((5, 4)).astype(np.float32),
        "u": rng.standard_normal((4, 4)).astype(np.float32),
        "labels": (rng.random((2, 12)) < 0.5).astype(np.int32),
        "probs": probs,
        "metric_weights": rng.uniform(0, 2, (2, 12)).astype(np.float32),
        "classes_true": rng.integers(0, 3, (2, 12)).astype(np.int32),
        "classes_pred": rng.integers(0, 3, (2, 12)).astype(np.int32),
        "layer_kernel": rng.standard_normal((3, 3, 4)).astype(np.float32) * 0.5,
        "layer_bias": rng.standard_normal(4).astype(np.float32),
        "scores": rng.standard_normal((2, 5, 6)).astype(np.float32),
        # label sets with a repeated label and one outside the 6 classes
        "label_sets": np.array([[[0, 3, 3], [1, 2, 5], [4, 6, 0], [2, 2, 2], [5, 1, 0]],
                                [[3, 4, 1], [0, 0, 5], [6, 6, 2], [1, 4, 3], [2, 5, 0]]],
                               np.int64),
        "single_labels": rng.integers(0, 6, (2, 5)).astype(np.int64),
        "row_weights": rng.uniform(0, 2, (2, 5)).astype(np.float32),
    }


def nn_functions(tf, X) -> dict:
    """Fetches of the nn functions for the inputs ``X`` (constants)."""
    c = {k: tf.constant(v) for k, v in X.items()}
    out = {}
    y = tf.nn.lrn(c["image"], 2, 1.5, 0.3, 0.75)
    out["lrn"] = y
    out["lrn_default"] = tf.nn.local_response_normalization(c["image"])
    out["lrn_grad"] = tf.gradients(tf.reduce_sum(y * c["lrn_weights"]), c["image"])[0]
    out["conv1d_same_s2"] = tf.nn.conv1d(c["seq"], c["seq_filter"], 2, "SAME")
    out["conv1d_valid_d2"] = tf.nn.conv1d(c["seq"], c["seq_filter"], 1, "VALID", dilations=2)
    out["conv1d_list_stride"] = tf.nn.conv1d(value=c["seq"], filters=c["seq_filter"],
                                             stride=[1, 3, 1], padding="VALID")
    out["atrous_same"] = tf.nn.atrous_conv2d(c["picture"], c["kernel"], 2, "SAME")
    out["atrous_valid"] = tf.nn.atrous_conv2d(c["picture"], c["kernel"], 3, "VALID")
    out["separable_same"] = tf.nn.separable_conv2d(c["picture"], c["depthwise"],
                                                   c["pointwise"], [1, 1, 1, 1], "SAME")
    out["separable_rate"] = tf.nn.separable_conv2d(c["picture"], c["depthwise"],
                                                   c["pointwise"], [1, 1, 1, 1], "VALID",
                                                   rate=[2, 2])
    out["separable_stride"] = tf.nn.separable_conv2d(c["picture"], c["depthwise"],
                                                     c["pointwise"], [1, 2, 2, 1], "VALID")
    out["weighted_xent"] = tf.nn.weighted_cross_entropy_with_logits(
        labels=c["targets"], logits=c["logits"], pos_weight=2.5)
    out["weighted_xent_targets"] = tf.nn.weighted_cross_entropy_with_logits(
        targets=c["targets"], logits=c["logits"], pos_weight=0.4)
    out["zero_fraction"] = tf.nn.zero_fraction(c["sparse"])
    out["zero_fraction_int"] = tf.nn.zero_fraction(tf.cast(c["sparse"], tf.int32))
    return out


def layers(tf, X) -> dict:
    """tf.layers.conv1d and tf.layers.Conv1D with fixed initial values."""
    seq = tf.constant(X["seq"])
    init = dict(kernel_initializer=tf.constant_initializer(X["layer_kernel"]),
                bias_initializer=tf.constant_initializer(X["layer_bias"]))
    out = {"conv1d_same": tf.layers.conv1d(seq, 4, 3, padding="same",
                                           activation=tf.nn.relu, name="conv_a", **init)}
    layer = tf.layers.Conv1D(4, 3, strides=2, name="conv_b", **init)
    out["Conv1D_stride"] = layer(seq)
    out["Conv1D_dilated"] = tf.layers.conv1d(seq, 4, 3, dilation_rate=2, use_bias=False,
                                             kernel_initializer=init["kernel_initializer"])
    return out


OPTIMIZERS = {
    "adadelta": lambda tf: tf.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-6),
    "adadelta_default": lambda tf: tf.train.AdadeltaOptimizer(),
    "ftrl": lambda tf: tf.train.FtrlOptimizer(0.1),
    "ftrl_l1_l2": lambda tf: tf.train.FtrlOptimizer(
        0.2, learning_rate_power=-0.7, initial_accumulator_value=0.2,
        l1_regularization_strength=0.05, l2_regularization_strength=0.1),
    "ftrl_shrinkage": lambda tf: tf.train.FtrlOptimizer(
        0.3, l1_regularization_strength=0.01, l2_regularization_strength=0.02,
        l2_shrinkage_regularization_strength=0.05, beta=0.3),
}
STEPS = 3


def optimizer_model(tf, X, name: str):
    """A dense weight and an embedding (a sparse gradient with a repeated id), trained
    ``STEPS`` steps by ``OPTIMIZERS[name]``; returns (train_op, {name: variable})."""
    w = tf.Variable(X["w0"], name="w")
    emb = tf.Variable(X["emb0"], name="emb")
    x, t, u = tf.constant(X["x"]), tf.constant(X["t"]), tf.constant(X["u"])
    loss = tf.reduce_sum(tf.tanh(tf.matmul(x, w)) * t) + \
        tf.reduce_sum(tf.square(tf.gather(emb, tf.constant(X["ids"]))) * u)
    opt = OPTIMIZERS[name](tf)
    train = opt.minimize(loss)
    tracked = {"w": w, "emb": emb}
    for v in (w, emb):
        for slot in sorted(opt.get_slot_names()):
            tracked[f"{v.op.name}/{slot}"] = opt.get_slot(v, slot)
    return train, tracked


def metrics(tf, labels, probs, weights, classes_true, classes_pred) -> dict:
    """(value, update_op) pairs of the metrics for one batch's placeholders."""
    m = tf.metrics
    preds = tf.greater(probs, 0.5)
    out = {
        "true_positives": m.true_positives(labels, preds),
        "false_positives": m.false_positives(labels, preds, weights=weights),
        "true_negatives": m.true_negatives(labels, preds),
        "false_negatives": m.false_negatives(labels, preds, weights=weights),
        "precision": m.precision(labels, preds),
        "precision_w": m.precision(labels, preds, weights=weights),
        "recall": m.recall(labels, preds, weights=weights),
        "auc": m.auc(labels, probs),
        "auc_w": m.auc(labels, probs, weights=weights, num_thresholds=7),
        "auc_pr": m.auc(labels, probs, curve="PR", num_thresholds=11),
        "auc_pr_careful": m.auc(labels, probs, curve="PR", num_thresholds=11,
                                summation_method="careful_interpolation"),
        "auc_minoring": m.auc(labels, probs, num_thresholds=9, summation_method="minoring"),
        "auc_majoring": m.auc(labels, probs, num_thresholds=9, summation_method="majoring"),
        "auc_thresholds": m.auc(labels, probs, thresholds=[0.25, 0.5, 0.75]),
        "mean_iou": m.mean_iou(classes_true, classes_pred, 3),
        "mean_iou_w": m.mean_iou(classes_true, classes_pred, 3, weights=weights),
    }
    return out


def metrics_at_k(tf, scores, label_sets, single_labels, row_weights) -> dict:
    """(value, update_op) pairs of precision_at_k and recall_at_k for one batch."""
    m = tf.metrics
    return {
        "precision_at_2": m.precision_at_k(label_sets, scores, 2),
        "recall_at_2": m.recall_at_k(label_sets, scores, 2),
        "recall_at_3_single": m.recall_at_k(single_labels, scores, 3),
        "precision_at_1_w": m.precision_at_k(label_sets, scores, 1, weights=row_weights),
        "recall_at_2_class1": m.recall_at_k(label_sets, scores, 2, class_id=1),
        "precision_at_3_class4_w": m.precision_at_k(label_sets, scores, 3, class_id=4,
                                                    weights=row_weights),
    }
