"""Records TensorFlow's FusedBatchNormV3 outputs and gradients into fused_batch_norm_tf.npz,
and a TF1 GraphDef with FusedBatchNorm (V1, inference, as frozen models have it) and
FusedBatchNormV3 (training, NCHW) nodes into fused_batch_norm_graph.pb with its feeds and
TensorFlow's results (fused_batch_norm_graph.npz). Run with TensorFlow installed, oneDNN off so
the reference CPU kernels run: ``TF_ENABLE_ONEDNN_OPTS=0 python record_fused_batch_norm.py``.
The tests only read what it writes."""
import os

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_nn_ops

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [("NHWC", (2, 3, 4, 5)), ("NCHW", (2, 5, 3, 4)), ("NDHWC", (2, 2, 3, 2, 3))]


def main():
    rng = np.random.default_rng(20261201)
    out = {}
    for fmt, shape in CASES:
        c = shape[-1] if fmt.endswith("C") else shape[1]
        x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
        scale = rng.standard_normal(c).astype(np.float32)
        offset = rng.standard_normal(c).astype(np.float32)
        mean = rng.standard_normal(c).astype(np.float32)
        var = (rng.random(c) + 0.5).astype(np.float32)
        dy = rng.standard_normal(shape).astype(np.float32)
        for k, v in dict(x=x, scale=scale, offset=offset, mean=mean, var=var, dy=dy).items():
            out[f"{fmt}/{k}"] = v
        for training in (True, False):
            for factor in (1.0, 0.25):
                key = f"{fmt}/{'train' if training else 'infer'}/{factor}"
                xt, st, ot = tf.constant(x), tf.constant(scale), tf.constant(offset)
                with tf.GradientTape() as tape:
                    tape.watch([xt, st, ot])
                    r = gen_nn_ops.fused_batch_norm_v3(
                        xt, st, ot, mean, var, epsilon=0.001, exponential_avg_factor=factor,
                        data_format=fmt, is_training=training)
                dx, ds, do = tape.gradient(r[0], [xt, st, ot], output_gradients=dy)
                out[key + "/y"] = r[0].numpy()
                out[key + "/batch_mean"] = r[1].numpy()
                out[key + "/batch_variance"] = r[2].numpy()
                if training:
                    out[key + "/reserve_space_1"] = r[3].numpy()
                    out[key + "/reserve_space_2"] = r[4].numpy()
                out[key + "/dx"] = dx.numpy()
                out[key + "/dscale"] = ds.numpy()
                out[key + "/doffset"] = do.numpy()
    path = os.path.join(HERE, "fused_batch_norm_tf.npz")
    np.savez_compressed(path, **out)
    print(f"wrote {len(out)} arrays to {path} (TensorFlow {tf.__version__})")
    record_graph(rng)


def record_graph(rng):
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 4, 4, 3], name="x")
        c = lambda k: tf.constant(rng.standard_normal(3).astype(np.float32), name=k)  # noqa: E731
        var = tf.constant((rng.random(3) + 0.5).astype(np.float32), name="var")
        y1 = tf.raw_ops.FusedBatchNorm(x=x, scale=c("gamma"), offset=c("beta"), mean=c("mean"),
                                       variance=var, epsilon=0.001, is_training=False,
                                       name="bn_infer")[0]
        h = tf.nn.relu(y1, name="relu")
        t = tf.transpose(h, [0, 3, 1, 2], name="to_nchw")
        y3, m3, v3 = v1.nn.fused_batch_norm(t, c("gamma2"), c("beta2"), data_format="NCHW",
                                             is_training=True, name="bn_train")
        tf.identity(y3, name="out")
        tf.identity(m3, name="batch_mean")
        tf.identity(v3, name="batch_variance")
    feed = rng.standard_normal((2, 4, 4, 3)).astype(np.float32)
    with v1.Session(graph=g) as s:
        out, bm, bv = s.run(["out:0", "batch_mean:0", "batch_variance:0"], {"x:0": feed})
    with open(os.path.join(HERE, "fused_batch_norm_graph.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    np.savez_compressed(os.path.join(HERE, "fused_batch_norm_graph.npz"), x=feed, out=out,
                        batch_mean=bm, batch_variance=bv)
    print("wrote fused_batch_norm_graph.pb and .npz:",
          sorted({n.op for n in g.as_graph_def().node}))


if __name__ == "__main__":
    main()
