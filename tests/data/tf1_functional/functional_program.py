"""A TF1 program over tf.map_fn, tf.scan, tf.foldl and tf.foldr, written as a TensorFlow 1.x
user writes it but for its first line: a per-image convolution and a per-example dense layer
by map_fn (its weights made inside fn with tf.get_variable), an RNN by hand with scan, folds
over a nested structure, trained a few steps with SGD. record_functional_program.py runs it
under TensorFlow; tests/dsl/test_functional_ops.py runs it on flowc and compares."""
import numpy as np
import dsl as tf

STEPS = 4


def inputs():
    rng = np.random.RandomState(7)
    return {"images": rng.normal(size=(3, 5, 5, 2)), "targets": rng.normal(size=(3,)),
            "kernel": rng.normal(size=(3, 3, 2, 2)) * 0.5,
            "dense": rng.normal(size=(18, 4)) * 0.3, "wh": rng.normal(size=(4, 4)) * 0.5}


def build(data):
    images = tf.placeholder(tf.float64, [None, 5, 5, 2], name="images")
    targets = tf.placeholder(tf.float64, [None], name="targets")
    kernel = tf.Variable(data["kernel"], name="kernel")

    def per_image(img):
        conv = tf.nn.conv2d(tf.expand_dims(img, 0), kernel, [1, 1, 1, 1], "VALID")[0]
        with tf.variable_scope("dense", reuse=tf.AUTO_REUSE):
            w = tf.get_variable("w", initializer=data["dense"])
        return tf.nn.relu(tf.matmul(tf.reshape(conv, [1, 18]), w))[0]

    features = tf.map_fn(per_image, images)                        # [n, 4]
    wh = tf.Variable(data["wh"], name="wh")
    states = tf.scan(lambda h, x: tf.tanh(x + tf.matmul(h[None], wh)[0]), features,
                     initializer=tf.zeros([4], tf.float64))        # [n, 4]
    pred = tf.reduce_sum(states, axis=1)
    loss = tf.reduce_mean(tf.square(pred - targets))
    left = tf.foldl(lambda a, e: {"sum": a["sum"] + e[0], "prod": a["prod"] * e[1]},
                    (pred, targets + 2.0),
                    initializer={"sum": tf.constant(0.0, tf.float64),
                                 "prod": tf.constant(1.0, tf.float64)})
    right = tf.foldr(lambda a, e: a * 0.5 + e, pred)
    reverse = tf.scan(lambda a, e: a + e, pred, reverse=True)
    # (a learning rate a float32 holds exactly: TensorFlow makes it a float32 before it
    # casts it to the variables' float64)
    train = tf.train.GradientDescentOptimizer(0.0625).minimize(loss)
    fetches = [features, states, loss, left["sum"], left["prod"], right, reverse]
    return images, targets, fetches, train


def run(session, images, targets, fetches, train, data):
    """The fetches before training, the losses of STEPS steps, the fetches after."""
    feed = {images: data["images"], targets: data["targets"]}
    session.run(tf.global_variables_initializer())
    before = session.run(fetches, feed)
    losses = [session.run([fetches[2], train], feed)[0] for _ in range(STEPS)]
    after = session.run(fetches, feed)
    return before, np.array(losses), after
