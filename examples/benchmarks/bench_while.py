"""A 1,000-iteration scalar loop: ``fl.while_loop`` compiled to a C ``while`` vs the interpreter,
TensorFlow's ``tf.while_loop`` in a ``tf.function`` and a PyTorch/Python loop (where installed).

    python3 examples/benchmarks/bench_while.py [--iterations N] [--repeats N]

The loop body is ``(i + 1, s * 0.999 + 0.5)`` on float32 scalars: nothing to fold, one
multiply-add per iteration, so the figure is the cost of running a loop iteration.
"""
from __future__ import annotations

import argparse

import numpy as np

from bench_common import Row, environment_line, median_seconds, optional_import, print_table

import dsl as fl  # noqa: E402


def build(iterations: int):
    graph = fl.Graph("scalar_loop")
    with graph.as_default():
        n = fl.placeholder(fl.int32, [], name="n")
        s0 = fl.placeholder(fl.float32, [], name="s0")
        _, s = fl.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 0.999 + 0.5),
                             [0, s0])
    return graph, n, s0, s


def reference(iterations: int, s: float) -> np.float32:
    s = np.float32(s)
    for _ in range(iterations):
        s = np.float32(s * np.float32(0.999) + np.float32(0.5))
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    n_iter, repeats = args.iterations, args.repeats
    graph, n, s0, s = build(n_iter)
    feed = {n: np.int32(n_iter), s0: np.float32(1.0)}
    want = reference(n_iter, 1.0)
    compiled = fl.Session(graph=graph)
    interpreted = fl.Session(graph=graph, backend="interpreter")
    for name, sess in (("compiled", compiled), ("interpreter", interpreted)):
        got = sess.run(s, feed)
        if not np.isclose(got, want, rtol=1e-5):
            raise SystemExit(f"{name} computed {got}, expected {want}")
    rows = [Row("flowc compiled C (fl.while_loop -> C while)",
                median_seconds(lambda: compiled.run(s, feed), repeats)),
            Row("flowc interpreter", median_seconds(lambda: interpreted.run(s, feed), 3))]

    def python_loop():
        v = np.float32(1.0)
        for _ in range(n_iter):
            v = v * np.float32(0.999) + np.float32(0.5)
        return v

    rows.append(Row("numpy float32 scalars (Python loop)", median_seconds(python_loop, repeats)))
    tf = optional_import("tensorflow")
    if tf is not None:
        @tf.function
        def tf_loop(count, start):
            return tf.while_loop(lambda i, v: i < count, lambda i, v: (i + 1, v * 0.999 + 0.5),
                                 [tf.constant(0), start])[1]

        c, st = tf.constant(n_iter), tf.constant(1.0)
        tf_loop(c, st)
        rows.append(Row("TensorFlow tf.while_loop in tf.function",
                        median_seconds(lambda: tf_loop(c, st).numpy(), repeats)))
    else:
        rows.append(Row("TensorFlow", None, "not installed"))
    torch = optional_import("torch")
    if torch is not None:
        def torch_loop():
            v = torch.tensor(1.0)
            for _ in range(n_iter):
                v = v * 0.999 + 0.5
            return v
        rows.append(Row("PyTorch eager (Python loop)", median_seconds(torch_loop, max(repeats // 5, 3))))
    else:
        rows.append(Row("PyTorch", None, "not installed"))
    print(environment_line(torch, tf))
    print_table(f"{n_iter}-iteration scalar loop, one step", rows,
                baseline="flowc compiled C (fl.while_loop -> C while)", unit="ms")


if __name__ == "__main__":
    main()
