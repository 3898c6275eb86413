"""A TF1 tutorial-style program with a ``tf.data`` input pipeline, written as ``import dsl as
tf``: the digits MLP (examples/data/digits.npz) trained from an initializable iterator over
placeholders (shuffled with a seed, normalized by a map function, batched), epoch by epoch with
the ``OutOfRangeError`` loop, then evaluated on the held-out digits through a second, one-shot
pipeline. The training data never passes through ``feed_dict`` after the initializer."""
import os

import numpy as np
import pytest

import dsl as tf
from repo_paths import EXAMPLES

DIGITS = np.load(os.path.join(EXAMPLES, "data", "digits.npz"))
TRAIN = (DIGITS["x"][~DIGITS["is_test"]], DIGITS["y"][~DIGITS["is_test"]])
TEST = (DIGITS["x"][DIGITS["is_test"]], DIGITS["y"][DIGITS["is_test"]])


def preprocess(image, label):
    image = tf.cast(image, tf.float32) / 16.0           # the digits' pixels are 0..16
    return image, tf.one_hot(label, 10)


def mlp(images):
    hidden = tf.layers.dense(images, 64, activation=tf.nn.relu, name="hidden")
    return tf.layers.dense(hidden, 10, name="logits")


def run_program(backend, epochs=12):
    tf.reset_default_graph()
    tf.set_random_seed(42)
    features = tf.placeholder(tf.float32, [None, 64], name="features")
    labels = tf.placeholder(tf.int32, [None], name="labels")

    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    dataset = dataset.shuffle(buffer_size=2000, seed=1).map(preprocess).batch(32)
    dataset = dataset.prefetch(1)
    iterator = dataset.make_initializable_iterator()
    images, onehot = iterator.get_next()

    with tf.variable_scope("model"):
        logits = mlp(images)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=onehot,
                                                                      logits=logits))
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss)

    test_ds = tf.data.Dataset.from_tensor_slices(TEST).map(preprocess).batch(100)
    test_images, test_onehot = tf.data.make_one_shot_iterator(test_ds).get_next()
    with tf.variable_scope("model", reuse=True):
        test_logits = mlp(test_images)
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(test_logits, 1),
                                             tf.argmax(test_onehot, 1)), tf.int32))

    epoch_losses = []
    with tf.Session(backend=backend) as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(epochs):
            sess.run(iterator.initializer, feed_dict={features: TRAIN[0], labels: TRAIN[1]})
            losses = []
            while True:
                try:
                    _, l = sess.run([train_op, loss])
                except tf.errors.OutOfRangeError:
                    break
                losses.append(l)
            epoch_losses.append((len(losses), float(np.mean(losses))))
        right = 0
        while True:
            try:
                right += int(sess.run(correct))
            except tf.errors.OutOfRangeError:
                break
    return epoch_losses, right / len(TEST[0])


def test_digits_mlp_trains_from_a_tf_data_pipeline():
    epoch_losses, accuracy = run_program("c")
    batches = -(-len(TRAIN[0]) // 32)
    assert all(n == batches for n, _ in epoch_losses)
    assert epoch_losses[-1][1] < 0.25 * epoch_losses[0][1]
    assert accuracy > 0.9


@pytest.mark.slow
def test_the_program_gives_the_same_losses_on_the_interpreter():
    c_losses, c_acc = run_program("c", epochs=2)
    i_losses, i_acc = run_program("interpreter", epochs=2)
    np.testing.assert_allclose([l for _, l in c_losses], [l for _, l in i_losses], rtol=1e-3)
    assert abs(c_acc - i_acc) < 0.02
