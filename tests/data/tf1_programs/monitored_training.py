"""Linear regression trained the TF1 production way: a global step from
tf.train.get_or_create_global_step, a learning rate from tf.train.exponential_decay, scalar
summaries merged with tf.summary.merge_all and written by a tf.summary.FileWriter,
tf.train.MonitoredTrainingSession with a checkpoint_dir and a StopAtStepHook (so a second run
resumes from the checkpoint and stops at the new last step), a tf.train.Saver restoring the
result into a plain Session, counters updated with tf.assign_add, and tf.cond / tf.while_loop
in the graph.

Only its import line is flowc's. ``main(folder)`` writes its checkpoints and events there.
"""
import os

import numpy as np

import dsl as tf


def make_data(n=256):
    rng = np.random.RandomState(0)
    x = rng.randn(n, 3).astype(np.float32)
    y = (x @ np.array([[2.0], [-1.0], [0.5]], np.float32) + 0.3
         + 0.05 * rng.randn(n, 1).astype(np.float32))
    return x, y


def build():
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    global_step = tf.train.get_or_create_global_step()
    with tf.variable_scope("linear"):
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        b = tf.get_variable("b", [1], initializer=tf.constant_initializer(0.0))
    prediction = tf.matmul(x, w) + b
    loss = tf.reduce_mean(tf.square(prediction - y), name="loss")
    learning_rate = tf.train.exponential_decay(0.1, global_step, decay_steps=10,
                                               decay_rate=0.9, staircase=True)
    examples_seen = tf.Variable(0, trainable=False, name="examples_seen",
                                collections=[tf.GraphKeys.LOCAL_VARIABLES])
    count = tf.assign_add(examples_seen, tf.shape(x)[0])
    with tf.control_dependencies([count]):
        train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(
            loss, global_step=global_step)
    # a loss clipped with tf.cond and the sum 0 + 1 + ... + 9 from a tf.while_loop
    big = tf.cond(loss > 1.0, lambda: tf.constant(1.0), lambda: loss)
    _, total = tf.while_loop(lambda i, s: i < 10, lambda i, s: (i + 1, s + i),
                             [tf.constant(0), tf.constant(0)])
    tf.summary.scalar("loss", loss)
    tf.summary.scalar("learning_rate", learning_rate)
    return dict(x=x, y=y, loss=loss, train_op=train_op, global_step=global_step, w=w, b=b,
                big=big, total=total, examples_seen=examples_seen,
                summaries=tf.summary.merge_all())


def train(folder, last_step, data):
    x_data, y_data = data
    graph = tf.Graph()
    losses = []
    with graph.as_default():
        m = build()
        hooks = [tf.train.StopAtStepHook(last_step=last_step)]
        writer = tf.summary.FileWriter(os.path.join(folder, "events"), graph)
        with tf.train.MonitoredTrainingSession(checkpoint_dir=folder, hooks=hooks,
                                               save_checkpoint_secs=None,
                                               save_checkpoint_steps=10,
                                               save_summaries_steps=10) as sess:
            step = 0
            while not sess.should_stop():
                k = (step * 32) % len(x_data)
                feed = {m["x"]: x_data[k:k + 32], m["y"]: y_data[k:k + 32]}
                _, loss, summary, big, total = sess.run(
                    [m["train_op"], m["loss"], m["summaries"], m["big"], m["total"]], feed)
                writer.add_summary(summary, step)
                losses.append(loss)
                step += 1
        writer.close()
    return losses, float(big), int(total)


def main(folder):
    data = make_data()
    first, _, _ = train(folder, 20, data)
    second, big, total = train(folder, 30, data)     # resumes at step 20
    graph = tf.Graph()
    with graph.as_default():
        m = build()
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, tf.train.latest_checkpoint(folder))
            step, w, b = sess.run([m["global_step"], m["w"], m["b"]])
            final = sess.run(m["loss"], {m["x"]: data[0], m["y"]: data[1]})
    return {"first_run": np.array(first, np.float32), "second_run": np.array(second, np.float32),
            "restored_step": np.int64(step), "w": w, "b": b, "final_loss": np.float32(final),
            "big": np.float32(big), "total": np.int64(total)}


if __name__ == "__main__":
    import tempfile
    out = main(tempfile.mkdtemp())
    print({k: v for k, v in out.items() if k not in ("first_run", "second_run")})
