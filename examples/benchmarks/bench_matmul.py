"""float32 matrix multiplication, n x n by n x n for n = 256 and 1024, in GFLOP/s (2 n^3
floating-point operations per product).

    python3 examples/benchmarks/bench_matmul.py [--quick] [--threads T]

flowc (OpenBLAS sgemm from scipy-openblas32, both operands fed), numpy (its own OpenBLAS),
PyTorch eager and torch.compile, TensorFlow as a TF1 session (operands in variables),
tf.function and tf.function with XLA (operands as tensor arguments). Every system returns a
new n x n array; results are checked against numpy in float64.
"""
from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np

from bench_common import FLOWC, Frameworks, Result, run_alone
from bench_train_mlp import interleaved_medians

import dsl as fl  # noqa: E402

NAME = "matmul"
SIZES = (256, 1024)


def flowc_step(a: np.ndarray, b: np.ndarray) -> Callable:
    g = fl.Graph()
    with g.as_default():
        pa = fl.placeholder(fl.float32, a.shape, name="a")
        pb = fl.placeholder(fl.float32, b.shape, name="b")
        c = fl.matmul(pa, pb)
    sess = fl.Session(graph=g)
    return lambda: sess.run(c, {pa: a, pb: b})


def torch_steps(torch, a: np.ndarray, b: np.ndarray) -> Dict[str, Callable]:
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    compiled = torch.compile(torch.mm)
    return {"PyTorch eager": lambda: torch.mm(ta, tb).numpy(),
            "torch.compile": lambda: compiled(ta, tb).numpy()}


def tf_steps(tf, a: np.ndarray, b: np.ndarray) -> Dict[str, Callable]:
    graph = tf.Graph()
    with graph.as_default():
        pa = tf.compat.v1.placeholder(tf.float32, a.shape)
        pb = tf.compat.v1.placeholder(tf.float32, b.shape)
        va, vb = tf.compat.v1.Variable(pa), tf.compat.v1.Variable(pb)
        product = tf.matmul(va, vb)
    sess = tf.compat.v1.Session(graph=graph)
    sess.run([va.initializer, vb.initializer], {pa: a, pb: b})
    ta, tb = tf.constant(a), tf.constant(b)
    plain, xla = tf.function(tf.matmul), tf.function(tf.matmul, jit_compile=True)
    return {"TF1 session": lambda: sess.run(product),
            "tf.function": lambda: plain(ta, tb).numpy(),
            "tf.function XLA": lambda: xla(ta, tb).numpy()}


def measure_size(fw: Frameworks, n: int, repeats: int) -> List[Result]:
    rng = np.random.default_rng(n)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    steps: Dict[str, Callable] = {FLOWC: flowc_step(a, b), "numpy": lambda: a @ b}
    if fw.torch is not None:
        steps.update(torch_steps(fw.torch, a, b))
    if fw.tf is not None:
        steps.update(tf_steps(fw.tf, a, b))
    for name, step in steps.items():
        np.testing.assert_allclose(np.asarray(step()), want, rtol=1e-3, atol=1e-3 * np.sqrt(n),
                                   err_msg=name)
    medians = interleaved_medians({k: (fn, repeats) for k, fn in steps.items()}, warmup=1)
    bench = f"matmul f32 {n}^3"
    gflop = 2.0 * n ** 3 / 1e9
    return ([Result(bench, k, s, gflop, "GFLOP") for k, s in medians.items()]
            + fw.missing(bench, ("PyTorch eager", "torch.compile", "TF1 session", "tf.function",
                                 "tf.function XLA")))


def measure(fw: Frameworks, quick: bool = False) -> List[Result]:
    results: List[Result] = []
    for n in SIZES:
        repeats = (10 if quick else 50) if n <= 256 else (5 if quick else 20)
        results += measure_size(fw, n, repeats)
    return results


def main() -> None:
    run_alone(__doc__, "float32 matmul", lambda fw, args: measure(fw, args.quick))


if __name__ == "__main__":
    main()
