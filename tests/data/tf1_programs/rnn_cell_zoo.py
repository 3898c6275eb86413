"""Every TF1 recurrent cell flowc has, run by dynamic_rnn, static_rnn and
bidirectional_dynamic_rnn on variable-length sequences with the same starting weights, plus
the gradients of a loss: what TF1 gives is recorded (record_tf1_programs.py) and flowc must
give it too. A TF1 program: only the import line is flowc's."""
import numpy as np

import dsl as tf

BATCH, TIME, DEPTH = 3, 6, 4
LENGTHS = np.array([6, 2, 4], np.int32)


def cells():
    rnn_cell = tf.nn.rnn_cell
    return {
        "basic_rnn": lambda: rnn_cell.BasicRNNCell(5),
        "gru": lambda: rnn_cell.GRUCell(5),
        "basic_lstm": lambda: rnn_cell.BasicLSTMCell(5, forget_bias=0.5),
        "lstm": lambda: rnn_cell.LSTMCell(5, use_peepholes=True, cell_clip=0.9, num_proj=3,
                                          proj_clip=0.4),
        "lstm_concat_state": lambda: rnn_cell.BasicLSTMCell(4, state_is_tuple=False),
        "multi": lambda: rnn_cell.MultiRNNCell([rnn_cell.GRUCell(4), rnn_cell.LSTMCell(3)]),
    }


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    return [x]


def main():
    """name -> value for every case: outputs, final states, gradients, variable names (all
    cases in one graph, each under a scope of its own, run by one session)."""
    rng = np.random.RandomState(5)
    inputs = rng.randn(BATCH, TIME, DEPTH).astype(np.float32)
    graph = tf.Graph()
    cases = {}
    with graph.as_default():
        x = tf.placeholder(tf.float32, [BATCH, TIME, DEPTH], name="x")
        lengths = tf.placeholder(tf.int32, [BATCH], name="lengths")
        for kind, make in cells().items():
            for mode in ("dynamic", "static", "bidirectional", "time_major"):
                scope = f"{kind}_{mode}"
                if mode == "dynamic":
                    out, state = tf.nn.dynamic_rnn(make(), x, sequence_length=lengths,
                                                   dtype=tf.float32, scope=scope)
                elif mode == "time_major":
                    out, state = tf.nn.dynamic_rnn(make(), tf.transpose(x, [1, 0, 2]),
                                                   dtype=tf.float32, time_major=True,
                                                   scope=scope)
                elif mode == "static":
                    outs, state = tf.nn.static_rnn(make(), tf.unstack(x, axis=1),
                                                   sequence_length=lengths, dtype=tf.float32,
                                                   scope=scope)
                    out = tf.stack(outs, 1)
                else:
                    (fw, bw), state = tf.nn.bidirectional_dynamic_rnn(
                        make(), make(), x, sequence_length=lengths, dtype=tf.float32,
                        scope=scope)
                    out = tf.concat([fw, bw], 2)
                weights = tf.constant(rng.randn(*[int(d) for d in out.shape]).astype(np.float32))
                loss = tf.reduce_sum(out * weights) + tf.add_n(
                    [tf.reduce_sum(tf.square(s)) for s in _flat(state)])
                variables = sorted([v for v in tf.global_variables()
                                    if v.name.startswith(scope + "/")], key=lambda v: v.name)
                grads = tf.gradients(loss, variables + [x])
                cases[f"{kind}/{mode}"] = (out, _flat(state), loss, grads, variables)
        init = tf.global_variables_initializer()
        with tf.Session() as session:
            session.run(init)
            start = np.random.RandomState(11)
            for v in sorted(tf.global_variables(), key=lambda v: v.name):
                v.load(start.uniform(-0.5, 0.5, [int(d) for d in v.shape]).astype(np.float32),
                       session)
            got = session.run({k: c[:4] for k, c in cases.items()},
                              {x: inputs, lengths: LENGTHS})
    results = {}
    for key, (out, states, loss, grads) in got.items():
        variables = cases[key][4]
        results[key + "/outputs"] = out
        for k, s in enumerate(states):
            results[f"{key}/state{k}"] = s
        results[key + "/loss"] = np.array(loss)
        for v, g in zip([v.name for v in variables] + ["x"], grads):
            results[f"{key}/grad/{v}"] = np.asarray(g)
        results[key + "/variables"] = np.array([v.name for v in variables])
    return results
