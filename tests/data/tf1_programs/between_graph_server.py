"""The canonical TF1 distributed program (between-graph replication): every task runs this
script with its job and task index; the ps task serves until it is killed, each worker builds
its own copy of the model with tf.train.replica_device_setter and trains it through
tf.train.MonitoredTrainingSession on its own tf.train.Server's target.

Only its import line is flowc's. ``--out FILE`` (workers) writes the worker's losses, and the
global step and the per-worker update counts (variables on the ps task) after its last step.
"""
import argparse
import json

import numpy as np

import dsl as tf


def make_data(task_index, n=64):
    rng = np.random.RandomState(task_index)
    x = rng.randn(n, 3).astype(np.float32)
    y = x @ np.array([[2.0], [-1.0], [0.5]], np.float32) + 0.3
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", required=True, help="the cluster spec as JSON")
    parser.add_argument("--job_name", required=True)
    parser.add_argument("--task_index", type=int, default=0)
    parser.add_argument("--steps", type=int, default=30, help="steps of each worker")
    parser.add_argument("--out", help="where a worker writes what it saw (.npz)")
    args = parser.parse_args()

    cluster = tf.train.ClusterSpec(json.loads(args.cluster))
    server = tf.train.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        print("ps serving", flush=True)
        server.join()
        return

    num_workers = cluster.num_tasks("worker")
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % args.task_index, cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = tf.placeholder(tf.float32, [None, 1], name="y")
        global_step = tf.train.get_or_create_global_step()
        w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
        updates = tf.get_variable("updates_by_worker", [num_workers], dtype=tf.int32,
                                  initializer=tf.zeros_initializer(), trainable=False)
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
        count = tf.assign_add(updates, tf.one_hot(args.task_index, num_workers, dtype=tf.int32))
        with tf.control_dependencies([count]):
            train_op = tf.train.GradientDescentOptimizer(0.05).minimize(
                loss, global_step=global_step)

    x_data, y_data = make_data(args.task_index)
    losses = []
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           is_chief=(args.task_index == 0)) as sess:
        for _ in range(args.steps):
            if sess.should_stop():
                break
            _, value = sess.run([train_op, loss], {x: x_data, y: y_data})
            losses.append(value)
        step, counts = sess.run([global_step, updates])
    if args.out:
        np.savez(args.out, losses=np.array(losses), global_step=step, counts=counts)
    print("worker %d done: global step %d" % (args.task_index, step), flush=True)


if __name__ == "__main__":
    main()
