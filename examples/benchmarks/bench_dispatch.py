"""Dispatch overhead: a step of 10,000 trivial scalar ops, and a step with no ops at all.

    python3 examples/benchmarks/bench_dispatch.py [--ops N] [--repeats N] [--threads T]

The graph is a chain ``y = y + x`` of N ``AddV2`` nodes on one fed scalar ``x``: constant
folding cannot remove them (``x`` is fed), CSE cannot merge them (each reads a different ``y``)
and no algebraic identity applies; the fuse pass is off (it would merge the chain). flowc runs the chain as one compiled step (no per-op dispatch
at run time) or node by node in the interpreter; numpy and PyTorch run the same adds from a
Python loop. The paper's executor dispatched about 2,000,000 null ops per second.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Callable, Dict, List

import numpy as np

from bench_common import (FLOWC, Frameworks, Result, Row, add_threads_argument, apply_threads,
                          environment_line, median_seconds, optional_import, print_table)

import dsl as fl  # noqa: E402
from compiler.options import PipelineOptions  # noqa: E402
from compiler.step import make_step_graph, optimize, write_artifact  # noqa: E402
from runtime import load_artifact  # noqa: E402

PAPER_NULL_OPS_PER_SECOND = 2_000_000

# Dispatch is measured with fusion off: fused, the chain would be a few long kernels.
NO_FUSION = PipelineOptions(disable=("fuse",))


def chain_graph(n: int):
    """``x`` fed, ``y = x + x + ... + x`` as ``n`` AddV2 nodes; returns (graph, x, y)."""
    graph = fl.Graph("dispatch_chain")
    with graph.as_default():
        x = fl.placeholder(fl.float32, [], name="x")
        y = x
        for _ in range(n):
            y = fl.add(y, x)
    return graph, x, y


def parallel_chains_graph(n: int, devices: int):
    """``devices`` chains of ``n // devices`` AddV2 ops, chain k on ``/cpu:k``, summed on
    ``/cpu:0``: each device runs its chain concurrently, joined by _Send/_Recv pairs."""
    graph = fl.Graph(f"dispatch_{devices}_devices")
    with graph.as_default():
        x = fl.placeholder(fl.float32, [], name="x")
        ends = []
        for k in range(devices):
            with fl.device(f"/cpu:{k}"):
                y = x
                for _ in range(n // devices):
                    y = fl.add(y, x)
                ends.append(y)
        with fl.device("/cpu:0"):
            total = fl.add_n(ends)
    return graph, x, total


ARTIFACT = "flowc C (load_artifact(p).run)"


def empty_graph():
    """One feed and one fetch, nothing in between (the Identity is simplified away)."""
    graph = fl.Graph("dispatch_empty")
    with graph.as_default():
        x = fl.placeholder(fl.float32, [], name="x")
        y = fl.identity(x, name="y")
    return graph, x, y


def compile_step(graph, x, y, folder: str):
    """Compile with the step API, timing passes and codegen + cc separately."""
    t0 = time.perf_counter()
    step = make_step_graph(graph, [x.output], [y.output])
    optimize(step, NO_FUSION)
    t1 = time.perf_counter()
    path = write_artifact(step, os.path.join(folder, graph.name))
    t2 = time.perf_counter()
    return load_artifact(path), len(step.graph), t1 - t0, t2 - t1


def python_loop(add, x, n: int):
    def run():
        y = x
        for _ in range(n):
            y = add(y, x)
        return y
    return run


# --- for run_all.py ----------------------------------------------------------------------
NAME = "dispatch"
WHOLE_CHAIN_COMPILERS = "not measured: compiles the chain into one fused kernel"


def tf1_chain(tf, n: int):
    """The chain as a TF1 graph of ``n`` tf.add ops run by a session (the paper's executor)."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        y = x
        for _ in range(n):
            y = tf.add(y, x)
        empty = tf.identity(x)
    sess = tf.compat.v1.Session(graph=graph)
    return (lambda: sess.run(y, {x: 1.0})), (lambda: sess.run(empty, {x: 1.0}))


def tf_function_chain(tf, n: int):
    @tf.function
    def chain(x):
        y = x
        for _ in range(n):
            y = tf.add(y, x)
        return y

    @tf.function
    def empty(x):
        return tf.identity(x)
    x = tf.constant(1.0)
    return (lambda: chain(x).numpy()), (lambda: empty(x).numpy())


def measure(fw: Frameworks, quick: bool = False, n: int = 10_000) -> List[Result]:
    """Ops/s of the n-op chain (fusion off) and the latency of an empty step, per system."""
    repeats = 5 if quick else 20
    one = np.float32(1.0)
    graph, x, y = chain_graph(n)
    compiled = fl.Session(graph=graph, backend="c", options=NO_FUSION)
    chains: Dict[str, Callable] = {FLOWC: lambda: compiled.run(y, {x: one}),
                                   "numpy": python_loop(lambda a, b: a + b, one, n)}
    eg, ex, ey = empty_graph()
    empty_c = fl.Session(graph=eg, backend="c")
    empties: Dict[str, Callable] = {FLOWC: lambda: empty_c.run(ey, {ex: one})}
    with tempfile.TemporaryDirectory(prefix="flowc-bench-empty-") as folder:
        artifact = compile_step(eg, ex, ey, folder)[0]
    feeds = {"x": one}
    empties[ARTIFACT] = lambda: artifact.run(feeds)
    if fw.torch is not None:
        t = fw.torch.tensor(1.0)
        chains["PyTorch eager"] = python_loop(lambda a, b: a + b, t, n)
    if fw.tf is not None:
        chains["TF1 session"], empties["TF1 session"] = tf1_chain(fw.tf, n)
        chains["tf.function"], empties["tf.function"] = tf_function_chain(fw.tf, n)
    if float(artifact.run(feeds)[0]) != 1.0:
        raise SystemExit("the empty step's artifact did not return its feed")
    for name, step in chains.items():
        if float(step()) != n + 1:
            raise SystemExit(f"{name} computed {float(step())}, expected {n + 1}")
    bench = f"dispatch: {n:,} scalar adds"
    results = [Result(bench, k, median_seconds(fn, repeats), n, "ops",
                      note="Python loop" if k in ("numpy", "PyTorch eager") else "")
               for k, fn in chains.items()]
    results += [Result(bench, k, None, note=WHOLE_CHAIN_COMPILERS)
                for k in ("torch.compile", "tf.function XLA")]
    results += fw.missing(bench, ("PyTorch eager", "TF1 session", "tf.function"))
    bench = "empty step (1 feed, 1 fetch)"
    results += [Result(bench, k, median_seconds(fn, repeats * 50), 1, "steps")
                for k, fn in empties.items()]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000, help="length of the chain")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per row")
    parser.add_argument("--devices", type=int, default=4,
                        help="CPU devices for the multi-device run (default 4)")
    add_threads_argument(parser)
    args = parser.parse_args()
    apply_threads(args.threads)
    n, repeats = args.ops, args.repeats
    torch = optional_import("torch")
    if torch is not None and args.threads:
        torch.set_num_threads(args.threads)
    one = np.float32(1.0)

    with tempfile.TemporaryDirectory(prefix="flowc-bench-") as tmp:
        os.environ["FLOWC_CACHE_DIR"] = tmp             # a cold cache: the compile is real
        graph, x, y = chain_graph(n)
        print(f"compiling the {n}-op chain ...", file=sys.stderr, flush=True)
        artifact, nodes, pass_s, build_s = compile_step(graph, x, y, tmp)
        want = np.float32(n + 1)

        compiled = fl.Session(graph=graph, backend="c", options=NO_FUSION)
        interpreted = fl.Session(graph=graph, backend="interpreter")
        results = {"compiled": compiled.run(y, {x: one}), "interpreter": interpreted.run(y, {x: one}),
                   "runtime": artifact.run({"x": one})[0]}
        for name, value in results.items():
            if value != want:
                raise SystemExit(f"{name} computed {value}, expected {want}")

        rows = [
            Row("flowc compiled C (Session.run)",
                median_seconds(lambda: compiled.run(y, {x: one}), repeats)),
            Row("flowc compiled C (runtime Artifact.run)",
                median_seconds(lambda: artifact.run({"x": one}), repeats)),
            Row("flowc interpreter (Session.run)",
                median_seconds(lambda: interpreted.run(y, {x: one}), max(repeats // 5, 3))),
            Row("numpy float32 scalars (Python loop)",
                median_seconds(python_loop(lambda a, b: a + b, one, n), repeats)),
            Row("numpy 0-d arrays, np.add (Python loop)",
                median_seconds(python_loop(np.add, np.array(one), n), repeats)),
        ]
        if torch is not None:
            t = torch.tensor(1.0)
            with torch.no_grad():
                rows.append(Row("PyTorch 0-d tensors, eager (Python loop)",
                                median_seconds(python_loop(lambda a, b: a + b, t, n), repeats)))
        else:
            rows.append(Row("PyTorch", None, "not installed"))
        rows.append(Row("paper's executor (null ops, reference)", n / PAPER_NULL_OPS_PER_SECOND,
                        "OSDI'16 figure, not measured here"))

        eg, ex, ey = empty_graph()
        empty_c = fl.Session(graph=eg, backend="c")
        empty_i = fl.Session(graph=eg, backend="interpreter")
        empty_artifact = compile_step(eg, ex, ey, tmp)[0]
        empty_c.run(ey, {ex: one})
        empty_rows = [
            Row("flowc compiled C (Session.run)",
                median_seconds(lambda: empty_c.run(ey, {ex: one}), repeats * 50)),
            Row("flowc compiled C (runtime Artifact.run)",
                median_seconds(lambda: empty_artifact.run({"x": one}), repeats * 50)),
            Row("flowc interpreter (Session.run)",
                median_seconds(lambda: empty_i.run(ey, {ex: one}), repeats * 50)),
        ]

        devices = args.devices
        print(f"compiling {devices} chains on {devices} devices ...", file=sys.stderr, flush=True)
        pg, px, py = parallel_chains_graph(n, devices)
        config = fl.ConfigProto(device_count={"CPU": devices})
        per_device = fl.Session(graph=pg, config=config, options=NO_FUSION)
        got = per_device.run(py, {px: one})
        if got != np.float32(devices * (n // devices + 1)):
            raise SystemExit(f"{devices}-device chains computed {got}")
        executable = next(iter(per_device._steps.values()))
        multi_rows = [
            Row(f"flowc compiled C, {devices} devices (Session.run)",
                median_seconds(lambda: per_device.run(py, {px: one}), repeats)),
            Row("flowc compiled C, 1 device (Session.run, the chain above)", rows[0].seconds),
        ]

    print(environment_line(torch))
    print_table(f"{n} chained scalar AddV2 ops in one step ({nodes} nodes after passes; "
                f"median of {repeats} steps)", rows, baseline="numpy float32 scalars (Python loop)",
                unit="ms", work=n, work_unit="ops")
    print()
    print_table("empty step: one scalar feed, one fetch, no ops", empty_rows,
                baseline="flowc compiled C (Session.run)", unit="us")
    print()
    print_table(f"{n} AddV2 ops as {devices} chains on {devices} CPU devices "
                f"({len(getattr(executable, 'parts', [executable]))} device modules, "
                f"{devices - 1} Send/Recv pairs; median of {repeats} steps)", multi_rows,
                baseline=f"flowc compiled C, 1 device (Session.run, the chain above)", unit="ms",
                work=n, work_unit="ops")
    print()
    print(f"compile time of the {n}-op graph (cold cache): passes {pass_s:.2f} s, "
          f"C codegen + cc + artifact {build_s:.2f} s, total {pass_s + build_s:.2f} s")


if __name__ == "__main__":
    main()
