"""Writes tf1_array_linalg.pb (a TensorFlow 1 GraphDef using BroadcastTo, MatrixBandPart, the
V3 diagonal ops, Diag, DiagPart, LinSpace, and tf.tensordot / tf.norm / tf.eye / tf.trace /
tf.meshgrid as TensorFlow composes them) and tf1_array_linalg.npz (``in:<placeholder>``
feeds, ``out:<tensor>`` TensorFlow's results) for tests/compiler/test_graphdef_array_linalg.py
(run with TensorFlow installed; the test does not need it):

    python3 tests/data/tf_graphs/make_tf1_array_linalg.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    tf.disable_eager_execution()
    rng = np.random.default_rng(5)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3, 4], name="x")
        v = tf.placeholder(tf.float32, [None], name="v")
        outs = [
            tf.broadcast_to(v, [2, 3, 4], name="broadcast"),
            tf.matrix_band_part(x, 1, 0, name="band"),
            tf.linalg.diag_part(x, k=(-1, 2), padding_value=7.0, name="diag_part"),
            tf.linalg.diag(x[:, 0, :], k=1, name="diag"),
            tf.linalg.set_diag(x, x[:, 1, :3], name="set_diag"),
            tf.diag(v, name="tensor_diag"),
            tf.diag_part(tf.diag(v), name="tensor_diag_part"),
            tf.raw_ops.LinSpace(start=-1.0, stop=3.0, num=9, name="lin_space"),
            tf.identity(tf.tensordot(x, tf.ones([4, 3, 2]), [[1, 2], [1, 0]]), name="tensordot"),
            tf.norm(x, axis=[1, 2], name="norm"),
            tf.identity(tf.eye(3, 4, batch_shape=[2]), name="eye"),
            tf.trace(x[:, :, :3], name="trace"),
            tf.identity(tf.meshgrid(v, v[:2])[0], name="meshgrid"),
        ]
        feeds = {"x": rng.normal(size=(2, 3, 4)).astype(np.float32),
                 "v": rng.normal(size=4).astype(np.float32)}
        with tf.Session(graph=g) as s:
            values = s.run(outs, {g.get_tensor_by_name(k + ":0"): val
                                  for k, val in feeds.items()})
    with open(os.path.join(HERE, "tf1_array_linalg.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    arrays = {f"in:{k}": val for k, val in feeds.items()}
    arrays.update({f"out:{t.name}": val for t, val in zip(outs, values)})
    np.savez(os.path.join(HERE, "tf1_array_linalg.npz"), **arrays)


if __name__ == "__main__":
    main()
