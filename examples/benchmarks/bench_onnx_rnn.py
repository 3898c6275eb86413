"""An ONNX LSTM/GRU/RNN node of static sequence length lowered two ways, unrolled and as a while
loop (``dsl/onnx/ops_rnn.py``): compile time and run time of each, side by side.

    python3 examples/benchmarks/bench_onnx_rnn.py [--op LSTM] [--steps 32] [--batch 4]
        [--input 32] [--hidden 64] [--bidirectional] [--rounds 25]

Both are compiled in this process after a warm-up compile (the first compile of a process
also loads the compiler), into a fresh cache, and checked to agree. Runs are timed in
interleaved rounds (a change of machine load falls on both); CPU time is printed beside wall
time because on a loaded machine a step's wall time is mostly waiting for a core. The result
sets ``MAX_UNROLLED_STEPS`` (the longest static sequence that is unrolled).
"""
from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

from bench_common import environment_line

import dsl as fl  # noqa: E402
from dsl.onnx import import_graph, ops_rnn  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def model(op: str, steps: int, batch: int, inp: int, hidden: int, dirs: int, rng):
    from onnx import TensorProto, helper, numpy_helper
    g = GATES[op]
    inits = [numpy_helper.from_array(rng.uniform(-0.2, 0.2, shape).astype(np.float32), name)
             for name, shape in (("W", (dirs, g * hidden, inp)), ("R", (dirs, g * hidden, hidden)),
                                 ("B", (dirs, 2 * g * hidden)))]
    node = helper.make_node(op, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=hidden,
                            direction="bidirectional" if dirs == 2 else "forward")
    graph = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, batch, inp])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [steps, dirs, batch, hidden]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [dirs, batch, hidden])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=sorted(GATES), default="LSTM")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--input", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--bidirectional", action="store_true")
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    os.environ["FLOWC_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_onnx_rnn_")
    atexit.register(shutil.rmtree, os.environ["FLOWC_CACHE_DIR"], True)
    rng = np.random.default_rng(0)
    dirs = 2 if args.bidirectional else 1
    onnx_model = model(args.op, args.steps, args.batch, args.input, args.hidden, dirs, rng)
    x = rng.standard_normal((args.steps, args.batch, args.input)).astype(np.float32)
    warm = fl.Graph("warm_up")
    with warm.as_default():
        p = fl.placeholder(fl.float32, [2, 3])
        y = fl.tanh(fl.matmul(p, fl.ones([3, 2])))
    with fl.Session(graph=warm) as s:
        s.run(y, {p: np.ones((2, 3), np.float32)})
    runs, compile_s = {}, {}
    saved = ops_rnn.MAX_UNROLLED_STEPS
    for mode, limit in (("unrolled", args.steps), ("while loop", -1)):
        ops_rnn.MAX_UNROLLED_STEPS = limit
        try:
            imp = import_graph(onnx_model, "rnn.onnx")
        finally:
            ops_rnn.MAX_UNROLLED_STEPS = saved
        sess = fl.Session(graph=imp.graph)
        fetch, feed = list(imp.outputs.values()), {imp.inputs["X"]: x}
        t0 = time.perf_counter()
        sess.run(fetch, feed)
        compile_s[mode] = time.perf_counter() - t0
        runs[mode] = (sess, fetch, feed)
    results = [s.run(f, d) for s, f, d in runs.values()]
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    wall = {m: [] for m in runs}
    cpu = {m: [] for m in runs}
    for _ in range(args.rounds):
        for mode, (sess, fetch, feed) in runs.items():
            w, c = time.perf_counter(), time.process_time()
            for _ in range(20):
                sess.run(fetch, feed)
            wall[mode].append((time.perf_counter() - w) / 20)
            cpu[mode].append((time.process_time() - c) / 20)
    print(environment_line())
    print(f"{args.op} steps={args.steps} batch={args.batch} input={args.input} "
          f"hidden={args.hidden} directions={dirs}; FLOWC_NUM_THREADS="
          f"{os.environ.get('FLOWC_NUM_THREADS', 'unset')}")
    print(f"{'':12s} {'compile':>9s} {'run (wall)':>12s} {'run (CPU)':>12s}")
    for mode in runs:
        print(f"{mode:12s} {compile_s[mode]:8.2f}s {statistics.median(wall[mode]) * 1e6:10.0f}us "
              f"{statistics.median(cpu[mode]) * 1e6:10.0f}us")


if __name__ == "__main__":
    main()
