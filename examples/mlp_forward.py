"""The forward pass of a 784-256-256-10 multilayer perceptron on a batch of 128, built with
flowc's Python API and run on both backends: compiled C and the numpy interpreter.

    python3 examples/mlp_forward.py                    # build, run both ways, compare, time
    flowc compile examples/mlp_forward.py -o build/mlp # the same graph as an artifact

The weights are constants drawn from a fixed seed (variables and training come later), so the
step computes ``softmax(relu(relu(x W1 + b1) W2 + b2) W3 + b3)`` and its ``argmax``.
``build()`` is the convention ``flowc compile`` and ``flowc ir`` use: it returns the graph and
a dict of named fetches; every placeholder the fetches need (here ``x``) is fed.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Tuple

import numpy as np

import dsl as fl

LAYER_SIZES = (784, 256, 256, 10)
BATCH = 128
SEED = 2016


def init_params(seed: int = SEED) -> List[Tuple[np.ndarray, np.ndarray]]:
    """(weights, bias) per layer, He-initialised float32 from ``seed``."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(LAYER_SIZES[:-1], LAYER_SIZES[1:]):
        w = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(fan_in, fan_out)).astype(np.float32)
        b = rng.normal(0.0, 0.01, size=fan_out).astype(np.float32)
        params.append((w, b))
    return params


def mlp_logits(x: fl.Tensor, params: List[Tuple[np.ndarray, np.ndarray]]) -> fl.Tensor:
    """Dense layers with ReLU between them; the last layer's output is the logits."""
    h = x
    for i, (w, b) in enumerate(params, start=1):
        with fl.name_scope(f"dense{i}"):
            h = fl.nn.bias_add(fl.matmul(h, fl.constant(w, name="weights")),
                               fl.constant(b, name="bias"))
            if i < len(params):
                h = fl.nn.relu(h)
    return h


def build() -> Tuple[fl.Graph, Dict[str, fl.Tensor]]:
    """The graph and its named fetches (``probs``, ``predictions``); feeds: placeholder ``x``."""
    graph = fl.Graph("mlp_forward")
    with graph.as_default():
        x = fl.placeholder(fl.float32, [None, LAYER_SIZES[0]], name="x")
        logits = mlp_logits(x, init_params())
        probs = fl.nn.softmax(logits, name="probs")
        predictions = fl.argmax(probs, axis=1, name="predictions")
    return graph, {"probs": probs, "predictions": predictions}


def sample_batch(batch: int = BATCH, seed: int = SEED + 1) -> np.ndarray:
    """A batch of inputs in [0, 1), like flattened 28x28 grey images."""
    return np.random.default_rng(seed).random((batch, LAYER_SIZES[0]), dtype=np.float32)


def median_ms(step: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``step`` in milliseconds, over ``repeats`` calls after one warm-up."""
    step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> None:
    graph, fetches = build()
    x = graph.get_tensor_by_name("x:0")
    batch = sample_batch()
    feed = {x: batch}
    results, step_ms = {}, {}
    for backend, repeats in (("c", 50), ("interpreter", 10)):
        with fl.Session(graph=graph, backend=backend) as sess:
            t0 = time.perf_counter()
            results[backend] = sess.run(fetches, feed)
            first_ms = (time.perf_counter() - t0) * 1000.0
            step_ms[backend] = median_ms(lambda: sess.run(fetches, feed), repeats)
        what = "compile + first step" if backend == "c" else "first step"
        print(f"{backend:>11}: {what} {first_ms:8.1f} ms, then {step_ms[backend]:7.3f} ms/step "
              f"(median of {repeats})")

    compiled, reference = results["c"], results["interpreter"]
    agree = int(np.sum(compiled["predictions"] == reference["predictions"]))
    max_diff = float(np.max(np.abs(compiled["probs"] - reference["probs"])))
    print(f"predictions (first 16 of {BATCH}): {compiled['predictions'][:16].tolist()}")
    print(f"class counts: {np.bincount(compiled['predictions'], minlength=LAYER_SIZES[-1]).tolist()}")
    print(f"backends agree on {agree}/{BATCH} predictions; max |probs difference| = {max_diff:.2e}")
    print(f"speed-up of compiled C over the interpreter: {step_ms['interpreter'] / step_ms['c']:.2f}x")
    if agree != BATCH or max_diff > 1e-4:
        raise SystemExit("the compiled step and the interpreter disagree")


if __name__ == "__main__":
    main()
