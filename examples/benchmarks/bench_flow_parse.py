"""Front-end speed of the text DSL: parse and build a generated 5,000-line ``*.flow`` model.

    python3 examples/benchmarks/bench_flow_parse.py [--lines N] [--repeats N] [--profile]

The model is a stack of residual MLP blocks written the way a person would: helper functions
(dense layers, a residual block with layer norm), one ``name_scope`` per block with seeded
``init.*`` weights, and a few ``let``s per block. Each run parses the text and builds the graph
into a fresh ``Graph`` (``dsl.flow.build_flow``); the median of the runs is reported, in wall-clock
and CPU time (on a shared machine the CPU time is the steadier figure, and the best CPU time
the least disturbed). With
``--profile`` one more run is profiled and the top functions by cumulative time are printed.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import statistics
import sys
import time
from typing import List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from dsl.flow import build_flow  # noqa: E402
from dsl.flow.errors import Source  # noqa: E402
from dsl.flow.parser import parse_text  # noqa: E402

WIDTH = 32

HEADER = f'''# A generated residual MLP, for timing the .flow front end.

def dense(x, w, b) {{
  return nn.bias_add(x @ w, b)
}}

def dense_relu(x, w, b) {{
  let h = dense(x, w, b)
  return nn.relu(h)
}}

def layer_norm(x, eps) {{
  let mean = reduce_mean(x, axis=1, keepdims=true)
  let centered = x - mean
  let variance = reduce_mean(centered * centered, axis=1, keepdims=true)
  return centered / sqrt(variance + eps)
}}

def residual(x, w1, b1, w2, b2) {{
  let h = dense_relu(x, w1, b1)
  let y = dense(h, w2, b2)
  return layer_norm(x + y, 1e-5)
}}

input x: f32[?, {WIDTH}]
let h0 = x
'''


def block(i: int) -> str:
    """One residual block (names carry the block number: blocks do not open a scope)."""
    s = 4 * i
    return f'''
# block {i}
name_scope "block{i}" {{
  let w1_{i} = init.he_normal([{WIDTH}, {WIDTH}], seed={s + 1}, name="w1")
  let b1_{i} = init.zeros([{WIDTH}], name="b1")
  let w2_{i} = init.glorot_uniform([{WIDTH}, {WIDTH}], seed={s + 2}, name="w2")
  let b2_{i} = init.normal([{WIDTH}], stddev=0.01,
                       seed={s + 3}, name="b2")
  let r{i} = residual(h{i - 1}, w1_{i}, b1_{i}, w2_{i}, b2_{i})
  let gate{i} = sigmoid(reduce_sum(r{i} * 0.5, axis=1, keepdims=true))
  let h{i} = r{i} * gate{i} + h{i - 1} * (1.0 - gate{i})
}}
'''


def footer(n: int) -> str:
    return f'''
output logits = h{n} @ init.glorot_uniform([{WIDTH}, 10], seed=0, name="head")
output probs = nn.softmax(logits)
output predictions = argmax(probs, axis=1)
'''


def generate(lines: int) -> str:
    """A model of about ``lines`` lines (never fewer)."""
    parts: List[str] = [HEADER]
    total, i = HEADER.count("\n") + footer(0).count("\n"), 0
    while total < lines:
        i += 1
        parts.append(block(i))
        total += parts[-1].count("\n")
    parts.append(footer(i))
    return "".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=5000, help="model size in lines (default 5000)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs; the median is reported")
    ap.add_argument("--profile", action="store_true", help="profile one more run")
    args = ap.parse_args()
    text = generate(args.lines)
    build_flow(text, "bench.flow")                      # warm up: grammar load, imports
    times, cpu_times, parse_times, nodes = [], [], [], 0
    for _ in range(args.repeats):
        gc.collect()                  # the last run's garbage is not this run's cost
        start = time.perf_counter()
        parse_text(Source(text, "bench.flow"))
        parse_times.append(time.perf_counter() - start)
        gc.collect()
        start, cpu_start = time.perf_counter(), time.process_time()
        program = build_flow(text, "bench.flow")
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
        nodes = len(program.graph)
        del program
    median, parse = statistics.median(times), statistics.median(parse_times)
    n_lines = text.count("\n")
    print(f"{n_lines} lines, {nodes} nodes: parse + build {median * 1000:.1f} ms "
          f"(median of {args.repeats}; {n_lines / median:,.0f} lines/s; CPU time "
          f"{statistics.median(cpu_times) * 1000:.1f} ms, best {min(cpu_times) * 1000:.1f} ms), "
          f"of which parsing alone {parse * 1000:.1f} ms")
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(build_flow, text, "bench.flow")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
