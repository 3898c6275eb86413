"""Compile speed: the MLP training step (784-256-256-10, SGD, examples/benchmarks/
bench_train_mlp.py) compiled into an empty cache (cold: passes, C code generation, cc and
loading), and the same step started by a new session over the filled cache (warm: the step
graph, the passes and the cache key, then the artifact loaded; no cc).

    python3 examples/benchmarks/bench_compile.py [--quick]

Goals: a cold compile within 2 s, a warm start within 50 ms. Times are of the first
``Session.run`` of the training step (the initializer step is compiled and run before the
timing starts), medians over fresh cache folders (cold) and new sessions (warm).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import List

from bench_common import FLOWC, Frameworks, Result, run_alone
from bench_train_mlp import FlowcModel, init_params, sample_batch

NAME = "compile"
COLD_GOAL_S = 2.0
WARM_GOAL_S = 0.050


def first_step_seconds(model: FlowcModel, feed) -> float:
    """Seconds of the first training step of a new session (its compile or cache load)."""
    sess = model.session("c")                   # runs (and compiles) the initializer
    t0 = time.perf_counter()
    sess.run([model.loss, model.train_op], feed)
    seconds = time.perf_counter() - t0
    sess.close()
    return seconds


def measure(fw: Frameworks, quick: bool = False) -> List[Result]:
    model = FlowcModel(init_params())
    x, labels = sample_batch(128)
    feed = {model.x: x, model.labels: labels}
    cold, warm = [], []
    saved = os.environ.get("FLOWC_CACHE_DIR")
    try:
        for _ in range(1 if quick else 3):
            with tempfile.TemporaryDirectory(prefix="flowc-compile-") as cache:
                os.environ["FLOWC_CACHE_DIR"] = cache
                cold.append(first_step_seconds(model, feed))
                for _ in range(3 if quick else 5):
                    warm.append(first_step_seconds(model, feed))
    finally:
        if saved is None:
            os.environ.pop("FLOWC_CACHE_DIR", None)
        else:
            os.environ["FLOWC_CACHE_DIR"] = saved
    bench = "compile: MLP training step"
    return [Result(bench, FLOWC + " cold (empty cache)", statistics.median(cold), 1, "compiles",
                   note=f"goal <= {COLD_GOAL_S:.0f} s"),
            Result(bench, FLOWC + " warm (cached) start", statistics.median(warm), 1, "starts",
                   note=f"goal <= {WARM_GOAL_S * 1e3:.0f} ms")]


def main() -> None:
    run_alone(__doc__, "compile speed", lambda fw, args: measure(fw, args.quick))


if __name__ == "__main__":
    main()
