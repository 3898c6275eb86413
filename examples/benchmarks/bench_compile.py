"""Compile speed: the MLP training step (784-256-256-10, SGD, examples/benchmarks/
bench_train_mlp.py) compiled into an empty cache (cold: passes, C code generation, cc and
loading), and the same step started by a new session over the filled cache (warm: the cache
key, from the graph's digest remembered per graph version, then the artifact loaded; no
passes, no copy of the graph, no cc). Then the same two rows
for models at scale: the 10,000-op chain of bench_dispatch.py (fusion off, as there), and a
ResNet-18-style and a MobileNetV2-style CNN at 1x3x96x96 written as ONNX by
compile_models.py and make_mobilenet_onnx.py (imported once, before the timing: the rows time
the compile, not the ONNX import, which the note gives).

    python3 examples/benchmarks/bench_compile.py [--quick] [--no-models]

Goals: the MLP step within 2 s cold; the chain and the MobileNetV2 within 5 s, the ResNet-18
within 2 s; every warm start within 50 ms. Times are of the first ``Session.run`` of the step
(an initializer step is compiled and run before the timing starts), medians over fresh cache
folders (cold) and new sessions (warm). The models' "warm start, new process" row is the
first run in a second Python process over the filled cache (the model imported before the
timing, as above; a first, untimed process has built flowc's run-path helper into the new
cache): what a restarted program pays, with the step's own first execution.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from typing import Callable, List

import numpy as np

from bench_common import FLOWC, Frameworks, Result, run_alone
from bench_train_mlp import FlowcModel, init_params, sample_batch

NAME = "compile"
COLD_GOAL_S = 2.0
WARM_GOAL_S = 0.050
# The models at scale: (name, cold goal in seconds).
MODEL_GOALS = {"10,000-op chain": 5.0, "ResNet-18-style ONNX": 2.0,
               "MobileNetV2-style ONNX": 5.0}


def first_step_seconds(model: FlowcModel, feed) -> float:
    """Seconds of the first training step of a new session (its compile or cache load)."""
    sess = model.session("c")                   # runs (and compiles) the initializer
    t0 = time.perf_counter()
    sess.run([model.loss, model.train_op], feed)
    seconds = time.perf_counter() - t0
    sess.close()
    return seconds


@contextlib.contextmanager
def cache_folder(folder: str):
    """``FLOWC_CACHE_DIR`` is ``folder`` inside the block."""
    saved = os.environ.get("FLOWC_CACHE_DIR")
    os.environ["FLOWC_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("FLOWC_CACHE_DIR", None)
        else:
            os.environ["FLOWC_CACHE_DIR"] = saved


def first_run_seconds(start: Callable[[], Callable[[], object]]) -> float:
    """Seconds of the first run of the step ``start()`` returns (a new session's)."""
    run = start()
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def chain_step():
    import dsl as fl
    from bench_dispatch import NO_FUSION, chain_graph
    graph, x, y = chain_graph(10_000)

    def start():
        sess = fl.Session(graph=graph, backend="c", options=NO_FUSION)
        return lambda: sess.run(y, {x: np.float32(1.0)})
    return start, ""


def onnx_step(name: str, folder: str):
    """The imported model's step (a new session's first run) and a note on its import."""
    import dsl as fl
    from dsl.onnx import import_onnx
    import compile_models
    path = compile_models.write_model(name, folder)
    t0 = time.perf_counter()
    imported = import_onnx(path)
    seconds = time.perf_counter() - t0
    (x,) = imported.inputs.values()
    fetches = list(imported.outputs.values())
    image = np.random.default_rng(0).standard_normal(compile_models.IMAGE).astype(np.float32)

    def start():
        sess = fl.Session(graph=imported.graph, backend="c")
        return lambda: sess.run(fetches, {x: image})
    return start, f"ONNX import {seconds:.1f} s, not timed"


def _start_of(model: str, folder: str):
    if model == "10,000-op chain":
        return chain_step()
    return onnx_step("resnet18" if model.startswith("ResNet") else "mobilenetv2", folder)


def new_process_seconds(model: str, folder: str) -> float:
    """Seconds of the first run of ``model``'s step in a new Python process over this
    process's cache (``FLOWC_CACHE_DIR``)."""
    import json
    import subprocess
    import sys
    import dsl
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.abspath(dsl.__file__)))    # this flowc
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    # (in this process's folder: nodes' source locations, which the cache key covers, are
    # written relative to it)
    out = subprocess.run([sys.executable, os.path.join(here, "bench_compile.py"), "--first-run",
                          model, folder], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.splitlines()[-1])


def measure_models(quick: bool = False) -> List[Result]:
    """Cold and warm rows of the chain, the ResNet-18 and the MobileNetV2."""
    results: List[Result] = []
    with tempfile.TemporaryDirectory(prefix="flowc-models-") as folder:
        steps = [("10,000-op chain", chain_step)]
        try:
            import onnx  # noqa: F401
            steps += [("ResNet-18-style ONNX", lambda: onnx_step("resnet18", folder)),
                      ("MobileNetV2-style ONNX", lambda: onnx_step("mobilenetv2", folder))]
        except ImportError:
            for model in ("ResNet-18-style ONNX", "MobileNetV2-style ONNX"):
                results.append(Result(f"compile: {model}", FLOWC + " cold (empty cache)", None,
                                      note="onnx not installed"))
        for model, make in steps:
            start, note = make()
            cold, warm, process = [], [], []
            for _ in range(1 if quick else 2):
                with tempfile.TemporaryDirectory(prefix="flowc-compile-") as cache, \
                        cache_folder(cache):
                    cold.append(first_run_seconds(start))
                    for _ in range(3 if quick else 5):
                        warm.append(first_run_seconds(start))
                    # the first program over a fresh cache also builds flowc's run-path
                    # helper (runtime/fastcall.py, a cc of ~0.5 s) into it: not timed, as a
                    # restarted program finds it there
                    new_process_seconds(model, folder)
                    process.append(new_process_seconds(model, folder))
            goal = MODEL_GOALS[model]
            results += [Result(f"compile: {model}", FLOWC + " cold (empty cache)",
                               statistics.median(cold), 1, "compiles",
                               note=f"goal <= {goal:.0f} s" + (f"; {note}" if note else "")),
                        Result(f"compile: {model}", FLOWC + " warm (cached) start",
                               statistics.median(warm), 1, "starts",
                               note=f"goal <= {WARM_GOAL_S * 1e3:.0f} ms"),
                        Result(f"compile: {model}", FLOWC + " warm start, new process",
                               statistics.median(process), 1, "starts",
                               note="first run in a second process, its first execution "
                                    "included")]
    return results


def measure(fw: Frameworks, quick: bool = False, models: bool = True) -> List[Result]:
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
    results = [Result(bench, FLOWC + " cold (empty cache)", statistics.median(cold), 1,
                      "compiles", note=f"goal <= {COLD_GOAL_S:.0f} s"),
               Result(bench, FLOWC + " warm (cached) start", statistics.median(warm), 1,
                      "starts", note=f"goal <= {WARM_GOAL_S * 1e3:.0f} ms")]
    return results + (measure_models(quick) if models else [])


def main() -> None:
    import sys
    if len(sys.argv) == 4 and sys.argv[1] == "--first-run":     # new_process_seconds's child
        import json
        start, _ = _start_of(sys.argv[2], sys.argv[3])
        print(json.dumps(first_run_seconds(start)))
        return

    def arguments(parser):
        parser.add_argument("--no-models", action="store_true",
                            help="only the MLP training step (not the chain and the CNNs)")
    run_alone(__doc__, "compile speed",
              lambda fw, args: measure(fw, args.quick, not args.no_models), arguments)


if __name__ == "__main__":
    main()
