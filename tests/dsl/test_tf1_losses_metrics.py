"""fl.losses, fl.metrics and the learning-rate schedules, written as TF1 programs
(``import dsl as tf``), against what TensorFlow computed for the same programs
(tests/data/tf1_layers/tf1_api.npz, recorded by record_tf1_api.py there) and against numpy
formulas of TF1's definitions."""
import os

import numpy as np
import pytest

import dsl as tf
from repo_paths import TESTS

REF = np.load(os.path.join(TESTS, "data", "tf1_layers", "tf1_api.npz"))
X = {k[len("input/"):]: REF[k] for k in REF.files if k.startswith("input/")}
REDUCTIONS = ["none", "weighted_sum", "weighted_mean", "weighted_sum_over_batch_size",
              "weighted_sum_by_nonzero_weights"]


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


def _run(fetches, feed=None, backend="c"):
    with tf.Session(backend=backend) as s:
        s.run(tf.local_variables_initializer())
        return s.run(fetches, feed or {})


# --- losses ------------------------------------------------------------------------------------
def _build_losses():
    L = tf.losses
    c = {k: tf.constant(v) for k, v in X.items()}
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
            fetch[f"loss/log_loss/{k}"] = L.log_loss(c["bits"], c["probs"], w, reduction=red)
            fetch[f"loss/hinge_loss/{k}"] = L.hinge_loss(c["bits"], c["predictions"], w,
                                                         reduction=red)
            fetch[f"loss/sigmoid_cross_entropy/{k}"] = L.sigmoid_cross_entropy(
                c["bits"], c["predictions"], w, label_smoothing=0.1, reduction=red)
        onehot = tf.one_hot(c["class_ids"], 3)
        for wname, w in (("scalar", 1.0), ("batch", c["weights_batch"])):
            k = f"{red}/{wname}"
            fetch[f"loss/softmax_cross_entropy/{k}"] = L.softmax_cross_entropy(
                onehot, c["predictions"], w, label_smoothing=0.2, reduction=red)
            fetch[f"loss/sparse_softmax_cross_entropy/{k}"] = L.sparse_softmax_cross_entropy(
                c["class_ids"], c["predictions"], w, reduction=red)
    fetch["loss/cosine_distance"] = L.cosine_distance(
        tf.nn.l2_normalize(c["labels"], 1), tf.nn.l2_normalize(c["predictions"], 1), axis=1)
    fetch["loss/mean_pairwise_squared_error"] = L.mean_pairwise_squared_error(
        c["labels"], c["predictions"], c["weights_batch"][:, None])
    return fetch


@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_every_loss_weighting_and_reduction_matches_tensorflow(backend):
    fetch = _build_losses()
    got = _run(fetch, backend=backend)
    assert len(got) == len([k for k in REF.files if k.startswith("loss/")])
    for k, v in got.items():
        want = REF[k]
        assert v.shape == want.shape and v.dtype == np.float32, k
        np.testing.assert_allclose(v, want, rtol=1e-5, atol=1e-6, err_msg=k)


def _reduce(losses, w, reduction):
    """TF1's compute_weighted_loss, in numpy."""
    weighted = losses * w
    if reduction == "none":
        return weighted
    total = weighted.sum()
    if reduction == "weighted_sum":
        return total
    if reduction == "weighted_mean":
        denom = (np.ones_like(losses) * w).sum()
    elif reduction == "weighted_sum_over_batch_size":
        denom = losses.size
    else:
        denom = (np.broadcast_to(w, losses.shape) != 0).sum()
    return total / denom if denom else 0.0


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_losses_follow_their_formulas_and_reductions(reduction):
    lab, pred, w = X["labels"], X["predictions"], X["weights_full"]
    e = pred - lab
    q = np.minimum(np.abs(e), 1.5)
    formulas = {
        "absolute_difference": np.abs(e),
        "mean_squared_error": e ** 2,
        "huber_loss": 0.5 * q * q + 1.5 * (np.abs(e) - q),
        "hinge_loss": np.maximum(0, 1 - (2 * X["bits"] - 1) * pred),
    }
    fetch = {
        "absolute_difference": tf.losses.absolute_difference(lab, pred, w, reduction=reduction),
        "mean_squared_error": tf.losses.mean_squared_error(lab, pred, w, reduction=reduction),
        "huber_loss": tf.losses.huber_loss(lab, pred, w, delta=1.5, reduction=reduction),
        "hinge_loss": tf.losses.hinge_loss(X["bits"], pred, w, reduction=reduction),
    }
    got = _run(fetch)
    for k, losses in formulas.items():
        np.testing.assert_allclose(got[k], _reduce(losses, w, reduction), rtol=1e-5,
                                   atol=1e-6, err_msg=k)


def test_all_zero_weights_give_zero_not_nan_and_losses_are_collected():
    zero = np.zeros((4, 3), np.float32)
    loss = tf.losses.mean_squared_error(X["labels"], X["predictions"], weights=zero)
    assert tf.get_collection(tf.GraphKeys.LOSSES) == [loss]
    assert tf.losses.get_losses() == [loss]
    assert _run(loss) == 0.0
    nothing = tf.losses.absolute_difference(X["labels"], X["predictions"], loss_collection=None)
    assert tf.losses.get_losses() == [loss] and nothing is not None


def test_bad_weights_and_shapes_are_refused_as_tensorflow_does():
    with pytest.raises(ValueError, match="weights can not be broadcast to values"):
        tf.losses.mean_squared_error(X["labels"], X["predictions"], weights=np.ones(4))
    with pytest.raises(ValueError, match="incompatible"):
        tf.losses.mean_squared_error(X["labels"], X["predictions"][:, :2])
    with pytest.raises(ValueError, match="Invalid Reduction Key"):
        tf.losses.compute_weighted_loss(X["labels"], reduction="average")
    with pytest.raises(ValueError, match="`labels` must not be None"):
        tf.losses.log_loss(None, X["probs"])


def test_total_loss_adds_the_regularization_losses():
    reg = tf.contrib.layers.l2_regularizer(0.25)
    x = tf.constant(X["labels"])
    y = tf.layers.dense(x, 5, kernel_initializer=tf.constant_initializer(X["dense_kernel"]),
                        kernel_regularizer=reg, bias_regularizer=reg)
    with tf.variable_scope("extra", regularizer=tf.contrib.layers.l1_regularizer(0.5)):
        w = tf.get_variable("w", initializer=np.array([1.0, -2.0, 3.0], np.float32))
    data_loss = tf.losses.mean_squared_error(tf.zeros_like(y), y)
    regs = tf.losses.get_regularization_losses()
    assert [r.name for r in regs] == ["dense/kernel/Regularizer/l2_regularizer:0",
                                      "dense/bias/Regularizer/l2_regularizer:0",
                                      "extra/w/Regularizer/l1_regularizer:0"]
    total = tf.losses.get_total_loss()
    no_reg = tf.losses.get_total_loss(add_regularization_losses=False, name="data_only")
    reg_total = tf.losses.get_regularization_loss()
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        t, d, r, yv = s.run([total, no_reg, reg_total, y])
    kernel = X["dense_kernel"]
    want_reg = 0.25 * (kernel ** 2).sum() / 2 + 0.5 * 6.0      # bias is zero
    np.testing.assert_allclose(r, want_reg, rtol=1e-6)
    np.testing.assert_allclose(d, (yv ** 2).mean(), rtol=1e-6)
    np.testing.assert_allclose(t, d + r, rtol=1e-6)
    assert w.name == "extra/w:0"


def test_regularization_loss_is_zero_without_regularizers():
    assert _run(tf.losses.get_regularization_loss()) == 0.0


# --- metrics -----------------------------------------------------------------------------------
def test_accuracy_and_mean_stream_over_batches_like_tensorflow():
    p = tf.placeholder(tf.int64, [4])
    lab = tf.placeholder(tf.int64, [4])
    w = tf.placeholder(tf.float32, [4])
    acc, acc_up = tf.metrics.accuracy(lab, p)
    wacc, wacc_up = tf.metrics.accuracy(lab, p, weights=w)
    mean, mean_up = tf.metrics.mean(tf.cast(p, tf.float32) * 1.5, weights=w)
    names = sorted(v.name for v in tf.local_variables())
    assert names == ["accuracy/count:0", "accuracy/total:0", "accuracy_1/count:0",
                     "accuracy_1/total:0", "mean/count:0", "mean/total:0"]
    assert tf.global_variables() == [] and tf.trainable_variables() == []
    assert len(tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)) == 6
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        assert s.run([acc, wacc, mean]) == [0.0, 0.0, 0.0]      # no count yet: 0, not NaN
        for i in range(3):
            feed = {p: X["metric_preds"][i], lab: X["metric_labels"][i],
                    w: X["metric_weights"][i]}
            ups = s.run([acc_up, wacc_up, mean_up], feed)
            vals = s.run([acc, wacc, mean])
            np.testing.assert_allclose(ups, REF[f"metric/update/{i}"], rtol=1e-6)
            np.testing.assert_allclose(vals, REF[f"metric/value/{i}"], rtol=1e-6)
        s.run(tf.local_variables_initializer())                  # a new evaluation starts
        assert s.run([acc, wacc, mean]) == [0.0, 0.0, 0.0]
    preds, labels = X["metric_preds"].ravel(), X["metric_labels"].ravel()
    np.testing.assert_allclose(REF["metric/value/2"][0], (preds == labels).mean(), rtol=1e-6)


def test_metrics_squeeze_a_trailing_dim_and_go_to_the_collections_asked():
    labels = tf.constant([[1], [2], [3]], tf.int32)
    preds = tf.constant([1, 0, 3], tf.int32)
    acc, up = tf.metrics.accuracy(labels, preds, metrics_collections=["my_metrics"],
                                  updates_collections=["my_updates"], name="acc")
    assert tf.get_collection("my_metrics") == [acc]
    assert tf.get_collection("my_updates") == [up]
    np.testing.assert_allclose(_run(up), 2 / 3, rtol=1e-6)
    mse, mse_up = tf.metrics.mean_squared_error([1.0, 2.0], [1.5, 2.0])
    rmse, rmse_up = tf.metrics.root_mean_squared_error([1.0, 2.0], [1.5, 2.0])
    mae, mae_up = tf.metrics.mean_absolute_error([1.0, 2.0], [1.5, 1.0])
    np.testing.assert_allclose(_run([mse_up, rmse_up, mae_up]),
                               [0.125, np.sqrt(0.125), 0.75], rtol=1e-6)


# --- schedules ---------------------------------------------------------------------------------
def test_exponential_decay_and_piecewise_constant_match_tensorflow():
    step = tf.placeholder(tf.int64, [])
    e = tf.train.exponential_decay(0.1, step, 100, 0.5)
    es = tf.train.exponential_decay(0.1, step, 100, 0.5, staircase=True)
    pc = tf.train.piecewise_constant(step, [10, 50], [1.0, 0.5, 0.1])
    with tf.Session() as s:
        got = np.array([s.run([e, es, pc], {step: i}) for i in REF["schedule/steps"]],
                       np.float32)
    np.testing.assert_allclose(got, REF["schedule/values"], rtol=1e-6)
    steps = REF["schedule/steps"].astype(np.float64)
    np.testing.assert_allclose(got[:, 0], 0.1 * 0.5 ** (steps / 100), rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], 0.1 * 0.5 ** np.floor(steps / 100), rtol=1e-6)
    with pytest.raises(ValueError, match="1 less than the length of values"):
        tf.train.piecewise_constant(step, [10, 50], [1.0, 0.5])
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.exponential_decay(0.1, None, 100, 0.5)


def test_a_decayed_learning_rate_drives_an_optimizer_with_the_global_step():
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(1.0, gs, 1, 0.5, staircase=True)
    v = tf.Variable(0.0)
    train = tf.train.GradientDescentOptimizer(lr).minimize(-v, global_step=gs)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for _ in range(4):
            s.run(train)
        assert s.run(gs) == 4
        np.testing.assert_allclose(s.run(v), 1 + 0.5 + 0.25 + 0.125)
    for fn, want in ((tf.train.polynomial_decay(1.0, 5, 10, 0.0), 0.5),
                     (tf.train.inverse_time_decay(1.0, 10, 10, 1.0), 0.5),
                     (tf.train.natural_exp_decay(1.0, 10, 10, 1.0), np.exp(-1.0)),
                     (tf.train.cosine_decay(1.0, 5, 10), 0.5)):
        np.testing.assert_allclose(_run(fn), want, rtol=1e-6)


def test_clip_by_global_norm_is_there():
    clipped, norm = tf.clip_by_global_norm([tf.constant([3.0, 4.0])], 1.0)
    c, n = _run([clipped[0], norm])
    np.testing.assert_allclose(c, [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(n, 5.0, rtol=1e-6)
