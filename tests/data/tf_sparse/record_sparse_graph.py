"""Records ``sparse_graph.pb`` (a TensorFlow 1.x GraphDef using SparseToDense,
SparseTensorDenseMatMul, SparseReduceSum, SparseReorder, SparseTensorDenseAdd and SparseAdd,
fed by a ``tf.sparse_placeholder``) and ``sparse_graph.npz`` (its feeds and TensorFlow's
results), for ``tests/dsl/test_sparse_tensor.py``. Run with TensorFlow installed:
``python record_sparse_graph.py`` (writes beside this file)."""
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    rng = np.random.RandomState(0)
    g = tf.Graph()
    with g.as_default():
        sp = tf.sparse_placeholder(tf.float32, shape=[4, 5], name="sp")
        b = tf.placeholder(tf.float32, [5, 3], name="b")
        d = tf.placeholder(tf.float32, [4, 5], name="d")
        ordered = tf.sparse.reorder(sp)
        tf.identity(tf.sparse.to_dense(ordered, default_value=-1.0), name="dense")
        tf.identity(tf.sparse.sparse_dense_matmul(ordered, b), name="matmul")
        tf.identity(tf.sparse.sparse_dense_matmul(ordered, d, adjoint_a=True, adjoint_b=False),
                    name="matmul_adj")
        tf.identity(tf.sparse.reduce_sum(ordered, axis=1, keepdims=True), name="rowsum")
        tf.identity(tf.sparse.add(ordered, d), name="added")
        tf.identity(ordered.values, name="reordered_values")
        other = tf.SparseTensor([[0, 0], [1, 3], [3, 4]], [1.0, 2.0, 3.0], [4, 5])
        both = tf.sparse.add(ordered, other, threshold=0.1)
        tf.identity(both.indices, name="sum_indices")
        tf.identity(both.values, name="sum_values")
    indices = np.array([[3, 1], [0, 4], [2, 2], [0, 0], [1, 3]], np.int64)
    values = rng.randn(5).astype(np.float32)
    feeds = {"sp/indices:0": indices, "sp/values:0": values,
             "sp/shape:0": np.array([4, 5], np.int64),
             "b:0": rng.randn(5, 3).astype(np.float32), "d:0": rng.randn(4, 5).astype(np.float32)}
    names = ["dense", "matmul", "matmul_adj", "rowsum", "added", "reordered_values",
             "sum_indices", "sum_values"]
    with tf.Session(graph=g) as s:
        got = s.run([n + ":0" for n in names], feeds)
    with open(os.path.join(HERE, "sparse_graph.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    np.savez(os.path.join(HERE, "sparse_graph.npz"),
             **{"feed/" + k[:-2]: v for k, v in feeds.items()},
             **{"want/" + n: v for n, v in zip(names, got)})


if __name__ == "__main__":
    main()
