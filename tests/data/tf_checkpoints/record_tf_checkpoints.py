"""Record checkpoints that TensorFlow and flowc write, and what each reads of the other's.

Two runs, from the repository root:

1. ``python3 tests/data/tf_checkpoints/record_tf_checkpoints.py flowc`` (flowc): trains
   linear_adam.py 5 steps and saves ``flowc_written/`` with ``tf.train.Saver`` (flowc's);
   saves two variables on two devices with ``Saver(sharded=True)`` in ``flowc_sharded/``.
2. ``python tests/data/tf_checkpoints/record_tf_checkpoints.py tf`` (with TensorFlow,
   ``tensorflow.compat.v1``): trains linear_adam.py 5 steps under TensorFlow and saves
   ``tf_written/`` (``model.ckpt-5.index``, ``.data-00000-of-00001``, ``checkpoint``), with
   what TensorFlow computes from it in ``tf_written.npz``; then restores ``flowc_written/``
   into the same TF graph (``tf.train.latest_checkpoint``, ``list_variables``,
   ``Saver.restore``) and records what it read in ``tf_reads_flowc.npz``, and what it reads
   of ``flowc_sharded/`` in ``tf_reads_flowc_sharded.npz``.

tests/dsl/test_tf_checkpoints.py checks flowc against these files; it needs no TensorFlow.
"""
import os
import shutil
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def program(import_line):
    path = os.path.join(HERE, "linear_adam.py")
    source = open(path).read()
    assert source.count("import dsl as tf\n") == 1
    module = types.ModuleType("linear_adam")
    exec(compile(source.replace("import dsl as tf\n", import_line + "\n"), path, "exec"),
         module.__dict__)
    return module


def fresh(folder):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def run_flowc():
    import dsl as tf
    p = program("import dsl as tf")
    out = fresh(os.path.join(HERE, "flowc_written"))
    with tf.Graph().as_default():
        x, y, pred, train, saver = p.build()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            p.train(sess, x, y, train, 5)
            saver.save(sess, os.path.join(out, "model.ckpt"), global_step=5,
                       write_meta_graph=False)
    sharded(fresh(os.path.join(HERE, "flowc_sharded")))


def sharded(out):
    """Two variables on two CPUs saved by a sharded flowc Saver into ``out``."""
    import dsl as tf
    with tf.Graph().as_default():
        with tf.device("/cpu:1"):
            a = tf.Variable(np.arange(4, dtype=np.float32), name="a")
            b = tf.Variable(np.int64(7), name="b")
        with tf.device("/cpu:2"):
            c = tf.Variable(np.full([2, 3], 0.5), name="c")
        saver = tf.train.Saver(sharded=True)
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": 3})) as sess:
            sess.run([v.initializer for v in (a, b, c)])
            return saver.save(sess, os.path.join(out, "model.ckpt"), global_step=1,
                              write_meta_graph=False)


def run_tf():
    import tensorflow.compat.v1 as tf
    tf.disable_v2_behavior()
    p = program("import tensorflow.compat.v1 as tf")
    out = fresh(os.path.join(HERE, "tf_written"))
    xs, ys = p.data()
    with tf.Graph().as_default():
        x, y, pred, train, saver = p.build()
        variables = tf.global_variables()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            p.train(sess, x, y, train, 5)
            path = saver.save(sess, os.path.join(out, "model.ckpt"), global_step=5,
                              write_meta_graph=False)
            record = {"pred": sess.run(pred, {x: xs})}
            p.train(sess, x, y, train, 1)
            record["pred_after_one_more_step"] = sess.run(pred, {x: xs})
            record["list_variables"] = np.array(
                [f"{n}:{list(s)}" for n, s in tf.train.list_variables(path)])
            np.savez(os.path.join(HERE, "tf_written.npz"), **record)
        # TensorFlow reads flowc's checkpoint: the state file, the index, the data.
        folder = os.path.join(HERE, "flowc_written")
        latest = tf.train.latest_checkpoint(folder)
        reader = tf.train.load_checkpoint(latest)
        read = {"latest_checkpoint": np.array(os.path.relpath(latest, folder)),
                "list_variables": np.array([f"{n}:{list(s)}" for n, s in
                                            tf.train.list_variables(latest)])}
        with tf.Session() as sess:
            saver.restore(sess, latest)
            for v in variables:
                read["restored/" + v.op.name] = sess.run(v)
                read["reader/" + v.op.name] = reader.get_tensor(v.op.name)
            read["pred"] = sess.run(pred, {x: xs})
        np.savez(os.path.join(HERE, "tf_reads_flowc.npz"), **read)
    latest = tf.train.latest_checkpoint(os.path.join(HERE, "flowc_sharded"))
    reader = tf.train.load_checkpoint(latest)
    np.savez(os.path.join(HERE, "tf_reads_flowc_sharded.npz"),
             latest_checkpoint=np.array(os.path.basename(latest)),
             **{n: reader.get_tensor(n) for n, _ in tf.train.list_variables(latest)})


if __name__ == "__main__":
    {"flowc": run_flowc, "tf": run_tf}[sys.argv[1]]()
