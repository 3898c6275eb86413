"""A fully connected autoencoder in the style of the TensorFlow 1.x examples: weights and biases
kept in dicts of tf.Variable (started from numpy values so every framework starts alike),
encoder and decoder under tf.variable_scope, a sigmoid bottleneck, mean squared reconstruction
error from tf.pow, RMSPropOptimizer (with momentum) over the variables of tf.get_collection(TRAINABLE_VARIABLES),
and the code layer's static shape read back as TF1 code does (``get_shape()[1].value``).

Only its import line is flowc's. The data are 16-dimensional points near a 3-dimensional
subspace, squashed into (0, 1).
"""
import numpy as np

import dsl as tf

N_INPUT, N_HIDDEN_1, N_HIDDEN_2 = 16, 8, 3


def make_data(n, seed):
    basis = np.random.RandomState(0).randn(N_HIDDEN_2, N_INPUT)
    rng = np.random.RandomState(seed)
    codes = rng.randn(n, N_HIDDEN_2)
    return (1 / (1 + np.exp(-codes @ basis)) + 0.01 * rng.randn(n, N_INPUT)).astype(np.float32)


def initial(shape, seed):
    return (np.random.RandomState(seed).randn(*shape) * 0.3).astype(np.float32)


def main(steps=150, batch_size=32):
    data = make_data(512, 1)
    graph = tf.Graph()
    with graph.as_default():
        X = tf.placeholder("float", [None, N_INPUT])
        with tf.variable_scope("encoder"):
            weights = {"h1": tf.Variable(initial([N_INPUT, N_HIDDEN_1], 1), name="h1"),
                       "h2": tf.Variable(initial([N_HIDDEN_1, N_HIDDEN_2], 2), name="h2")}
            biases = {"b1": tf.Variable(tf.zeros([N_HIDDEN_1]), name="b1"),
                      "b2": tf.Variable(tf.zeros([N_HIDDEN_2]), name="b2")}
            layer_1 = tf.nn.sigmoid(tf.add(tf.matmul(X, weights["h1"]), biases["b1"]))
            code = tf.nn.sigmoid(tf.add(tf.matmul(layer_1, weights["h2"]), biases["b2"]))
        with tf.variable_scope("decoder"):
            code_size = code.get_shape()[1].value
            w1 = tf.Variable(initial([code_size, N_HIDDEN_1], 3), name="h1")
            w2 = tf.Variable(initial([int(layer_1.shape[-1]), N_INPUT], 4), name="h2")
            b1 = tf.Variable(tf.zeros([N_HIDDEN_1]), name="b1")
            b2 = tf.Variable(tf.zeros([X.shape[1]]), name="b2")
            layer_3 = tf.nn.sigmoid(tf.matmul(code, w1) + b1)
            decoded = tf.nn.sigmoid(tf.matmul(layer_3, w2) + b2)
        loss = tf.reduce_mean(tf.pow(X - decoded, 2))
        per_example = tf.reduce_mean(tf.squared_difference(X, decoded), axis=1, keepdims=True)
        assert per_example.shape.as_list() == [None, 1]
        encoder_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="encoder")
        all_vars = tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)
        optimizer = tf.train.RMSPropOptimizer(0.02, momentum=0.9)
        train_op = optimizer.minimize(loss, var_list=all_vars)
        init = tf.global_variables_initializer()
        with tf.Session() as sess:
            sess.run(init)
            losses = []
            for step in range(steps):
                start = (step * batch_size) % len(data)
                _, l = sess.run([train_op, loss], feed_dict={X: data[start:start + batch_size]})
                losses.append(l)
            worst = sess.run(tf.reduce_max(per_example), {X: data[:100]})
            codes = sess.run(code, {X: data[:4]})
    return {"losses": np.array(losses, np.float32), "worst": np.float32(worst), "codes": codes,
            "encoder_variables": np.array([v.name for v in encoder_vars]),
            "variables": np.array(sorted(v.name for v in all_vars))}


if __name__ == "__main__":
    out = main()
    print("loss %.4f -> %.4f" % (out["losses"][0], out["losses"][-1]), out["encoder_variables"])
