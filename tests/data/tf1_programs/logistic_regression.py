"""Softmax regression in the style of TensorFlow 1.x's "MNIST for beginners": placeholders fed
through feed_dict, weights and bias as tf.Variable in a name_scope, one-hot labels,
softmax_cross_entropy_with_logits_v2, GradientDescentOptimizer, accuracy from argmax/equal/cast,
values read back with Tensor.eval and Variable.eval under the default session.

Only its import line is flowc's (``import tensorflow.compat.v1 as tf`` runs it under
TensorFlow; record_tf1_tutorials.py does so). The data are Gaussian clusters made with numpy.
"""
import numpy as np

import dsl as tf

FEATURES, CLASSES = 10, 4


def make_data(n, seed):
    centers = np.random.RandomState(0).randn(CLASSES, FEATURES) * 0.5
    rng = np.random.RandomState(seed)
    y = rng.randint(0, CLASSES, n)
    x = centers[y] + rng.randn(n, FEATURES)
    return x.astype(np.float32), y.astype(np.int64)


def main(steps=40, batch_size=50):
    train_x, train_y = make_data(400, 1)
    test_x, test_y = make_data(200, 2)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        with tf.name_scope("softmax_regression"):
            W = tf.Variable(tf.zeros([FEATURES, CLASSES]), name="weights")
            b = tf.Variable(tf.zeros([CLASSES]), name="bias")
            logits = tf.matmul(x, W) + b
        assert logits.get_shape().as_list() == [None, CLASSES]
        with tf.name_scope("loss"):
            onehot = tf.one_hot(y, depth=CLASSES)
            cross_entropy = tf.reduce_mean(
                tf.nn.softmax_cross_entropy_with_logits_v2(labels=onehot, logits=logits))
        train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)
        correct_prediction = tf.equal(tf.argmax(logits, 1), y)
        accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
        names = [v.name for v in tf.trainable_variables()]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            losses = []
            for step in range(steps):
                start = (step * batch_size) % len(train_x)
                feed = {x: train_x[start:start + batch_size], y: train_y[start:start + batch_size]}
                _, loss = sess.run([train_step, cross_entropy], feed_dict=feed)
                losses.append(loss)
            test_accuracy = accuracy.eval(feed_dict={x: test_x, y: test_y})
            weights = W.eval()
    return {"losses": np.array(losses, np.float32), "accuracy": np.float32(test_accuracy),
            "weights": weights, "variables": np.array(names)}


if __name__ == "__main__":
    out = main()
    print("loss %.3f -> %.3f, test accuracy %.3f" % (out["losses"][0], out["losses"][-1],
                                                     out["accuracy"]))
