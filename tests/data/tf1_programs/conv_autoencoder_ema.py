"""A convolutional autoencoder in the style of TF1 programs: settings from tf.app.flags, the
encoder shared through tf.make_template, tf.nn.conv2d down and tf.nn.conv2d_transpose up
(to a shape made with tf.stack), Adam, an ExponentialMovingAverage of the weights run after each step, tf.Print on the loss,
tf.gfile for the output folder, and evaluation with the averaged weights restored into a new
graph through ema.variables_to_restore().

Only its import line is flowc's (``import tensorflow.compat.v1 as tf`` runs it under
TensorFlow; record_tf1_tutorials.py does so). The images are smooth blobs made with numpy.
"""
import os

import numpy as np

import dsl as tf

FLAGS = tf.app.flags.FLAGS
if "ae_steps" not in FLAGS:
    tf.app.flags.DEFINE_integer("ae_steps", 30, "training steps")
    tf.app.flags.DEFINE_float("ae_learning_rate", 0.01, "Adam's learning rate")
    tf.app.flags.DEFINE_float("ae_decay", 0.9, "moving average decay")


def make_images(n, seed):
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:8, 0:8]
    cy, cx = rng.uniform(2, 6, (2, n, 1, 1))
    return np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 4.0)[..., None].astype(np.float32)


def encoder(images):
    kernel = tf.get_variable("kernel", [3, 3, 1, 4],
                             initializer=tf.glorot_uniform_initializer(seed=1))
    bias = tf.get_variable("bias", [4], initializer=tf.zeros_initializer())
    return tf.nn.relu(tf.nn.conv2d(images, kernel, [1, 2, 2, 1], "SAME") + bias)


def build(images):
    encode = tf.make_template("encoder", encoder)
    code = encode(images)
    with tf.variable_scope("deconv"):
        kernel = tf.get_variable("kernel", [3, 3, 1, 4],
                                 initializer=tf.glorot_uniform_initializer(seed=2))
        bias = tf.get_variable("bias", [1], initializer=tf.zeros_initializer())
        batch = tf.shape(images)[0]
        recon = tf.nn.conv2d_transpose(code, kernel, tf.stack([batch, 8, 8, 1]),
                                       strides=[1, 2, 2, 1], padding="SAME") + bias
    code_again = encode(images * 0.5)              # the same weights, a second input
    return recon, code_again


def main(folder):
    FLAGS(["conv_autoencoder_ema", "--ae_steps=30"])
    train = make_images(64, 1)
    test = make_images(16, 2)
    out_dir = os.path.join(folder, "ae")
    tf.gfile.MakeDirs(out_dir)
    graph = tf.Graph()
    with graph.as_default():
        images = tf.placeholder(tf.float32, [None, 8, 8, 1], name="images")
        recon, code_again = build(images)
        loss = tf.reduce_mean(tf.square(recon - images))
        loss = tf.Print(loss, [loss], "loss: ", first_n=1)
        train_op = tf.train.AdamOptimizer(FLAGS.ae_learning_rate).minimize(loss)
        ema = tf.train.ExponentialMovingAverage(FLAGS.ae_decay)
        with tf.control_dependencies([train_op]):
            step = ema.apply(tf.trainable_variables())
        names = [v.name for v in tf.trainable_variables()]
        average_names = [ema.average_name(v) for v in tf.trainable_variables()]
        saver = tf.train.Saver()
        losses = []
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for i in range(FLAGS.ae_steps):
                batch = train[(i * 16) % 64:(i * 16) % 64 + 16]
                losses.append(sess.run([loss, step], {images: batch})[0])
            raw_test_loss = sess.run(loss, {images: test})
            shared_code = sess.run(code_again, {images: test[:2]})
            path = saver.save(sess, os.path.join(out_dir, "model"))
    assert tf.train.checkpoint_exists(path) and tf.gfile.ListDirectory(out_dir)
    graph = tf.Graph()
    with graph.as_default():
        images = tf.placeholder(tf.float32, [None, 8, 8, 1], name="images")
        recon, _ = build(images)
        loss = tf.reduce_mean(tf.square(recon - images))
        ema = tf.train.ExponentialMovingAverage(FLAGS.ae_decay)
        restorer = tf.train.Saver(ema.variables_to_restore())
        with tf.Session() as sess:
            restorer.restore(sess, path)
            averaged_test_loss = sess.run(loss, {images: test})
    return {"variables": names, "average_names": average_names, "losses": np.array(losses),
            "raw_test_loss": raw_test_loss, "averaged_test_loss": averaged_test_loss,
            "shared_code": shared_code}
