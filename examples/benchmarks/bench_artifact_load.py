"""Artifact size and load time for a step with big constants: eight 1024x1024 f32 weights
(32 MiB) in a chain of MatMul + Relu, written by ``write_artifact`` into a temporary folder,
then loaded by ``runtime.load_artifact`` in fresh Python processes (each hashes the artifact's
files, maps the constants' blobs and opens the module) and run once.

    python3 examples/benchmarks/bench_artifact_load.py [--runs N] [--layers L]

Prints the artifact's bytes against its constants' bytes (each constant is stored once, so
about 1x) and the median load and first-run times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)             # this checkout's flowc, here and in the load processes
N = 1024

LOAD = r'''
import sys, time
import numpy as np
from runtime.artifact import load_artifact
x = np.ones((4, %d), np.float32)
t0 = time.perf_counter()
art = load_artifact(sys.argv[1])
t1 = time.perf_counter()
art.run({"x": x})
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
''' % N


def write(out: str, layers: int) -> int:
    """Write the artifact; the bytes of its constants."""
    import dsl as fl
    from compiler.step import make_step_graph, optimize, write_artifact
    rng = np.random.RandomState(0)
    g = fl.Graph("consts")
    with g.as_default():
        x = fl.placeholder(fl.f32, [4, N], name="x")
        h = x
        for i in range(layers):
            w = fl.constant((rng.randn(N, N) / 32).astype(np.float32), name=f"w{i}")
            h = fl.nn.relu(fl.matmul(h, w))
        y = fl.identity(h, name="y")
    step = make_step_graph(g, [x.output], [y.output])
    optimize(step)
    write_artifact(step, out)
    return layers * N * N * 4


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--layers", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "art")
        t = time.perf_counter()
        constants = write(out, args.layers)
        compile_s = time.perf_counter() - t
        sizes = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out))}
        total = sum(sizes.values())
        print(f"write_artifact: {compile_s:.2f} s")
        print(f"artifact: {total} bytes for {constants} bytes of constants "
              f"({total / constants:.2f}x); module {sizes['cpu_0.so']} bytes")
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        loads, runs = [], []
        for _ in range(args.runs):
            r = subprocess.run([sys.executable, "-c", LOAD, out], capture_output=True, text=True,
                               check=True, env=env, cwd=ROOT)
            load_s, run_s = map(float, r.stdout.split())
            loads.append(load_s)
            runs.append(run_s)
        print(f"load_artifact: median {statistics.median(loads) * 1e3:.1f} ms, first run "
              f"{statistics.median(runs) * 1e3:.1f} ms ({args.runs} fresh processes)")


if __name__ == "__main__":
    main()
