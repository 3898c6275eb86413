"""Writes the TensorFlow 2 GraphDefs of tests/compiler/test_graphdef_functions.py, with their
inputs and TensorFlow's outputs (run with TensorFlow installed; the tests do not need it):

    python3 tests/data/tf_graphs/make_tf_graphs.py

Each case is a ``tf.function`` frozen with ``convert_variables_to_constants_v2(...,
lower_control_flow=False)``, so its loops, conds, calls and TensorLists stay TensorFlow 2's
functional ops and its weights (seeded) become constants: ``<case>.pb`` (binary GraphDef) and
``<case>.npz`` (``in:<name>`` feeds by placeholder name, ``out:<tensor>`` TensorFlow's results,
several feeds per case as ``in<k>:``/``out<k>:``).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2)

HERE = os.path.dirname(os.path.abspath(__file__))


def freeze(fn, specs, lower=False):
    concrete = tf.function(fn).get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower)
    gd = frozen.graph.as_graph_def()
    feeds = [t.name.split(":")[0] for t in frozen.inputs]
    fetches = [t.name for t in frozen.outputs]
    return gd, frozen, feeds, fetches


def write(name, fn, specs, cases, lower=False):
    gd, frozen, feeds, fetches = freeze(fn, specs, lower)
    with open(os.path.join(HERE, name + ".pb"), "wb") as f:
        f.write(gd.SerializeToString())
    arrays = {}
    for k, values in enumerate(cases):
        outs = frozen(*[tf.constant(v) for v in values])
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        for feed, v in zip(feeds, values):
            arrays[f"in{k}:{feed}"] = np.asarray(v)
        for fetch, o in zip(fetches, outs):
            arrays[f"out{k}:{fetch}"] = o.numpy()
    np.savez(os.path.join(HERE, name + ".npz"), **arrays)
    ops = sorted({n.op for n in gd.node} | {n.op for f in gd.library.function for n in f.node_def})
    print(f"{name}: {len(gd.node)} nodes, {len(gd.library.function)} functions, "
          f"{os.path.getsize(os.path.join(HERE, name + '.pb'))} bytes; ops: {' '.join(ops)}")


def main():
    rng = np.random.default_rng(7)
    tf.keras.utils.set_random_seed(7)

    # Keras LSTM and GRU layers: a While over TensorLists (Reserve, FromTensor, GetItem,
    # SetItem, Stack) with the batch dim unknown.
    lstm = tf.keras.Sequential([tf.keras.Input((6, 3)),
                                tf.keras.layers.Bidirectional(
                                    tf.keras.layers.LSTM(5, return_sequences=True)),
                                tf.keras.layers.LSTM(4)])
    seqs = [rng.standard_normal((b, 6, 3)).astype(np.float32) for b in (2, 1, 4)]
    write("keras_lstm", lambda x: lstm(x), [tf.TensorSpec([None, 6, 3], tf.float32)],
          [[s] for s in seqs])
    gru = tf.keras.Sequential([tf.keras.Input((6, 3)),
                               tf.keras.layers.GRU(5, return_sequences=True),
                               tf.keras.layers.GRU(4, reset_after=False, go_backwards=True)])
    write("keras_gru", lambda x: gru(x), [tf.TensorSpec([None, 6, 3], tf.float32)],
          [[s] for s in seqs])
    # the same GRU frozen with its loops lowered to TensorFlow 1's frames (lists in Enter,
    # Merge, Switch: variant loop variables)
    write("keras_gru_tf1_frames", lambda x: gru(x), [tf.TensorSpec([None, 6, 3], tf.float32)],
          [[s] for s in seqs[:2]], lower=True)

    # A Python loop over tf.range turned While, with a tf.cond (StatelessIf) in its body.
    def range_loop(x, n):
        acc = tf.zeros_like(x)
        for i in tf.range(n):
            if tf.reduce_sum(acc) > 10.0:
                acc = acc * 0.5 + x
            else:
                acc = acc + x * tf.cast(i, tf.float32)
        return acc
    write("range_loop", range_loop,
          [tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.int32)],
          [[np.array([1.0, 2.0, -0.5], np.float32), np.int32(n)] for n in (0, 3, 8)])

    # A TensorArray of unknown element shape written in a loop (the element shape comes from
    # the item), a dynamic-size one, tf.switch_case, and a loop inside a cond.
    def arrays(x, n, k):
        ta = tf.TensorArray(tf.float32, size=n)
        grow = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in tf.range(n):
            v = x * tf.cast(i + 1, tf.float32)
            ta = ta.write(i, v)
            grow = grow.write(i, tf.reduce_sum(v, axis=0))
        stacked = ta.stack()
        picked = tf.switch_case(k, [lambda: stacked[0] * 0.0 + 1.0,
                                    lambda: tf.reduce_max(stacked, axis=0),
                                    lambda: tf.reduce_sum(stacked, axis=0)])

        def loop_in_cond():
            j, s = tf.constant(0), tf.zeros_like(x)
            while j < k:
                s = s + x
                j = j + 1
            return s
        cond = tf.cond(k > 1, loop_in_cond, lambda: -x)
        return stacked, grow.stack(), picked, cond
    cases = []
    for n, k in ((3, 0), (1, 2), (4, 1), (2, 7)):
        cases.append([rng.standard_normal((2, 3)).astype(np.float32), np.int32(n), np.int32(k)])
    write("tensor_arrays", arrays,
          [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([], tf.int32),
           tf.TensorSpec([], tf.int32)], cases)

    # Calls of functions that call functions (PartitionedCall kept: _noinline), one stateful.
    @tf.function(experimental_attributes={"_noinline": True})
    def inner(a, b):
        return a * b + 1.0, a - b

    @tf.function(experimental_attributes={"_noinline": True})
    def outer(a):
        p, q = inner(a, a + 1.0)
        r, _ = inner(p, q)
        return r

    # a While in an If in a function
    @tf.function(experimental_attributes={"_noinline": True})
    def loop_in_cond_in_function(a, n):
        def repeat():
            s = a
            for _ in tf.range(n):
                s = tf.tanh(s) + a
            return s
        return tf.cond(n > 0, repeat, lambda: a * -1.0)

    def calls(x, n):
        return outer(x) + outer(x * 2.0) + loop_in_cond_in_function(x, n)
    write("nested_calls", calls, [tf.TensorSpec([None], tf.float32),
                                  tf.TensorSpec([], tf.int32)],
          [[np.array([0.5, -1.0, 2.0], np.float32), np.int32(3)],
           [np.zeros(0, np.float32), np.int32(2)],
           [np.array([0.25], np.float32), np.int32(0)]])


if __name__ == "__main__":
    main()
