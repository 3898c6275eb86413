"""An elementwise chain, relu(x * 1.5 + 0.5) * sigmoid(x), on 16,777,216 float32 values,
as effective memory bandwidth (bytes read + written per step / time) beside the machine's
STREAM triad bandwidth measured in the same run (``stream_triad.py``).

    python3 examples/benchmarks/bench_elementwise.py [--n N] [--repeats R] [--threads T]

Every system reads x from memory it already holds and returns a new array: flowc (one fused,
vectorized, parallel loop, x fed), numpy (one temporary per op), PyTorch eager and
torch.compile, TensorFlow as a TF1 session (x a variable), tf.function and tf.function with
XLA (x a tensor argument). All results are checked against a float64 numpy reference.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List

import numpy as np

from bench_common import FLOWC, Frameworks, Result, run_alone
from bench_train_mlp import interleaved_medians
from stream_triad import measure_triad

import dsl as fl  # noqa: E402

NAME = "elementwise"
ELEMENTS = 16_777_216
BYTES_PER_ELEMENT = 8          # x read, the result written (float32)


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return np.maximum(x * 1.5 + 0.5, 0) / (1 + np.exp(-x))


def flowc_step(x: np.ndarray) -> Callable:
    g = fl.Graph()
    with g.as_default():
        xp = fl.placeholder(fl.float32, [x.size], name="x")
        y = fl.nn.relu(xp * 1.5 + 0.5) * fl.sigmoid(xp)
    sess = fl.Session(graph=g)
    return lambda: sess.run(y, {xp: x})


def numpy_step(x: np.ndarray) -> Callable:
    one, a, b = np.float32(1), np.float32(1.5), np.float32(0.5)
    return lambda: np.maximum(x * a + b, 0) * (one / (one + np.exp(-x)))


def torch_steps(torch, x: np.ndarray) -> Dict[str, Callable]:
    xt = torch.from_numpy(x)

    def chain(v):
        return torch.relu(v * 1.5 + 0.5) * torch.sigmoid(v)
    compiled = torch.compile(chain)
    with torch.no_grad():
        return {"PyTorch eager": lambda: chain(xt).numpy(),
                "torch.compile": lambda: compiled(xt).numpy()}


def tf_steps(tf, x: np.ndarray) -> Dict[str, Callable]:
    def chain(v):
        return tf.nn.relu(v * 1.5 + 0.5) * tf.sigmoid(v)
    graph = tf.Graph()
    with graph.as_default():
        init_value = tf.compat.v1.placeholder(tf.float32, x.shape)
        var = tf.compat.v1.Variable(init_value)
        out = chain(var.read_value() if hasattr(var, "read_value") else var)
    sess = tf.compat.v1.Session(graph=graph)
    sess.run(var.initializer, {init_value: x})
    xt = tf.constant(x)
    plain, xla = tf.function(chain), tf.function(chain, jit_compile=True)
    return {"TF1 session": lambda: sess.run(out),
            "tf.function": lambda: plain(xt).numpy(),
            "tf.function XLA": lambda: xla(xt).numpy()}


def measure(fw: Frameworks, quick: bool = False, n: int = ELEMENTS) -> List[Result]:
    repeats = 5 if quick else 20
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    want = reference(x)
    steps: Dict[str, Callable] = {FLOWC: flowc_step(x), "numpy": numpy_step(x)}
    if fw.torch is not None:
        steps.update(torch_steps(fw.torch, x))
    if fw.tf is not None:
        steps.update(tf_steps(fw.tf, x))
    for name, step in steps.items():
        got = np.asarray(step())
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)
    medians = interleaved_medians({k: (fn, repeats) for k, fn in steps.items()}, warmup=1)
    bench = f"chain, {n:,} f32"
    gb = BYTES_PER_ELEMENT * n / 1e9
    results = [Result(bench, k, s, gb, "GB") for k, s in medians.items()]
    results += fw.missing(bench, ("PyTorch eager", "torch.compile", "TF1 session",
                                  "tf.function", "tf.function XLA"))
    threads = fw.threads or os.cpu_count() or 1
    for t in sorted({1, threads}):
        triad = measure_triad(n, repeats, t)
        # the same bytes at the triad's bandwidth: what the chain would take at that speed
        results.append(Result(bench, f"STREAM triad, C -O3, {t} thread(s)", gb / triad.reused_gbs,
                              gb, "GB", note=f"into a fresh output: {triad.fresh_gbs:.2f} GB/s"))
    return results


def main() -> None:
    run_alone(__doc__, "elementwise chain: effective bandwidth",
              lambda fw, args: measure(fw, args.quick, args.n),
              lambda parser: parser.add_argument("--n", type=int, default=ELEMENTS))


if __name__ == "__main__":
    main()
