"""A small CNN written with slim (tf.contrib's) in TensorFlow 1.x's style: conv2d, max_pool2d,
repeat, avg_pool2d, flatten, fully_connected and dropout under nested arg_scopes, with
batch_norm as the normalizer_fn (its updates run through UPDATE_OPS), l2 weight
regularizers, slim.losses' softmax_cross_entropy (logits first) and get_total_loss; then a
zoo of the other slim layers (conv2d_transpose, separable_conv2d, layer_norm, stack,
bias_add, one_hot_encoding, batch_norm unfused, with in-place updates and zero-debiased).

Only its import lines are flowc's (record_slim_programs.py runs it under
``import tensorflow.compat.v1 as tf`` and ``import tf_slim as slim``). The weights are set
from numpy after initialization, so both systems start from the same values.
"""
import numpy as np

import dsl as tf
slim = tf.contrib.slim

CLASSES = 3


def make_data(n, seed):
    rng = np.random.RandomState(seed)
    y = rng.randint(0, CLASSES, n)
    x = rng.randn(n, 8, 8, 2).astype(np.float32) * 0.5
    x[np.arange(n), 2 * y + 1, 2 * y + 1, :] += 2.0      # the class shows as a bright spot
    return x.astype(np.float32), y.astype(np.int64)


def set_weights(session):
    """Every variable whose name ends in ``weights`` gets values from a fixed numpy stream,
    in name order (the rest keep their deterministic initializers: zeros and ones)."""
    rng = np.random.RandomState(7)
    for v in sorted(tf.global_variables(), key=lambda v: v.name):
        if v.name.endswith("weights:0"):
            shape = v.get_shape().as_list()
            v.load(rng.uniform(-0.4, 0.4, shape).astype(np.float32), session)


def cnn(x, is_training, dropout_on):
    normalizer = {"is_training": is_training, "decay": 0.9, "scale": True}
    with slim.arg_scope([slim.conv2d, slim.fully_connected],
                        weights_regularizer=slim.l2_regularizer(1e-3),
                        normalizer_fn=slim.batch_norm, normalizer_params=normalizer):
        with slim.arg_scope([slim.conv2d], padding="SAME", stride=1):
            net = slim.conv2d(x, 4, [3, 3], scope="conv1")
            net = slim.max_pool2d(net, [2, 2], scope="pool1")
            net = slim.repeat(net, 2, slim.conv2d, 6, [3, 3], scope="conv2")
            net = slim.avg_pool2d(net, 2, scope="pool2")
        net = slim.flatten(net, scope="flatten")
        net = slim.fully_connected(net, 16, scope="fc1")
        net = slim.dropout(net, 0.5, is_training=dropout_on, scope="dropout1")
    return slim.fully_connected(net, CLASSES, activation_fn=None, scope="logits")


def train(steps=30, batch_size=32, save_path=None):
    train_x, train_y = make_data(256, 1)
    test_x, test_y = make_data(64, 2)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 8, 8, 2], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        is_training = tf.placeholder_with_default(False, [], name="is_training")
        dropout_on = tf.placeholder_with_default(False, [], name="dropout_on")
        logits = cnn(x, is_training, dropout_on)
        onehot = slim.one_hot_encoding(y, CLASSES)
        slim.losses.softmax_cross_entropy(logits, onehot)
        total = slim.losses.get_total_loss()
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(total)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
        names = [v.name for v in tf.global_variables()]
        model = sorted(v.name for v in slim.get_model_variables())
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            set_weights(sess)
            losses = []
            for step in range(steps):
                start = (step * batch_size) % len(train_x)
                feed = {x: train_x[start:start + batch_size],
                        y: train_y[start:start + batch_size], is_training: True}
                _, loss = sess.run([train_op, total], feed)
                losses.append(loss)
            test_logits, test_accuracy = sess.run([logits, accuracy],
                                                  {x: test_x, y: test_y})
            if save_path:
                tf.train.Saver().save(sess, save_path, write_meta_graph=False,
                                      write_state=False)
            values = {v.name: sess.run(v) for v in tf.global_variables()}
    out = {"losses": np.array(losses, np.float32), "test_logits": test_logits,
           "accuracy": np.float32(test_accuracy), "variables": np.array(names),
           "model_variables": np.array(model),
           "regularization_losses": np.int64(len(
               graph.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES))),
           "update_ops": np.int64(len(update_ops))}
    for name, value in values.items():
        out["value/" + name] = value
    return out


def restore_and_predict(path, ignore_missing_vars=False):
    """The CNN's logits on the test data, its variables restored by name from the checkpoint
    ``path`` with slim.assign_from_checkpoint_fn (the dropout and batch norm off)."""
    test_x, _ = make_data(64, 2)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 8, 8, 2], name="x")
        logits = cnn(x, False, False)
        restore = slim.assign_from_checkpoint_fn(path, slim.get_variables_to_restore(),
                                                 ignore_missing_vars=ignore_missing_vars)
        with tf.Session() as sess:
            restore(sess)
            return sess.run(logits, {x: test_x})


def zoo():
    """The other layers on fixed inputs: outputs, gradients, and the variables' names and
    shapes."""
    rng = np.random.RandomState(3)
    images = rng.randn(2, 5, 5, 3).astype(np.float32)
    vectors = rng.randn(4, 6).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        fetches = {}
        fetches["conv2d_transpose_same"] = slim.conv2d_transpose(images, 4, [3, 3], stride=2)
        fetches["conv2d_transpose_valid"] = slim.conv2d_transpose(
            images, 2, 3, stride=2, padding="VALID", activation_fn=None)
        fetches["separable"] = slim.separable_conv2d(images, 5, [3, 3], depth_multiplier=2,
                                                     activation_fn=tf.nn.relu6)
        fetches["depthwise_only"] = slim.separable_conv2d(images, None, [2, 2],
                                                          depth_multiplier=1, stride=2)
        fetches["conv_valid_dilated"] = slim.conv2d(images, 3, [2, 2], rate=2,
                                                    padding="VALID", scope="dilated")
        fetches["layer_norm"] = slim.layer_norm(images, activation_fn=tf.nn.tanh)
        fetches["stack"] = slim.stack(vectors, slim.fully_connected, [7, 5], scope="fc")
        fetches["no_bias"] = slim.fully_connected(vectors, 3, biases_initializer=None,
                                                  activation_fn=tf.nn.sigmoid)
        fetches["bias_add"] = slim.bias_add(vectors, activation_fn=tf.nn.relu)
        fetches["one_hot"] = slim.one_hot_encoding(tf.constant([0, 2, 1], tf.int32), 4)
        fetches["bn_unfused"] = slim.batch_norm(images, fused=False, center=True, scale=True,
                                                scope="bn_unfused")
        fetches["bn_inplace"] = slim.batch_norm(vectors, updates_collections=None,
                                                decay=0.5, scope="bn_inplace")
        fetches["bn_inference"] = slim.batch_norm(images, is_training=False,
                                                  scope="bn_inference")
        fetches["bn_debiased"] = slim.batch_norm(images, zero_debias_moving_mean=True,
                                                 scope="bn_debiased")
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            fetches["updated"] = tf.identity(fetches["bn_debiased"])
        # the gradients of one scalar of every output with respect to every trainable weight
        scalar = tf.add_n([tf.reduce_sum(tf.square(t)) for k, t in sorted(fetches.items())
                           if k not in ("one_hot", "updated")])
        trainable = tf.trainable_variables()
        gradients = tf.gradients(scalar, trainable)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            set_weights(sess)
            keys = sorted(fetches)
            got = sess.run([fetches[k] for k in keys])
            out = dict(zip(keys, got))
            for v, g in zip(trainable, sess.run(gradients)):
                out["gradient/" + v.name] = g
            moving = [v for v in tf.global_variables() if "moving" in v.name]
            for v in moving:
                out["after/" + v.name] = sess.run(v)
        out["variables"] = np.array(["%s %s" % (v.name, v.get_shape().as_list())
                                     for v in tf.global_variables()])
    return out


def main():
    out = {"train/" + k: v for k, v in train().items()}
    out.update({"zoo/" + k: v for k, v in zoo().items()})
    return out


if __name__ == "__main__":
    result = main()
    print("losses", result["train/losses"][:3], "...", result["train/losses"][-3:],
          "accuracy", result["train/accuracy"])
