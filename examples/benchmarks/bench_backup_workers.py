"""The paper's Figure 8 on loopback: synchronous replicas with backup workers.

One parameter-server task and ``n`` worker tasks (``flowc serve`` processes on this machine)
train a 784-256-10 perceptron with ``fl.train.SyncReplicasOptimizer``. Before each step, each
worker is a straggler with probability ``--straggler-prob``: it sleeps ``--straggler-delay``
seconds (a stand-in for the slow machines of a shared cluster). For m = n, n-1, ..., n-k the
chief aggregates the first m gradients of each step and drops the other n-m (the backup
workers'). The table gives, per m, the median and 90th-percentile time between the chief's
updates, the speedup of the median over m = n, and the normalized speedup (speedup x m/n: the
gradients a step uses shrink with m, which is how the paper normalizes), with the dropped and
stale gradient counts the optimizer reports.

    python3 examples/benchmarks/bench_backup_workers.py [--workers 4] [--backups 2] [--quick]

Every configuration runs on the same tasks with its own variables, accumulators and queues.
Numbers from a shared, small machine are rough: the workers share its cores.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from typing import Dict, List

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import dsl as fl  # noqa: E402
from bench_cluster import LocalCluster  # noqa: E402

STOP_ERRORS = (fl.OutOfRangeError, fl.AbortedError)
VARIABLES = 4                      # w1, b1, w2, b2


def build_replica(k: int, n: int, m: int, batch: int, seed: int) -> Dict:
    """Replica k of configuration m: an MLP on the PS task, its gradients on worker k."""
    scope = f"m{m}"
    with fl.device("/job:ps/task:0"):
        w1 = fl.Variable(fl.glorot_uniform_initializer(seed=seed), shape=[784, 256],
                         name=f"{scope}/w1")
        b1 = fl.Variable(np.zeros([256], np.float32), name=f"{scope}/b1")
        w2 = fl.Variable(fl.glorot_uniform_initializer(seed=seed + 1), shape=[256, 10],
                         name=f"{scope}/w2")
        b2 = fl.Variable(np.zeros([10], np.float32), name=f"{scope}/b2")
        step = fl.Variable(np.int64(0), trainable=False, name=f"{scope}/global_step")
    with fl.device(f"/job:worker/task:{k}"):
        x = fl.placeholder(fl.float32, [batch, 784], name="x")
        y = fl.placeholder(fl.int32, [batch], name="y")
        h = fl.nn.relu(fl.matmul(x, w1) + b1)
        logits = fl.matmul(h, w2) + b2
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                            logits=logits))
        opt = fl.train.SyncReplicasOptimizer(fl.train.GradientDescentOptimizer(0.05), m, n,
                                             replica_id=k, name=f"sync_{scope}")
        train = opt.minimize(loss, global_step=step)
    data_rng = np.random.default_rng(seed + 1 + k)
    feed = {x: data_rng.random((batch, 784), dtype=np.float32),
            y: data_rng.integers(0, 10, batch).astype(np.int32)}
    return dict(opt=opt, train=train, feed=feed, step=step,
                init=fl.variables_initializer([w1, b1, w2, b2, step]))


def run_config(cluster: LocalCluster, n: int, m: int, args) -> Dict:
    reps, sessions = [], []
    for k in range(n):
        g = fl.Graph()
        with g.as_default():
            reps.append(build_replica(k, n, m, args.batch, args.seed))
        sessions.append(fl.Session(cluster.target(k), graph=g))
    chief, opt = sessions[0], reps[0]["opt"]
    chief.run(reps[0]["init"])
    for r, s in zip(reps, sessions):
        s.run(r["opt"].local_step_init_op)
    chief.run(opt.chief_init_op)
    stamps: List[float] = []
    stop = threading.Event()
    errors: List[BaseException] = []

    def chief_loop():
        try:
            while not stop.is_set():
                chief.run(opt.sync_op)
                stamps.append(time.perf_counter())
        except STOP_ERRORS:
            pass
        except BaseException as e:                    # noqa: BLE001  (reported below)
            errors.append(e)

    def worker_loop(k: int):
        rng = np.random.default_rng(args.seed + 100 * m + k)
        r = reps[k]
        try:
            while not stop.is_set():
                if rng.random() < args.straggler_prob:
                    time.sleep(args.straggler_delay)
                sessions[k].run(r["train"], r["feed"])
        except STOP_ERRORS:
            pass
        except BaseException as e:                    # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=chief_loop, daemon=True)]
    threads += [threading.Thread(target=worker_loop, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    need = args.warmup + args.steps + 1
    deadline = time.monotonic() + args.timeout
    while len(stamps) < need and not errors and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    chief.run(opt.end_of_input_op)                    # everyone waiting ends
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    if len(stamps) < need:
        raise RuntimeError(f"m={m}: only {len(stamps)} steps in {args.timeout} s")
    dropped, stale = chief.run([opt.num_dropped_gradients, opt.num_stale_gradients])
    for s in sessions:
        s.close()
    gaps = np.diff(np.array(stamps[args.warmup:need])) * 1000.0
    # The counts are summed over the model's variables (one accumulator each): per gradient.
    return dict(m=m, median=float(np.median(gaps)), p90=float(np.percentile(gaps, 90)),
                dropped=int(dropped) / VARIABLES, stale=int(stale) / VARIABLES,
                steps=len(stamps))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=4, help="n, the replicas (default 4)")
    p.add_argument("--backups", type=int, default=2, help="k: m goes from n down to n-k")
    p.add_argument("--steps", type=int, default=40, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--straggler-prob", type=float, default=0.2)
    p.add_argument("--straggler-delay", type=float, default=1.0, help="seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per configuration")
    p.add_argument("--quick", action="store_true", help="15 timed steps, 3 warm-up steps")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.warmup = 15, 3
    n = args.workers
    if not 0 <= args.backups < n:
        p.error("--backups must be in [0, workers)")
    with tempfile.TemporaryDirectory() as folder:
        cluster = LocalCluster({"ps": 1, "worker": n}, folder)
        try:
            rows = [run_config(cluster, n, m, args) for m in range(n, n - args.backups - 1, -1)]
        finally:
            cluster.stop()
    base = rows[0]["median"]
    print(f"SyncReplicasOptimizer on loopback: 1 PS + {n} workers, MLP 784-256-10, batch "
          f"{args.batch}; each worker sleeps {args.straggler_delay * 1000:.0f} ms before a step "
          f"with probability {args.straggler_prob}; {args.steps} timed steps per row")
    print("| m (aggregated) | backup workers | median step ms | p90 step ms | speedup | "
          "normalized speedup (x m/n) | dropped | stale |")
    print("(dropped, stale: whole gradients, the accumulators' counts over the 4 variables / 4)")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        speedup = base / r["median"]
        print(f"| {r['m']} | {n - r['m']} | {r['median']:.1f} | {r['p90']:.1f} | {speedup:.2f} | "
              f"{speedup * r['m'] / n:.2f} | {r['dropped']:.1f} | {r['stale']:.1f} |")


if __name__ == "__main__":
    main()
