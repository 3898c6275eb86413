"""One LSTM over a sequence, compiled C, two ways: one fused ``BlockLSTMV2`` op (the time loop
inside one C kernel, the input products of all steps as one BLAS call) and
``fl.nn.dynamic_rnn(LSTMCell)`` (a ``while_loop`` of small ops); forward only, and forward
plus the gradient of every weight (``BlockLSTMGradV2`` / the while loop's gradient loop).

    python3 examples/benchmarks/bench_block_lstm.py [--repeats N] [--threads T]
                                                     [--time 32 --batch 32 --input 64 --hidden 128]

Both start from the same weights (``LSTMCell``'s kernel with its gate blocks reordered for
V2's ``i, f, c, o``; forget bias 0, which V2 has not) and the same inputs; their outputs and
gradients must agree before anything is timed. Times are medians, the rows interleaved.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bench_common import Row, add_threads_argument, apply_threads, environment_line, print_table

import dsl as fl  # noqa: E402


def build(kind: str, t: int, b: int, n_in: int, n: int, kernel: np.ndarray, bias: np.ndarray):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [t, b, n_in], name="x")
        if kind == "BlockLSTMV2":
            # LSTMCell's gates are i, j (c), f, o; V2's i, f, c, o
            order = np.concatenate([np.arange(n), np.arange(2 * n, 3 * n), np.arange(n, 2 * n),
                                    np.arange(3 * n, 4 * n)])
            w = fl.Variable(kernel[:, order], name="w")
            bb = fl.Variable(bias[order], name="b")
            zeros = fl.zeros([b, n])
            peep = fl.zeros([n])
            h = fl.raw_ops.BlockLSTMV2(seq_len_max=np.int64(t), x=x, cs_prev=zeros, h_prev=zeros,
                                       w=w, wci=peep, wcf=peep, wco=peep, b=bb)[6]
            params = [w, bb]
        else:
            cell = fl.nn.rnn_cell.LSTMCell(n, forget_bias=0.0)
            h, _ = fl.nn.dynamic_rnn(cell, x, dtype=fl.float32, time_major=True)
            params = cell.variables
            assign = [fl.assign(params[0], kernel), fl.assign(params[1], bias)]
        loss = fl.reduce_sum(h * h)
        grads = fl.gradients(loss, params)
        init = fl.global_variables_initializer()
    sess = fl.Session(graph=g, backend="c")
    sess.run(init)
    if kind != "BlockLSTMV2":
        sess.run(assign)
    return sess, x, h, grads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--time", type=int, default=32)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--input", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    t, b, n_in, n = args.time, args.batch, args.input, args.hidden
    rng = np.random.default_rng(0)
    kernel = rng.uniform(-0.1, 0.1, (n_in + n, 4 * n)).astype(np.float32)
    bias = rng.uniform(-0.1, 0.1, 4 * n).astype(np.float32)
    xs = rng.standard_normal((t, b, n_in)).astype(np.float32)
    models = {kind: build(kind, t, b, n_in, n, kernel, bias)
              for kind in ("BlockLSTMV2", "dynamic_rnn(LSTMCell)")}
    got = {k: s.run([h, grads[1]], {x: xs}) for k, (s, x, h, grads) in models.items()}
    (h1, gb1), (h2, gb2) = got.values()
    order = np.concatenate([np.arange(n), np.arange(2 * n, 3 * n), np.arange(n, 2 * n),
                            np.arange(3 * n, 4 * n)])
    np.testing.assert_allclose(h1, h2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb1, gb2[order], rtol=1e-3, atol=1e-4)
    print("check: outputs and bias gradients agree")
    steps = {}
    for kind, (s, x, h, grads) in models.items():
        steps[f"{kind} forward"] = lambda s=s, x=x, h=h: s.run(h, {x: xs})
        steps[f"{kind} forward + gradients"] = lambda s=s, x=x, g=grads: s.run(g, {x: xs})
    for fn in steps.values():
        fn()
        fn()
    times = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    print(environment_line())
    for what in ("forward", "forward + gradients"):
        rows = [Row(f"{kind} {what}", statistics.median(times[f"{kind} {what}"]))
                for kind in models]
        print_table(f"LSTM time {t}, batch {b}, input {n_in}, hidden {n}: {what}", rows,
                    baseline=f"BlockLSTMV2 {what}")


if __name__ == "__main__":
    main()
