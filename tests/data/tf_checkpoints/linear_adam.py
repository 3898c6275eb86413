"""A TF1 program: linear regression trained with Adam, saved and restored with
``tf.train.Saver``. Run as written by flowc, and by TensorFlow with its ``import dsl as tf``
line changed (record_tf_checkpoints.py), so the checkpoints of each are restored by the other.
"""
import numpy as np

import dsl as tf


def data():
    rng = np.random.RandomState(0)
    x = rng.randn(16, 3).astype(np.float32)
    y = (x @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.25).astype(np.float32)
    return x, y


def build():
    """The model: placeholders, prediction, train op and a Saver (variables named as TF1
    names them: ``linear/w``, ``linear/w/Adam``, ``beta1_power``, ``global_step``)."""
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    with tf.variable_scope("linear"):
        w = tf.get_variable("w", initializer=np.full((3, 1), 0.1, np.float32))
        b = tf.get_variable("b", initializer=np.zeros((1,), np.float32))
    step = tf.train.get_or_create_global_step()
    pred = tf.matmul(x, w) + b
    loss = tf.reduce_mean(tf.square(pred - y))
    train = tf.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
    saver = tf.train.Saver(max_to_keep=2, save_relative_paths=True)
    return x, y, pred, train, saver


def train(sess, x, y, train_op, steps):
    xs, ys = data()
    for _ in range(steps):
        sess.run(train_op, {x: xs, y: ys})
