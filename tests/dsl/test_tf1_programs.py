"""TF1 tutorial-style programs, written as ``import dsl as tf`` with only that line changed
from what a TensorFlow 1.x user writes: the MNIST-style CNN of the tf.layers tutorial
(conv/pool/dense layers, batch normalization and dropout switched by a ``training``
placeholder, UPDATE_OPS run with the training step, tf.metrics.accuracy, a Saver restoring the
model into a new graph), and a variable_scope program sharing one model between a training
graph and an evaluation graph. Both train on the 8x8 digits (examples/data/digits.npz)."""
import os

import numpy as np
import pytest

import dsl as tf
from repo_paths import EXAMPLES

DIGITS = np.load(os.path.join(EXAMPLES, "data", "digits.npz"))
TRAIN = (DIGITS["x"][~DIGITS["is_test"]], DIGITS["y"][~DIGITS["is_test"]])
TEST = (DIGITS["x"][DIGITS["is_test"]], DIGITS["y"][DIGITS["is_test"]])


# --- the CNN program ---------------------------------------------------------------------------
def cnn_model_fn(features, training):
    """The tf.layers tutorial's CNN, sized for 8x8 digits."""
    input_layer = tf.reshape(features, [-1, 8, 8, 1])
    conv1 = tf.layers.conv2d(inputs=input_layer, filters=16, kernel_size=[3, 3],
                             padding="same", use_bias=False)
    conv1 = tf.layers.batch_normalization(conv1, training=training)
    conv1 = tf.nn.relu(conv1)
    pool1 = tf.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)
    conv2 = tf.layers.conv2d(inputs=pool1, filters=32, kernel_size=[3, 3], padding="same",
                             activation=tf.nn.relu)
    pool2 = tf.layers.max_pooling2d(inputs=conv2, pool_size=[2, 2], strides=2)
    pool2_flat = tf.reshape(pool2, [-1, 2 * 2 * 32])
    dense = tf.layers.dense(inputs=pool2_flat, units=64, activation=tf.nn.relu)
    dropout = tf.layers.dropout(inputs=dense, rate=0.4, training=training)
    return tf.layers.dense(inputs=dropout, units=10)


def build_cnn_graph():
    tf.set_random_seed(1234)
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    labels = tf.placeholder(tf.int32, [None], name="labels")
    training = tf.placeholder_with_default(False, [], name="training")
    logits = cnn_model_fn(x, training)
    predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    global_step = tf.train.get_or_create_global_step()
    learning_rate = tf.train.exponential_decay(0.01, global_step, 100, 0.7, staircase=True)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss, global_step=global_step)
    accuracy, accuracy_op = tf.metrics.accuracy(labels=labels, predictions=predictions)
    return dict(x=x, labels=labels, training=training, logits=logits, loss=loss,
                train_op=train_op, accuracy=accuracy, accuracy_op=accuracy_op,
                global_step=global_step)


def evaluate(sess, m, data, batch=200):
    sess.run(tf.local_variables_initializer())
    for i in range(0, len(data[0]), batch):
        sess.run(m["accuracy_op"], {m["x"]: data[0][i:i + batch],
                                    m["labels"]: data[1][i:i + batch]})
    return sess.run(m["accuracy"])


def test_mnist_style_cnn_trains_evaluates_and_restores(tmp_path):
    g = tf.Graph()
    with g.as_default():
        m = build_cnn_graph()
        names = [v.name for v in tf.global_variables()]
        assert "batch_normalization/moving_mean:0" in names and "conv2d/kernel:0" in names
        assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2
        saver = tf.train.Saver()
        rng = np.random.default_rng(0)
        losses = []
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step in range(300):
                idx = rng.integers(0, len(TRAIN[0]), 64)
                _, loss = sess.run([m["train_op"], m["loss"]],
                                   {m["x"]: TRAIN[0][idx], m["labels"]: TRAIN[1][idx],
                                    m["training"]: True})
                losses.append(loss)
            assert sess.run(m["global_step"]) == 300
            acc = evaluate(sess, m, TEST)
            # inference is deterministic (no dropout, moving statistics)
            a, b = sess.run([m["logits"], m["logits"]], {m["x"]: TEST[0][:10]})
            np.testing.assert_array_equal(a, b)
            t1, t2 = (sess.run(m["logits"], {m["x"]: TEST[0][:10], m["training"]: True})
                      for _ in range(2))
            assert not np.array_equal(t1, t2)        # training: a new dropout mask per run
            moving_mean = [v for v in tf.global_variables()
                           if v.name == "batch_normalization/moving_mean:0"][0]
            mean = sess.run(moving_mean)
            path = saver.save(sess, str(tmp_path / "cnn"), global_step=m["global_step"])
    assert np.mean(losses[:20]) > 1.5 and np.mean(losses[-20:]) < 0.3
    assert acc > 0.9, acc
    assert np.abs(mean).max() > 0.01             # the update ops moved the statistics

    g2 = tf.Graph()                              # a new program restores and evaluates
    with g2.as_default():
        m2 = build_cnn_graph()
        saver2 = tf.train.Saver()
        with tf.Session() as sess:
            saver2.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
            assert path.endswith("cnn-300")
            assert sess.run(m2["global_step"]) == 300
            moving_mean = tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES,
                                            "batch_normalization/moving_mean")[0]
            np.testing.assert_array_equal(sess.run(moving_mean), mean)
            assert evaluate(sess, m2, TEST) == acc


def test_the_cnn_program_reads_its_batches_from_a_tf_data_pipeline(tmp_path):
    """The same CNN fed by tf.data, TF1's usual way: an initializable iterator over
    placeholders (shuffle, repeat, batch, prefetch) whose get_next() is the default of the
    model's inputs, so evaluation feeds held-out arrays instead; Saver restore."""
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(1234)
        x_all = tf.placeholder(tf.float32, [None, 64])
        y_all = tf.placeholder(tf.int32, [None])
        dataset = (tf.data.Dataset.from_tensor_slices((x_all, y_all))
                   .shuffle(buffer_size=1000, seed=5).repeat().batch(64).prefetch(1))
        iterator = dataset.make_initializable_iterator()
        next_x, next_y = iterator.get_next()
        assert next_x.get_shape().as_list() == [None, 64]
        x = tf.placeholder_with_default(next_x, [None, 64], name="x")
        labels = tf.placeholder_with_default(next_y, [None], name="labels")
        training = tf.placeholder_with_default(False, [], name="training")
        logits = cnn_model_fn(x, training)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss)
        predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
        accuracy, accuracy_op = tf.metrics.accuracy(labels=labels, predictions=predictions)
        saver = tf.train.Saver()
        losses = []
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(iterator.initializer, {x_all: TRAIN[0], y_all: TRAIN[1]})
            for _ in range(300):
                _, value = sess.run([train_op, loss], {training: True})
                losses.append(value)
            sess.run(tf.local_variables_initializer())
            sess.run(accuracy_op, {x: TEST[0], labels: TEST[1]})
            acc = sess.run(accuracy)
            path = saver.save(sess, str(tmp_path / "cnn_data"))
            logits_before = sess.run(logits, {x: TEST[0][:16]})
    assert np.mean(losses[:20]) > 1.5 and np.mean(losses[-20:]) < 0.3, losses[-20:]
    assert acc > 0.9, acc
    g2 = tf.Graph()
    with g2.as_default():
        x2 = tf.placeholder(tf.float32, [None, 64], name="x")
        logits2 = cnn_model_fn(x2, False)
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, path)
            np.testing.assert_allclose(sess.run(logits2, {x2: TEST[0][:16]}), logits_before,
                                       rtol=1e-5, atol=1e-5)


# --- the variable_scope program -----------------------------------------------------------------
def mlp(x, training, reuse=None):
    with tf.variable_scope("mlp", reuse=reuse):
        h = tf.layers.dense(x, 64, activation=tf.nn.relu, name="hidden",
                            kernel_regularizer=tf.contrib.layers.l2_regularizer(1e-4))
        h = tf.layers.dropout(h, rate=0.2, training=training)
        return tf.layers.dense(h, 10, name="logits")


def test_variable_scope_shares_one_model_between_train_and_eval_graphs():
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(7)
        x_train = tf.placeholder(tf.float32, [None, 64])
        y_train = tf.placeholder(tf.int32, [None])
        x_eval = tf.placeholder(tf.float32, [None, 64])
        train_logits = mlp(x_train, training=True)
        eval_logits = mlp(x_eval, training=False, reuse=True)
        assert [v.name for v in tf.trainable_variables()] == [
            "mlp/hidden/kernel:0", "mlp/hidden/bias:0", "mlp/logits/kernel:0",
            "mlp/logits/bias:0"]
        assert train_logits.name == "mlp/logits/BiasAdd:0"
        assert eval_logits.name == "mlp_1/logits/BiasAdd:0"
        loss = tf.losses.softmax_cross_entropy(tf.one_hot(y_train, 10), train_logits)
        total = tf.losses.get_total_loss()
        assert len(tf.losses.get_regularization_losses()) == 1       # shared: counted once
        train_op = tf.train.MomentumOptimizer(0.1, 0.9).minimize(total)
        with tf.variable_scope("mlp", reuse=True):
            kernel = tf.get_variable("hidden/kernel")
        rng = np.random.default_rng(1)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            before = sess.run(kernel)
            for _ in range(200):
                idx = rng.integers(0, len(TRAIN[0]), 64)
                sess.run([train_op, loss], {x_train: TRAIN[0][idx], y_train: TRAIN[1][idx]})
            assert not np.array_equal(before, sess.run(kernel))
            pred = sess.run(tf.argmax(eval_logits, 1), {x_eval: TEST[0]})
    assert (pred == TEST[1]).mean() > 0.9


@pytest.mark.parametrize("reuse", [tf.AUTO_REUSE])
def test_auto_reuse_builds_a_shared_embedding_on_first_use(reuse):
    def embed(ids):
        with tf.variable_scope("embedding", reuse=reuse):
            table = tf.get_variable("table", [10, 4],
                                    initializer=tf.random_normal_initializer(seed=3))
            return tf.nn.embedding_lookup(table, ids)

    g = tf.Graph()
    with g.as_default():
        a = embed(tf.constant([1, 2]))
        b = embed(tf.constant([2, 1]))
        assert len(tf.global_variables()) == 1
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            av, bv = sess.run([a, b])
    np.testing.assert_array_equal(av, bv[::-1])


# --- the same layers in a .flow model, trained by flowc train ----------------------------------
FLOW_CNN = """
input x: f32[?, 64]
input y: i32[?]
let image = reshape(x, [-1, 8, 8, 1])
let conv = layers.conv2d(image, filters=8, kernel_size=3, padding="same", use_bias=false)
let normed = nn.relu(layers.batch_normalization(conv, momentum=0.9, training=training))
let flat = layers.flatten(layers.max_pooling2d(normed, pool_size=2, strides=2))
let hidden = layers.dropout(layers.dense(flat, 32, activation=nn.relu), rate=0.2,
                            training=training)
let logits = layers.dense(hidden, 10)
output predictions = argmax(logits, axis=1, output_type=i32)
loss = reduce_mean(nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
metric accuracy = reduce_mean(cast(equal(predictions, y), f32))
optimizer = adam(learning_rate=0.01)
data = "DATA"
train(steps=150, batch_size=64, eval_every=150)
"""


def test_flowc_train_runs_the_update_ops_of_batch_norm_in_a_flow_model(tmp_path, capsys):
    from cli_runner import flowc
    model = tmp_path / "cnn.flow"
    model.write_text(FLOW_CNN.replace("DATA", os.path.join(EXAMPLES, "data", "digits.npz")))
    rc, out, err = flowc(capsys, "train", model, "--checkpoint-dir", tmp_path / "run")
    assert rc == 0, err
    accuracy = float(out.strip().splitlines()[-1].split("accuracy ")[1].split()[0])
    assert accuracy > 0.85, out                      # evaluated with the moving statistics
    ckpt = tf.train.latest_checkpoint(str(tmp_path / "run"))
    moving = tf.train.load_variable(ckpt, "batch_normalization/moving_variance")
    assert not np.allclose(moving, 1.0)              # the update ops ran with the steps
    # deployed: the inference step (FusedBatchNormV3 with the moving statistics) as ONNX
    onnx = pytest.importorskip("onnx")
    from onnx.reference import ReferenceEvaluator
    path = tmp_path / "cnn.onnx"
    rc, _, err = flowc(capsys, "export", model, "--checkpoint", tmp_path / "run", "--format",
                       "onnx", "-o", path)
    assert rc == 0, err
    proto = onnx.load(str(path))
    assert "BatchNormalization" in {n.op_type for n in proto.graph.node}
    (pred,) = ReferenceEvaluator(proto).run(None, {"x": TEST[0]})
    assert abs((pred == TEST[1]).mean() - accuracy) < 1e-3
