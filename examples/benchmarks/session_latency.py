"""Session.run latency of tiny compiled steps: the Python overhead of the run path.

    python3 examples/benchmarks/session_latency.py [--runs N] [--profile]

Prints the best per-run CPU time over 20 rounds (CPU time, so other load on the machine
disturbs it less), for: one feed and one fetch, a target with no feeds, a constant fetch, and
a list of three fetches; then the same one-feed and no-feed steps through
``Session.make_callable`` (the precompiled fast path). ``--profile`` adds a cProfile of the
one-feed case.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import dsl as fl  # noqa: E402


def best_per_run(fn, runs: int, rounds: int = 20) -> float:
    per_round = max(runs // rounds, 1)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(per_round):
            fn()
        best = min(best, (time.process_time() - t0) / per_round)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [3], name="x")
        y = x * 2.0
        noop = fl.raw_ops.NoOp()
        c = fl.constant(1.5)
    sess = fl.Session(graph=g)
    feed = {x: np.ones(3, np.float32)}
    cases = {"feed1_fetch1": (y, feed), "no_feeds_target": (noop, None),
             "no_feeds_const": (c, None), "fetch_list3": ([y, y, c], feed)}
    for name, (fetches, feed_dict) in cases.items():
        sess.run(fetches, feed_dict)                   # compile outside the timing
        us = best_per_run(lambda: sess.run(fetches, feed_dict), args.runs) * 1e6
        print(f"{name:18s} {us:8.2f} us/run")
    # the precompiled fast path for a fixed feed/fetch signature (TF's make_callable)
    value = feed[x]
    callables = {"callable_feed1_fetch1": (sess.make_callable(y, [x]), (value,)),
                 "callable_no_feeds": (sess.make_callable(noop), ())}
    for name, (fn, values) in callables.items():
        us = best_per_run(lambda: fn(*values), args.runs) * 1e6
        print(f"{name:18s} {us:8.2f} us/run")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.runs):
            sess.run(y, feed)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
