"""Null training steps on a loopback cluster (the paper's Figure 6): step time against workers.

    python3 examples/benchmarks/bench_null_step.py [--quick] [--workers 1,2,4,8]
                                                   [--models scalar,sparse,dense] [--mb MB]
                                                   [--hosts N]

With ``--hosts N`` (root, Linux; ``tests/netns_fixture.py``) the tasks run in N network
namespaces joined by a bridge, each a host with its own address (the tasks round the hosts,
up to 16 tasks), with a token, instead of on loopback.

Starts ``flowc serve`` tasks on this machine (``--ps`` parameter-server tasks and as many
worker tasks as the largest worker count), then, for each model and each worker count W, W
client processes, one per worker task, step concurrently; each step does no training, only
the communication of one:

- ``scalar``: the worker reads a scalar variable from the PS and returns one scalar.
- ``sparse``: the client feeds 32 random ids; the PS gathers those rows of a ``--rows`` x 64
  float32 table (default 1,000,000 x 64, 256 MB) and the worker sums them.
- ``dense``: the worker fetches every variable of a ``--mb`` MB model (split into variables
  of at most 16 MB, round-robin over the PS tasks) and sums them. The paper's model is
  100 MB; the default here is 16 MB because eight workers each pulling 100 MB per step
  saturate a small machine (``--mb 100`` runs the paper's size).

Prints, per model and worker count, the median and 10th/90th percentile of the step times
of all workers (milliseconds), the cluster's steps per second, and the bytes one step moved
(KB/step: the RunStep and RecvTensor frames counted by the tasks' traffic counters, warm-up
steps included). Times are wall-clock on a
loopback network: every process shares this machine's cores. ``--quick`` runs fewer steps
on smaller models.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import sys
import tempfile
import time
from typing import Dict, List

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from bench_cluster import LocalCluster  # noqa: E402

MAX_VARIABLE_MB = 16
START_TIMEOUT_S = 120.0
EMBEDDING_DIM = 64
LOOKUP_IDS = 32


# --- the models -------------------------------------------------------------------------------
def build_model(model: str, worker: int, params: dict):
    """(fetch, feed function, initializer) of ``model`` with its computation on ``worker``."""
    import dsl as fl
    ps = params["ps"]
    on_worker = f"/job:worker/task:{worker}"
    if model == "scalar":
        with fl.device("/job:ps/task:0"):
            v = fl.Variable(fl.random_uniform([]), name="scalar")
        with fl.device(on_worker):
            fetch = v.read_value() * 2.0
        return fetch, (lambda rng: None), fl.global_variables_initializer()
    if model == "sparse":
        rows = params["rows"]
        with fl.device("/job:ps/task:0"):
            table = fl.Variable(fl.random_uniform([rows, EMBEDDING_DIM]), name="table")
        with fl.device(on_worker):
            ids = fl.placeholder(fl.int64, [LOOKUP_IDS], name="ids")
            fetch = fl.reduce_sum(fl.nn.embedding_lookup(table, ids))
        return fetch, (lambda rng: {ids: rng.integers(0, rows, LOOKUP_IDS)}), \
            fl.global_variables_initializer()
    if model == "dense":
        total = int(params["mb"] * 2 ** 20) // 4
        per = MAX_VARIABLE_MB * 2 ** 20 // 4
        sizes = [min(per, total - start) for start in range(0, total, per)]
        parts = []
        for k, n in enumerate(sizes):
            with fl.device(f"/job:ps/task:{k % ps}"):
                parts.append(fl.Variable(fl.random_uniform([n]), name=f"dense_{k}"))
        with fl.device(on_worker):
            fetch = fl.add_n([fl.reduce_sum(p.read_value()) for p in parts])
        return fetch, (lambda rng: None), fl.global_variables_initializer()
    raise ValueError(f"unknown model {model!r}")


def initialize(model: str, target: str, params: dict, token=None) -> None:
    import dsl as fl
    with fl.Graph().as_default():
        _, _, init = build_model(model, 0, params)
        with fl.Session(target, token=token) as sess:
            sess.run(init)


def client(model: str, target: str, worker: int, params: dict, steps: int, warmup: int,
           barrier, results, token=None) -> None:
    """One worker's client: warm up (compiles), wait for the others, time ``steps`` steps."""
    try:
        import dsl as fl
        rng = np.random.default_rng(worker)
        with fl.Graph().as_default():
            fetch, feed, _ = build_model(model, worker, params)
            with fl.Session(target, token=token) as sess:
                for _ in range(warmup):
                    sess.run(fetch, feed(rng))
                barrier.wait(timeout=START_TIMEOUT_S * 4)
                times = []
                for _ in range(steps):
                    t0 = time.perf_counter()
                    sess.run(fetch, feed(rng))
                    times.append(time.perf_counter() - t0)
        results.put((worker, times, None))
    except BaseException as e:                   # noqa: BLE001  (reported to the parent)
        results.put((worker, [], f"{type(e).__name__}: {e}"))


def measure(cluster: LocalCluster, model: str, workers: int, params: dict, steps: int,
            warmup: int) -> Dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=client, args=(model, cluster.target(k), k, params, steps,
                                              warmup, barrier, results, cluster.token))
             for k in range(workers)]
    before = cluster.step_bytes()
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=START_TIMEOUT_S * 4)          # every client has warmed up
        t0 = time.perf_counter()
        gathered: List[float] = []
        for _ in range(workers):
            _, times, error = results.get(timeout=START_TIMEOUT_S * 4)
            if error:
                raise RuntimeError(f"a {model} client failed: {error}")
            gathered.extend(times)
        wall = time.perf_counter() - t0
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    ms = np.array(gathered) * 1000
    moved = (cluster.step_bytes() - before) / (workers * (steps + warmup))
    return {"median": float(np.median(ms)), "p10": float(np.percentile(ms, 10)),
            "p90": float(np.percentile(ms, 90)), "steps_per_s": len(ms) / wall,
            "bytes_per_step": moved}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, smaller models")
    parser.add_argument("--workers", default="1,2,4,8", help="worker counts (default 1,2,4,8)")
    parser.add_argument("--models", default="scalar,sparse,dense")
    parser.add_argument("--ps", type=int, default=1, help="parameter-server tasks (default 1)")
    parser.add_argument("--mb", type=float, default=None,
                        help="dense model size in MB (default 16; 4 with --quick)")
    parser.add_argument("--rows", type=int, default=None,
                        help="sparse table rows (default 1,000,000; 100,000 with --quick)")
    parser.add_argument("--steps", type=int, default=None,
                        help="timed steps per worker (default 100; 20 with --quick)")
    parser.add_argument("--hosts", type=int, default=0,
                        help="run the tasks in N network namespaces of their own addresses "
                             "(needs root and iproute2; default: loopback)")
    args = parser.parse_args()
    worker_counts = [int(w) for w in args.workers.split(",")]
    models = args.models.split(",")
    params = {"ps": args.ps,
              "mb": args.mb if args.mb is not None else (4.0 if args.quick else 16.0),
              "rows": args.rows or (100_000 if args.quick else 1_000_000)}
    steps = args.steps or (20 if args.quick else 100)
    warmup = 3
    if args.ps + max(worker_counts) > 16 and args.hosts:
        parser.error("--hosts runs at most 16 tasks")
    where = f"{args.hosts} hosts (network namespaces)" if args.hosts else "loopback"
    print(f"null steps on {where}: {args.ps} ps task(s), workers {worker_counts}, "
          f"{steps} timed steps per worker, dense {params['mb']:g} MB, sparse table "
          f"{params['rows']}x{EMBEDDING_DIM}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="flowc-null-step-") as folder:
        hosts = None
        if args.hosts:
            sys.path.insert(0, os.path.join(ROOT, "tests"))
            from netns_fixture import Hosts, netns_unavailable
            why = netns_unavailable()
            if why:
                parser.error(f"--hosts: {why}")
            hosts = Hosts(args.hosts)
        try:
            cluster = LocalCluster({"ps": args.ps, "worker": max(worker_counts)}, folder,
                                   hosts=hosts, token=secrets.token_urlsafe(16) if hosts else None)
            try:
                print(f"{'model':<8} {'workers':>7} {'median ms':>10} {'p10 ms':>8} "
                      f"{'p90 ms':>8} {'steps/s':>9} {'KB/step':>10}")
                for model in models:
                    initialize(model, cluster.target(0), params, cluster.token)
                    for w in worker_counts:
                        r = measure(cluster, model, w, params, steps, warmup)
                        print(f"{model:<8} {w:>7} {r['median']:>10.2f} {r['p10']:>8.2f} "
                              f"{r['p90']:>8.2f} {r['steps_per_s']:>9.1f} "
                              f"{r['bytes_per_step'] / 1024:>10.1f}", flush=True)
            finally:
                cluster.stop()
        finally:
            if hosts is not None:
                hosts.close()


if __name__ == "__main__":
    main()
