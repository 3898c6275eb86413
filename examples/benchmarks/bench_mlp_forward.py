"""The forward step of examples/mlp_forward.py (784-256-256-10, batch 128): flowc's compiled C
and interpreter beside numpy and, when installed, PyTorch and TensorFlow.

    python3 examples/benchmarks/bench_mlp_forward.py [--repeats N] [--batch B] [--threads T]

Every framework computes the same softmax probabilities and argmax predictions from the same
weights and batch; the results are checked against numpy before anything is timed.
"""
from __future__ import annotations

import argparse
from typing import Callable, Dict, List, Tuple

import numpy as np

from bench_common import (Row, add_threads_argument, apply_threads, environment_line,
                          import_example, median_seconds, optional_import, print_table)

mlp = import_example("mlp_forward")
import dsl as fl  # noqa: E402

Params = List[Tuple[np.ndarray, np.ndarray]]


def numpy_step(params: Params) -> Callable[[np.ndarray], Tuple[np.ndarray, np.ndarray]]:
    def step(x):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = np.maximum(h, 0)
        e = np.exp(h - h.max(axis=1, keepdims=True))
        probs = e / e.sum(axis=1, keepdims=True)
        return probs, probs.argmax(axis=1)
    return step


def torch_step(torch, params: Params):
    weights = [(torch.from_numpy(w), torch.from_numpy(b)) for w, b in params]

    def step(x):
        with torch.no_grad():
            h = torch.from_numpy(x)
            for i, (w, b) in enumerate(weights):
                h = torch.addmm(b, h, w)
                if i < len(weights) - 1:
                    h = torch.relu(h)
            probs = torch.softmax(h, dim=1)
            return probs.numpy(), probs.argmax(dim=1).numpy()
    return step


def tensorflow_step(tf, params: Params):
    weights = [(tf.constant(w), tf.constant(b)) for w, b in params]

    @tf.function
    def forward(x):
        h = x
        for i, (w, b) in enumerate(weights):
            h = tf.nn.bias_add(tf.matmul(h, w), b)
            if i < len(weights) - 1:
                h = tf.nn.relu(h)
        probs = tf.nn.softmax(h)
        return probs, tf.argmax(probs, axis=1)

    def step(x):
        probs, pred = forward(tf.constant(x))
        return probs.numpy(), pred.numpy()
    return step


def flowc_step(backend: str):
    graph, fetches = mlp.build()
    x = graph.get_tensor_by_name("x:0")
    sess = fl.Session(graph=graph, backend=backend)

    def step(batch):
        out = sess.run(fetches, {x: batch})
        return out["probs"], out["predictions"]
    return step


def check(name: str, got, want) -> None:
    probs, pred = got
    if not np.allclose(probs, want[0], rtol=1e-4, atol=1e-5) or not np.array_equal(pred, want[1]):
        raise SystemExit(f"{name} disagrees with numpy; not timing it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50, help="timed steps per framework")
    parser.add_argument("--batch", type=int, default=mlp.BATCH)
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)

    torch, tf = optional_import("torch"), optional_import("tensorflow")
    if torch is not None and args.threads:
        torch.set_num_threads(args.threads)
    params = mlp.init_params()
    batch = mlp.sample_batch(args.batch)
    steps: Dict[str, Tuple[Callable, int]] = {
        "flowc compiled C (Session.run)": (flowc_step("c"), args.repeats),
        "flowc interpreter (Session.run)": (flowc_step("interpreter"), max(args.repeats // 5, 3)),
        "numpy": (numpy_step(params), args.repeats),
    }
    if torch is not None:
        steps["PyTorch (eager, no_grad)"] = (torch_step(torch, params), args.repeats)
    if tf is not None:
        steps["TensorFlow (tf.function)"] = (tensorflow_step(tf, params), args.repeats)

    want = steps["numpy"][0](batch)
    rows = []
    for name, (step, repeats) in steps.items():
        check(name, step(batch), want)          # the first call also compiles flowc's step
        rows.append(Row(name, median_seconds(lambda: step(batch), repeats)))
    if torch is None:
        rows.append(Row("PyTorch", None, "not installed"))
    if tf is None:
        rows.append(Row("TensorFlow", None, "not installed"))

    print(environment_line(torch, tf))
    print_table(f"MLP forward {'-'.join(map(str, mlp.LAYER_SIZES))}, batch {args.batch} "
                f"(median of {args.repeats} steps; interpreter: {max(args.repeats // 5, 3)})",
                rows, baseline="numpy", unit="ms")


if __name__ == "__main__":
    main()
