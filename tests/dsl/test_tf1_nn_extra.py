"""The nn functions (lrn, conv1d, atrous_conv2d, separable_conv2d,
weighted_cross_entropy_with_logits, zero_fraction), the conv1d layers, AdadeltaOptimizer and FtrlOptimizer
(dense and sparse updates, TF1's slot names) and the metrics (true/false positives/negatives,
precision, recall, auc in every curve and summation, mean_iou, precision_at_k and recall_at_k
with repeated and out-of-range labels and class_id), each run as the TF1 program of
tests/data/tf1_nn_extra/nn_extra_programs.py with ``import dsl as tf``, in compiled C and in
the interpreter, against what TensorFlow computed for it (tf1_nn_extra.npz); and their errors."""
import os
import sys

import numpy as np
import pytest

import dsl as tf
from compiler.errors import ShapeError
from repo_paths import TESTS
from runtime.errors import FlowcError

HERE = os.path.join(TESTS, "data", "tf1_nn_extra")
sys.path.insert(0, HERE)
import nn_extra_programs as programs  # noqa: E402

REF = np.load(os.path.join(HERE, "tf1_nn_extra.npz"))
X = programs.inputs()
BACKENDS = ("c", "interpreter")


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


def test_recorded_inputs_are_the_programs_inputs():
    for k, v in X.items():
        np.testing.assert_array_equal(REF[f"input/{k}"], v, err_msg=k)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nn_functions_match_tensorflow(backend):
    fetches = programs.nn_functions(tf, X)
    with tf.Session(backend=backend) as s:
        got = s.run(fetches)
    for k, v in got.items():
        want = REF[f"nn/{k}"]
        assert np.asarray(v).shape == want.shape, k
        np.testing.assert_allclose(v, want, rtol=2e-5, atol=2e-6, err_msg=f"{backend} {k}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv1d_layers_match_tensorflow(backend):
    fetches = programs.layers(tf, X)
    assert sorted(v.op.name for v in tf.global_variables()) == list(REF["names/layers"])
    with tf.Session(backend=backend) as s:
        s.run(tf.global_variables_initializer())
        got = s.run(fetches)
    for k, v in got.items():
        np.testing.assert_allclose(v, REF[f"layers/{k}"], rtol=2e-5, atol=2e-6,
                                   err_msg=f"{backend} {k}")


def test_conv1d_layer_channels_first_is_channels_last_transposed():
    seq = tf.constant(X["seq"])
    init = dict(kernel_initializer=tf.constant_initializer(X["layer_kernel"]),
                bias_initializer=tf.constant_initializer(X["layer_bias"]))
    last = tf.layers.Conv1D(4, 3, strides=2, padding="same", **init)
    first = tf.layers.Conv1D(4, 3, strides=2, padding="same", data_format="channels_first",
                             **init)
    a, b = last(seq), first(tf.transpose(seq, [0, 2, 1]))
    assert b.shape.as_list() == [2, 4, 5]
    assert first.compute_output_shape([None, 3, 9]).as_list() == [None, 4, 5]
    with pytest.raises(ValueError, match="expected ndim=3"):
        tf.layers.conv1d(tf.zeros([2, 3, 4, 5]), 2, 3)
    with tf.Session(backend="c") as s:
        s.run(tf.global_variables_initializer())
        va, vb = s.run([a, b])
    np.testing.assert_allclose(vb, va.transpose(0, 2, 1), rtol=1e-5, atol=1e-6)


def test_lrn_default_attrs_are_tensorflows():
    y = tf.nn.lrn(tf.constant(X["image"]))
    assert y.op.type == "LRN"
    assert [y.op.get_attr(a) for a in ("depth_radius", "bias", "alpha", "beta")] == \
        [5, 1.0, 1.0, 0.5]


def test_conv1d_ncw_is_nwc_transposed():
    seq, f = tf.constant(X["seq"]), tf.constant(X["seq_filter"])
    nwc = tf.nn.conv1d(seq, f, 2, "SAME")
    ncw = tf.nn.conv1d(tf.transpose(seq, [0, 2, 1]), f, 2, "SAME", data_format="NCW")
    assert ncw.shape.as_list() == [2, 4, 5]
    with tf.Session(backend="c") as s:
        a, b = s.run([nwc, ncw])
    np.testing.assert_allclose(b, a.transpose(0, 2, 1), rtol=1e-5, atol=1e-6)


def test_nn_function_argument_errors():
    seq, f = tf.constant(X["seq"]), tf.constant(X["seq_filter"])
    with pytest.raises(ValueError, match="data_format"):
        tf.nn.conv1d(seq, f, 1, "SAME", data_format="NHCW")
    with pytest.raises(ValueError, match="value or input"):
        tf.nn.conv1d(seq, f, 1, "SAME", input=seq)
    pic, k = tf.constant(X["picture"]), tf.constant(X["kernel"])
    with pytest.raises(ValueError, match="less than one"):
        tf.nn.atrous_conv2d(pic, k, 0, "SAME")
    with pytest.raises(ValueError, match="input channels"):
        tf.nn.separable_conv2d(pic, tf.constant(X["depthwise"]),
                               tf.zeros([1, 1, 5, 2]), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="strides must be 1"):
        tf.nn.separable_conv2d(pic, tf.constant(X["depthwise"]), tf.constant(X["pointwise"]),
                               [1, 2, 2, 1], "SAME", rate=2)
    with pytest.raises(ValueError, match="labels or targets"):
        tf.nn.weighted_cross_entropy_with_logits(labels=1.0, targets=1.0, logits=1.0,
                                                 pos_weight=1.0)
    with pytest.raises(ValueError, match="same shape"):
        tf.nn.weighted_cross_entropy_with_logits(labels=tf.zeros([2, 3]), logits=tf.zeros([3]),
                                                 pos_weight=1.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lrn_of_a_wrong_rank_is_an_error_naming_the_node(backend):
    x = tf.placeholder(tf.float32, None, name="x")
    y = tf.nn.lrn(x, name="my_lrn")
    with tf.Session(backend=backend) as s:
        with pytest.raises(FlowcError, match="'my_lrn'.*4-dimensional"):
            s.run(y, {x: np.zeros((2, 3), np.float32)})
    with pytest.raises(ShapeError, match="'my_lrn_static'.*4-dimensional"):
        tf.nn.lrn(tf.zeros([2, 3]), name="my_lrn_static")


@pytest.mark.parametrize("name", sorted(programs.OPTIMIZERS))
def test_optimizer_steps_match_tensorflow(name):
    train, tracked = programs.optimizer_model(tf, X, name)
    names = sorted(v.op.name for v in tf.global_variables())
    assert names == list(REF[f"names/{name}"])
    for backend in BACKENDS:
        with tf.Session(backend=backend) as s:
            s.run(tf.global_variables_initializer())
            for _ in range(programs.STEPS):
                s.run(train)
            got = s.run(tracked)
        for k, v in got.items():
            np.testing.assert_allclose(v, REF[f"opt/{name}/{k}"], rtol=2e-5, atol=2e-6,
                                       err_msg=f"{backend} {name} {k}")


def test_optimizers_by_name_and_argument_errors():
    assert isinstance(tf.train.optimizer_by_name("adadelta"), tf.train.AdadeltaOptimizer)
    assert isinstance(tf.train.optimizer_by_name("Ftrl", learning_rate=0.1),
                      tf.train.FtrlOptimizer)
    with pytest.raises(ValueError, match="learning_rate_power"):
        tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)
    with pytest.raises(ValueError, match="initial_accumulator_value"):
        tf.train.FtrlOptimizer(0.1, initial_accumulator_value=-1.0)
    with pytest.raises(ValueError, match="l1_regularization_strength"):
        tf.train.FtrlOptimizer(0.1, l1_regularization_strength=-1.0)


def _metric_graph():
    ph = dict(labels=tf.placeholder(tf.int32, [None]), probs=tf.placeholder(tf.float32, [None]),
              weights=tf.placeholder(tf.float32, [None]),
              classes_true=tf.placeholder(tf.int32, [None]),
              classes_pred=tf.placeholder(tf.int32, [None]),
              scores=tf.placeholder(tf.float32, [None, 6]),
              label_sets=tf.placeholder(tf.int64, [None, 3]),
              single_labels=tf.placeholder(tf.int64, [None]),
              row_weights=tf.placeholder(tf.float32, [None]))
    pairs = programs.metrics(tf, **{k: ph[k] for k in ("labels", "probs", "weights",
                                                       "classes_true", "classes_pred")})
    pairs.update(programs.metrics_at_k(tf, **{k: ph[k] for k in (
        "scores", "label_sets", "single_labels", "row_weights")}))
    return ph, pairs


def _feed(ph, batch, **override):
    values = dict(labels=X["labels"][batch], probs=X["probs"][batch],
                  weights=X["metric_weights"][batch], classes_true=X["classes_true"][batch],
                  classes_pred=X["classes_pred"][batch])
    values.update({k: X[k][batch] for k in ("scores", "label_sets", "single_labels",
                                            "row_weights")})
    values.update(override)
    return {ph[k]: v for k, v in values.items()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_metrics_match_tensorflow_over_two_batches(backend):
    ph, pairs = _metric_graph()
    assert sorted(v.op.name for v in tf.local_variables()) == \
        list(REF["names/local_variables"])
    with tf.Session(backend=backend) as s:
        s.run(tf.local_variables_initializer())
        for batch in range(2):
            updates = s.run({k: u for k, (_, u) in pairs.items()}, _feed(ph, batch))
            values = s.run({k: v for k, (v, _) in pairs.items()})
            for k in pairs:
                for what, got in (("update", updates[k]), ("value", values[k])):
                    want = REF[f"metric/{k}/{what}{batch}"]
                    assert np.asarray(got).shape == want.shape, (k, what)
                    assert np.asarray(got).dtype == want.dtype, (k, what)
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                               err_msg=f"{backend} {k} {what}{batch}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_mean_iou_refuses_a_class_out_of_range(backend):
    ph, pairs = _metric_graph()
    _, update = pairs["mean_iou"]
    with tf.Session(backend=backend) as s:
        s.run(tf.local_variables_initializer())
        bad = X["classes_pred"][0].copy()
        bad[3] = 3
        with pytest.raises(FlowcError, match="out of range|not in"):
            s.run(update, _feed(ph, 0, classes_pred=bad))
        np.testing.assert_array_equal(s.run(pairs["mean_iou"][0]), 0.0)


def test_metric_argument_errors():
    labels, probs = tf.constant([1, 0]), tf.constant([0.2, 0.7])
    with pytest.raises(ValueError, match="curve"):
        tf.metrics.auc(labels, probs, curve="XY")
    with pytest.raises(ValueError, match="summation_method"):
        tf.metrics.auc(labels, probs, summation_method="simpson")
    with pytest.raises(ValueError, match="num_thresholds"):
        tf.metrics.auc(labels, probs, num_thresholds=1)
    with pytest.raises(ValueError, match="k must be"):
        tf.metrics.recall_at_k(tf.constant([[1]], tf.int64), tf.zeros([1, 4]), 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_precision_at_k_is_nan_until_something_counts(backend):
    scores = tf.placeholder(tf.float32, [None, 4])
    labels = tf.placeholder(tf.int64, [None, 2])
    value, update = tf.metrics.precision_at_k(labels, scores, 2, class_id=3)
    with tf.Session(backend=backend) as s:
        s.run(tf.local_variables_initializer())
        assert np.isnan(s.run(value))
        got = s.run(update, {scores: np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]],
                                              np.float32),
                             labels: np.array([[3, 3], [0, 1]], np.int64)})
        assert got == 1.0 and got.dtype == np.float64
