"""Records a TF1 GraphDef with TensorFlow's fused LSTM ops into block_lstm_graph.pb, and its
feeds and TensorFlow's results into block_lstm_graph.npz: LSTMBlockCell (default attrs, and
with peepholes, a cell clip and another forget bias), LSTMBlockCellGrad, BlockLSTM (default
attrs: forget_bias 1, cell_clip 3, which the initial cell state reaches) and BlockLSTMV2
(peepholes), both stopped by seq_len_max before the end, and tf.gradients through both
(BlockLSTMGrad for both: TensorFlow registers it as BlockLSTMV2's gradient too), and
BlockLSTMGradV2 called directly. Past seq_len_max TensorFlow leaves i, f, o, ci and co unset,
so only cs and h of the sequence ops are recorded. Run with TensorFlow installed, oneDNN off:
``TF_ENABLE_ONEDNN_OPTS=0 python record_block_lstm.py``. The tests only read what it writes."""
import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
TIME, BATCH, INPUT, CELL, STEPS = 5, 3, 4, 6, 4
NAMES = ["i", "cs", "f", "o", "ci", "co", "h"]


def main():
    rng = np.random.default_rng(20261202)
    v1 = tf.compat.v1
    raw = tf.raw_ops
    g = tf.Graph()
    fetches = {}
    with g.as_default():
        x = v1.placeholder(tf.float32, [TIME, None, INPUT], name="x")
        seq = v1.placeholder(tf.int64, [], name="seq_len_max")

        def const(name, shape, scale=1.0):
            return tf.constant((rng.standard_normal(shape) * scale).astype(np.float32), name=name)

        cs0 = tf.constant(rng.uniform(-3.5, 3.5, (BATCH, CELL)).astype(np.float32), name="cs0")
        h0 = const("h0", (BATCH, CELL), 0.5)
        w = const("w", (INPUT + CELL, 4 * CELL), 0.5)
        b = const("b", (4 * CELL,), 0.5)
        wci, wcf, wco = (const(n, (CELL,), 0.5) for n in ("wci", "wcf", "wco"))
        ins = dict(cs_prev=cs0, h_prev=h0, w=w, wci=wci, wcf=wcf, wco=wco, b=b)

        cell = raw.LSTMBlockCell(x=x[0], **ins, name="cell")
        peep = raw.LSTMBlockCell(x=x[1], **ins, forget_bias=0.7, cell_clip=0.5,
                                 use_peephole=True, name="cell_peep")
        for k, n in enumerate(NAMES):
            fetches[f"cell/{n}"] = cell[k]
            fetches[f"cell_peep/{n}"] = peep[k]
        cell_grad = raw.LSTMBlockCellGrad(
            x=x[1], **ins, **{n: peep[k] for k, n in enumerate(NAMES[:6])},
            cs_grad=const("cs_grad", (BATCH, CELL)), h_grad=const("h_grad", (BATCH, CELL)),
            use_peephole=True, name="cell_grad")
        for k, n in enumerate(["cs_prev_grad", "dicfo", "wci_grad", "wcf_grad", "wco_grad"]):
            fetches[f"cell_grad/{n}"] = cell_grad[k]

        block = raw.BlockLSTM(seq_len_max=seq, x=x, **ins, name="block")
        block2 = raw.BlockLSTMV2(seq_len_max=seq, x=x, **ins, use_peephole=True,
                                 name="block_v2")
        wrt = dict(x=x, cs0=cs0, h0=h0, w=w, wci=wci, wcf=wcf, wco=wco, b=b)
        for name, outs in (("block", block), ("block_v2", block2)):
            weights = [const(f"{name}_weight{k}", (TIME, BATCH, CELL)) for k in (1, 6)]
            loss = 0.0
            for k, weight in zip((1, 6), weights):
                fetches[f"{name}/{NAMES[k]}"] = outs[k]
                loss += tf.reduce_sum(outs[k] * weight)
            # (TensorFlow's registered gradient of BlockLSTMV2 is BlockLSTMGrad, whose gates
            # are in BlockLSTM's order: recorded as TensorFlow computes it)
            for n, d in zip(wrt, tf.gradients(loss, list(wrt.values()))):
                fetches[f"{name}_grad/{n}"] = d
        grad_v2 = raw.BlockLSTMGradV2(seq_len_max=seq, x=x, **ins,
                                      **{n: block2[k] for k, n in enumerate(NAMES)},
                                      cs_grad=weights[0], h_grad=weights[1], use_peephole=True,
                                      name="block_grad_v2")
        for n, d in zip(wrt, grad_v2):
            fetches[f"block_grad_v2/{n}"] = d
        for k, t in fetches.items():
            tf.identity(t, name=k.replace("/", "__"))
    feed = rng.standard_normal((TIME, BATCH, INPUT)).astype(np.float32)
    with v1.Session(graph=g) as s:
        got = s.run(fetches, {x: feed, seq: STEPS})
    graph_def = g.as_graph_def()
    with open(os.path.join(HERE, "block_lstm_graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    np.savez_compressed(os.path.join(HERE, "block_lstm_graph.npz"), x=feed,
                        seq_len_max=np.int64(STEPS), **got)
    print(f"wrote block_lstm_graph.pb and .npz (TensorFlow {tf.__version__}):",
          sorted({n.op for n in graph_def.node}))


if __name__ == "__main__":
    main()
