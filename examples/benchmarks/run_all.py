"""Every performance benchmark in one run, printed as one table.

    python3 examples/benchmarks/run_all.py [--quick] [--only NAME[,NAME]] [--threads T]

Benchmarks (NAME): dispatch (10,000 scalar adds in one step with fusion off, and an empty
step), elementwise (relu(x*1.5+0.5)*sigmoid(x) on 16,777,216 float32 against a STREAM triad
measured here), matmul (float32 256^3 and 1024^3), mlp (784-256-256-10 SGD training step at
batches 1, 128 and 1024), cnn (28x28x1 CNN training step, batch 64), embedding (sparse SGD
step of a 1,000,000 x 64 table), compile (the MLP training step compiled into an empty cache,
and started again from the cache; goals 2 s and 50 ms), inference (ResNet-18-style and
MobileNetV2-style CNNs, a Transformer encoder and an LSTM imported from ONNX, batches 1 and 32,
one thread and all (or --threads), against onnxruntime; and each model's cold compile). Each
compares flowc's compiled C with the peers installed: numpy, PyTorch eager and torch.compile,
TensorFlow as a TF1 session, tf.function and tf.function with XLA, onnxruntime (JAX, when
installed, is listed, not measured). Every system does the same work, results are checked
before timing, and times are medians after warm-up; the ratios come from this run only.
--quick times fewer steps.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List

from bench_common import (NOT_INSTALLED, Frameworks, Result, add_threads_argument, apply_threads,
                          environment_line, installed, print_summary)

import bench_compile  # noqa: E402
import bench_dispatch  # noqa: E402
import bench_elementwise  # noqa: E402
import bench_embedding  # noqa: E402
import bench_inference  # noqa: E402
import bench_matmul  # noqa: E402
import bench_train_cnn  # noqa: E402
import bench_train_mlp  # noqa: E402

BENCHMARKS = {m.NAME: m for m in (bench_dispatch, bench_elementwise, bench_matmul,
                                  bench_train_mlp, bench_train_cnn, bench_embedding,
                                  bench_compile, bench_inference)}
UNMEASURED_PEERS = {"JAX": "jax"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short pass: fewer timed steps")
    parser.add_argument("--only", default=None,
                        help="comma-separated benchmarks: " + ", ".join(BENCHMARKS))
    add_threads_argument(parser)
    args = parser.parse_args()
    names = list(BENCHMARKS) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from "
                     + ", ".join(BENCHMARKS))
    apply_threads(args.threads)
    fw = Frameworks.load(args.threads)
    results: List[Result] = [
        Result("(all)", peer, None,
               note=NOT_INSTALLED if not installed(module) else "installed; no benchmark yet")
        for peer, module in UNMEASURED_PEERS.items()]
    started = time.perf_counter()
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        results += BENCHMARKS[name].measure(fw, quick=args.quick)
        print(f"  {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(environment_line(fw.torch, fw.tf))
    print_summary(results, f"flowc benchmarks ({'quick' if args.quick else 'full'} pass, "
                  f"{time.perf_counter() - started:.0f} s; medians after warm-up)")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
