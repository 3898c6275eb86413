"""fl.layers, written as TF1 programs (``import dsl as tf``), against TensorFlow 1.x: the
values of the same programs under ``tensorflow.compat.v1`` with tf_keras' legacy layers
(tests/data/tf1_layers/tf1_api.npz, recorded by record_tf1_api.py there), their variable and op
names, numpy formulas for batch normalization and dropout, and the training switch."""
import os

import numpy as np
import pytest

import dsl as tf
from repo_paths import TESTS

REF = np.load(os.path.join(TESTS, "data", "tf1_layers", "tf1_api.npz"))
X = {k[len("input/"):]: REF[k] for k in REF.files if k.startswith("input/")}


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


def _ops(prefix=""):
    return [o for o in tf.get_default_graph().get_operations() if o.name.startswith(prefix)]


# --- values against TensorFlow ---------------------------------------------------------------
@pytest.mark.parametrize("backend", ["interpreter", "c"])
def test_layer_outputs_and_moving_averages_match_tensorflow(backend):
    img = tf.constant(X["image"])
    conv = tf.layers.conv2d(img, 4, 3, padding="same", activation=tf.nn.relu,
                            kernel_initializer=tf.constant_initializer(X["kernel"]),
                            bias_initializer=tf.constant_initializer(0.1))
    conv_valid = tf.layers.conv2d(img, 4, 3, strides=2, padding="valid",
                                  kernel_initializer=tf.constant_initializer(X["kernel"]))
    mp = tf.layers.max_pooling2d(conv, 2, 2)
    ap = tf.layers.average_pooling2d(conv, 3, 2, padding="same")
    flat = tf.layers.flatten(mp)
    dense = tf.layers.dense(tf.constant(X["labels"]), 5, activation=tf.nn.tanh,
                            kernel_initializer=tf.constant_initializer(X["dense_kernel"]))
    training = tf.placeholder_with_default(False, [])
    xb = tf.placeholder(tf.float32, [None, 3, 3, 2])
    xf = tf.placeholder(tf.float32, [None, 4])
    bn_fused = tf.layers.batch_normalization(xb, training=training, momentum=0.9,
                                             name="bn_fused")
    bn_plain = tf.layers.batch_normalization(xf, training=training, momentum=0.8,
                                             epsilon=0.01, name="bn_plain")
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 4
    moving = [v for v in tf.global_variables() if "moving" in v.name]
    with tf.Session(backend=backend) as s:
        s.run(tf.global_variables_initializer())
        got = s.run({"conv": conv, "conv_valid": conv_valid, "max_pool": mp, "avg_pool": ap,
                     "flatten": flat, "dense": dense})
        for k, v in got.items():
            np.testing.assert_allclose(v, REF[f"layer/{k}"], rtol=1e-5, atol=1e-5, err_msg=k)
        for i in range(3):
            feed = {xb: X["bn_batches"][i], xf: X["bn_flat"][i], training: True}
            yf, yp, _ = s.run([bn_fused, bn_plain, updates], feed)
            np.testing.assert_allclose(yf, REF[f"bn/train/{i}/fused"], rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(yp, REF[f"bn/train/{i}/plain"], rtol=1e-4, atol=1e-5)
            for v, val in zip(moving, s.run(moving)):
                np.testing.assert_allclose(val, REF[f"bn/moving/{i}/{v.name[:-2]}"],
                                           rtol=1e-5, atol=1e-6, err_msg=v.name)
        yf, yp = s.run([bn_fused, bn_plain], {xb: X["bn_batches"][0], xf: X["bn_flat"][0]})
        np.testing.assert_allclose(yf, REF["bn/infer/fused"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(yp, REF["bn/infer/plain"], rtol=1e-5, atol=1e-5)


def test_batch_norm_training_normalizes_with_batch_statistics_and_tracks_them():
    x = tf.placeholder(tf.float32, [None, 2, 2, 3])
    y = tf.layers.batch_normalization(x, training=True, momentum=0.5, epsilon=1e-3)
    gamma, beta, mean, var = tf.global_variables()
    assert [v.name for v in (gamma, beta, mean, var)] == [
        "batch_normalization/gamma:0", "batch_normalization/beta:0",
        "batch_normalization/moving_mean:0", "batch_normalization/moving_variance:0"]
    assert tf.trainable_variables() == [gamma, beta]
    data = np.random.default_rng(0).standard_normal((4, 2, 2, 3)).astype(np.float32) * 3 + 2
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        yv = s.run(y, {x: data})
        assert s.run(mean).tolist() == [0.0] * 3         # updates run only when asked
        s.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS), {x: data})
        mv, vv = s.run([mean, var])
    flat = data.reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(yv.reshape(-1, 3), (flat - flat.mean(0)) /
                               np.sqrt(flat.var(0) + 1e-3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mv, 0.5 * flat.mean(0), rtol=1e-5)
    # the fused form tracks the unbiased variance (FusedBatchNormV3's), as TensorFlow does
    np.testing.assert_allclose(vv, 0.5 + 0.5 * flat.var(0, ddof=1), rtol=1e-5)


def test_batch_norm_is_one_fused_node_where_tensorflow_fuses():
    x4 = tf.placeholder(tf.float32, [None, 4, 4, 3])
    tf.layers.batch_normalization(x4, training=True)
    tf.layers.batch_normalization(tf.transpose(x4, [0, 3, 1, 2]), axis=1, training=True)
    tf.layers.batch_normalization(x4, fused=False, training=True)
    tf.layers.batch_normalization(tf.placeholder(tf.float32, [None, 5]), training=True)
    tf.layers.batch_normalization(tf.placeholder(tf.float64, [None, 4, 4, 3]), training=True)
    fused = {o.name.split("/")[0]: o.get_attr("data_format") for o in _ops()
             if o.type == "FusedBatchNormV3"}
    assert fused == {"batch_normalization": "NHWC", "batch_normalization_1": "NCHW"}
    with pytest.raises(ValueError, match="Unsupported axis"):
        tf.layers.batch_normalization(x4, axis=2, fused=True)


def test_a_training_tensor_switches_batch_norm_and_dropout_per_step():
    x = tf.placeholder(tf.float32, [None, 6])
    training = tf.placeholder_with_default(False, [])
    y = tf.layers.batch_normalization(x, training=training, momentum=0.0)
    d = tf.layers.dropout(tf.ones([1000]), rate=0.4, training=training, seed=3)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    mean = [v for v in tf.global_variables() if "moving_mean" in v.name][0]
    data = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32) + 4
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        y_eval, _ = s.run([y, updates], {x: data})        # inference: moving stats, no change
        np.testing.assert_allclose(y_eval, data / np.sqrt(1 + 1e-3), rtol=1e-5)
        assert s.run(mean).tolist() == [0.0] * 6
        y_train, _ = s.run([y, updates], {x: data, training: True})
        np.testing.assert_allclose(y_train.mean(0), 0, atol=1e-5)
        np.testing.assert_allclose(s.run(mean), data.mean(0), rtol=1e-5)   # momentum 0
        assert (s.run(d) == 1).all()
        dropped = s.run(d, {training: True})
    kept = dropped != 0
    assert 0.5 < kept.mean() < 0.7
    np.testing.assert_allclose(dropped[kept], 1 / 0.6, rtol=1e-6)


def test_dropout_with_a_python_bool_builds_only_what_it_needs():
    x = tf.ones([4, 4])
    assert tf.layers.dropout(x, 0.5).op.type == "Identity"
    y = tf.layers.dropout(x, 0.5, training=True)
    assert y.op.type != "SelectV2" or "RandomUniform" in [o.type for o in _ops("dropout_1")]
    assert "RandomUniform" in [o.type for o in _ops("dropout_1")]
    assert "RandomUniform" not in [o.type for o in _ops("dropout/")]


def test_frozen_batch_norm_normalizes_as_in_inference_and_adds_no_updates():
    x = tf.placeholder(tf.float32, [None, 3])
    tf.layers.batch_normalization(x, training=True, trainable=False)
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
    assert tf.trainable_variables() == []


# --- names, sharing and the layer classes ------------------------------------------------------
def test_variable_and_op_names_are_tensorflows():
    x = tf.placeholder(tf.float32, [None, 4])
    img = tf.placeholder(tf.float32, [None, 8, 8, 3])
    y = tf.layers.dense(x, 3, activation=tf.nn.relu)
    fc = tf.layers.dense(x, 3, name="fc")
    with tf.variable_scope("m"):
        tf.layers.dense(x, 3)
        tf.layers.dense(x, 3)
    with tf.variable_scope("m", reuse=True):
        a = tf.layers.dense(x, 3)
        b = tf.layers.dense(x, 3)
    c = tf.layers.conv2d(img, 4, 3, padding="same", activation=tf.nn.relu)
    p = tf.layers.max_pooling2d(c, 2, 2)
    f = tf.layers.flatten(p)
    shared = tf.layers.dense(x, 3, name="fc", reuse=True)
    # as TensorFlow 2.21's tf.compat.v1.layers (tf_keras 2.21) names them
    assert [v.name for v in tf.global_variables()] == [
        "dense/kernel:0", "dense/bias:0", "fc/kernel:0", "fc/bias:0", "m/dense/kernel:0",
        "m/dense/bias:0", "m/dense_1/kernel:0", "m/dense_1/bias:0", "conv2d/kernel:0",
        "conv2d/bias:0"]
    assert [t.name for t in (y, fc, a, b, c, p, f, shared)] == [
        "dense/Relu:0", "fc/BiasAdd:0", "m_1/dense/BiasAdd:0", "m_1/dense_1/BiasAdd:0",
        "conv2d/Relu:0", "max_pooling2d/MaxPool:0", "flatten/Reshape:0", "fc_1/BiasAdd:0"]
    with pytest.raises(ValueError, match="Variable fc/kernel already exists, disallowed"):
        tf.layers.dense(x, 3, name="fc")


def test_a_layer_object_reuses_its_weights_and_reports_them():
    x = tf.placeholder(tf.float32, [None, 4])
    layer = tf.layers.Dense(2, kernel_initializer=tf.ones_initializer())
    with pytest.raises(ValueError, match="has not been used yet"):
        layer.scope_name
    y1, y2 = layer(x), layer(x * 2)
    assert layer.scope_name == "dense" and layer.built
    assert layer.trainable_weights == [layer.kernel, layer.bias] == tf.trainable_variables()
    assert y1.name == "dense/BiasAdd:0" and y2.name == "dense/BiasAdd_1:0"     # as in TF
    other = tf.layers.Dense(2, name="head")
    other(x)
    assert other.kernel.name == "head/kernel:0"
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        a, b = s.run([y1, y2], {x: np.ones((1, 4), np.float32)})
    assert a.tolist() == [[4.0, 4.0]] and b.tolist() == [[8.0, 8.0]]


def test_regularizers_of_shared_layers_count_once():
    x = tf.placeholder(tf.float32, [None, 4])
    reg = tf.contrib.layers.l2_regularizer(0.1)
    with tf.variable_scope("net"):
        tf.layers.dense(x, 3, kernel_regularizer=reg, name="fc")
    with tf.variable_scope("net", reuse=True):
        tf.layers.dense(x, 3, kernel_regularizer=reg, name="fc")
    assert [r.name for r in tf.losses.get_regularization_losses()] == [
        "net/fc/kernel/Regularizer/l2_regularizer:0"]


def test_dense_on_a_sequence_and_the_errors_tensorflow_gives():
    seq = tf.placeholder(tf.float32, [None, 5, 4])
    y = tf.layers.dense(seq, 3, kernel_initializer=tf.ones_initializer())
    assert y.shape == (None, 5, 3)
    v = np.arange(2 * 5 * 4, dtype=np.float32).reshape(2, 5, 4)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        out = s.run(y, {seq: v})
    np.testing.assert_allclose(out, np.repeat(v.sum(-1, keepdims=True), 3, -1))
    with pytest.raises(ValueError, match="last dimension of the inputs to a Dense layer"):
        tf.layers.dense(tf.placeholder(tf.float32, [None, None]), 3)
    with pytest.raises(ValueError, match="channel dimension of the inputs should be defined"):
        tf.layers.conv2d(tf.placeholder(tf.float32, [None, 4, 4, None]), 2, 3)
    with pytest.raises(ValueError, match="`padding` argument"):
        tf.layers.conv2d(tf.placeholder(tf.float32, [None, 4, 4, 1]), 2, 3, padding="full")


def test_channels_first_layers_agree_with_channels_last():
    rng = np.random.default_rng(5)
    data = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    kernel = tf.constant_initializer(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
    x = tf.placeholder(tf.float32, [None, 6, 6, 3])
    last = tf.layers.flatten(tf.layers.max_pooling2d(
        tf.layers.conv2d(x, 4, 3, kernel_initializer=kernel), 2, 2))
    first = tf.layers.flatten(tf.layers.max_pooling2d(
        tf.layers.conv2d(tf.transpose(x, [0, 3, 1, 2]), 4, 3, kernel_initializer=kernel,
                         data_format="channels_first"), 2, 2, data_format="channels_first"),
        data_format="channels_first")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        a, b = s.run([last, first], {x: data})
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_constraints_project_the_weights_after_each_optimizer_update():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.layers.dense(x, 2, kernel_constraint=lambda w: tf.clip_by_value(w, -0.05, 0.05),
                        bias_constraint=lambda b: tf.maximum(b, 0.0))
    layer_vars = tf.trainable_variables()
    assert layer_vars[0].constraint is not None
    train = tf.train.GradientDescentOptimizer(10.0).minimize(-tf.reduce_sum(y))
    feed = {x: np.ones((4, 3), np.float32)}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train, feed)
        kernel, bias = s.run(layer_vars)
    np.testing.assert_allclose(kernel, np.full((3, 2), 0.05))   # pushed far up, projected back
    np.testing.assert_allclose(bias, np.full(2, 40.0))           # d(-sum y)/db = -4 per unit


def test_batch_norm_options_center_scale_axis_and_fused_or_not_agree():
    rng = np.random.default_rng(9)
    data = (rng.standard_normal((3, 4, 5, 2)) * 2 + 1).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 4, 5, 2])
    fused = tf.layers.batch_normalization(x, training=True, epsilon=0.01, name="f")
    plain = tf.layers.batch_normalization(x, training=True, epsilon=0.01, fused=False,
                                          name="p")
    bare = tf.layers.batch_normalization(x, training=True, center=False, scale=False,
                                         name="bare")
    seq = tf.placeholder(tf.float32, [None, 3, 6])
    by_time = tf.layers.batch_normalization(seq, axis=1, training=True, epsilon=0.01)
    assert [v.name for v in tf.global_variables("bare")] == [
        "bare/moving_mean:0", "bare/moving_variance:0"]
    assert [v.name for v in tf.global_variables("batch_normalization")][0] == \
        "batch_normalization/gamma:0"
    assert tf.global_variables("batch_normalization")[0].shape == (3,)
    seq_data = rng.standard_normal((4, 3, 6)).astype(np.float32)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        f, p, b, t = s.run([fused, plain, bare, by_time], {x: data, seq: seq_data})
    flat = data.reshape(-1, 2).astype(np.float64)
    want = ((flat - flat.mean(0)) / np.sqrt(flat.var(0) + 0.01)).reshape(data.shape)
    np.testing.assert_allclose(f, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(p, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, ((flat - flat.mean(0)) / np.sqrt(flat.var(0) + 1e-3))
                               .reshape(data.shape), rtol=1e-4, atol=1e-5)
    m = seq_data.mean((0, 2), keepdims=True)
    v = seq_data.var((0, 2), keepdims=True)
    np.testing.assert_allclose(t, (seq_data - m) / np.sqrt(v + 0.01), rtol=1e-4, atol=1e-5)
