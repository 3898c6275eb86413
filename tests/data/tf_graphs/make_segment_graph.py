"""Writes segment_ops.pb, a TF1 GraphDef (tf.compat.v1) of the segment reductions,
InvertPermutation, ListDiff, Bincount, DenseBincount and RandomShuffle, plus TF's gradients of
four of them, and segment_ops.npz with its feeds (``in:<placeholder>``) and TensorFlow's
results (``out:<tensor>``; RandomShuffle's for two runs of one session as ``out:r:0`` and
``out2:r:0``). Run with TensorFlow installed; the test
(tests/compiler/test_graphdef_segment_ops.py) does not need it:

    python3 tests/data/tf_graphs/make_segment_graph.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    tf.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        d = tf.placeholder(tf.float32, [None, 3], name="d")
        ids = tf.placeholder(tf.int32, [None], name="ids")
        perm = tf.placeholder(tf.int64, [None], name="perm")
        outs = {
            "segment_sum": tf.segment_sum(d, ids), "segment_mean": tf.segment_mean(d, ids),
            "segment_max": tf.segment_max(d, ids), "segment_min": tf.segment_min(d, ids),
            "segment_prod": tf.segment_prod(d, ids),
            "unsorted_max": tf.unsorted_segment_max(d, ids, 6),
            "unsorted_min": tf.unsorted_segment_min(d, ids, 6),
            "unsorted_prod": tf.unsorted_segment_prod(d, ids, 6),
            "unsorted_mean": tf.unsorted_segment_mean(d, ids, 6),
            "unsorted_sqrt_n": tf.unsorted_segment_sqrt_n(d, ids, 6),
            "sparse_sum": tf.sparse_segment_sum(d, [4, 0, 4, 2], [0, 0, 1, 3]),
            "sparse_mean": tf.sparse_segment_mean(d, [4, 0, 4, 2], [0, 0, 1, 3]),
            "sparse_sqrt_n": tf.sparse_segment_sqrt_n(d, [4, 0, 4, 2], [0, 0, 1, 3],
                                                      num_segments=5),
            "invert": tf.invert_permutation(perm),
            "setdiff": tf.setdiff1d(perm, tf.constant([1, 3], tf.int64))[0],
            "setdiff_idx": tf.setdiff1d(perm, tf.constant([1, 3], tf.int64))[1],
            "bins": tf.raw_ops.Bincount(arr=ids, size=7, weights=d[:, 0]),
            "bincount_v1": tf.bincount(ids, minlength=7),      # DenseBincount in TF 2
        }
        # TF's own gradients of some of them (SparseSegmentMeanGrad, Gather/Equal of Max,
        # the zero-aware Prod): the graph of a training step
        for k in ("sparse_mean", "segment_max", "unsorted_prod", "sparse_sqrt_n"):
            loss = tf.reduce_sum(tf.square(outs[k]))   # no broadcasting: static reductions
            outs["grad_" + k] = tf.gradients(loss, d)[0]
        outs = {k: tf.identity(v, name=k) for k, v in outs.items()}
        shuffle = tf.identity(tf.random_shuffle(d, seed=11), name="r")
    data = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)
    data[1, 2] = data[3, 2] = 0.0           # zeros in the products
    feeds = {"d": data,
             "ids": np.array([0, 0, 1, 3, 3], np.int32),
             "perm": np.array([2, 0, 3, 1], np.int64)}
    arrays = {f"in:{k}": v for k, v in feeds.items()}
    with tf.Session(graph=g) as s:
        feed = {g.get_tensor_by_name(k + ":0"): v for k, v in feeds.items()}
        for k, v in s.run(outs, feed).items():
            arrays[f"out:{k}:0"] = v
        arrays["out:r:0"] = s.run(shuffle, feed)
        arrays["out2:r:0"] = s.run(shuffle, feed)
    with open(os.path.join(HERE, "segment_ops.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    np.savez(os.path.join(HERE, "segment_ops.npz"), **arrays)
    print(sorted({n.op for n in g.as_graph_def().node}))


if __name__ == "__main__":
    main()
