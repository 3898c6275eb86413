"""``flowc serve``: start one task of a cluster and serve until interrupted.

    flowc serve --cluster cluster.json --job worker --task 0 [--token T] [--bind HOST]

Without ``--cluster`` the cluster and the task come from ``TF_CONFIG`` (TensorFlow's
convention: ``{"cluster": {...}, "task": {"type": "worker", "index": 0}}``), so tasks start
under any launcher. The server binds to 127.0.0.1 unless ``--bind`` says otherwise, requires
the token of ``--token`` (or ``FLOWC_TOKEN``) when one is set, and builds the partitions the
master registers with the compiler (``compiler.distributed.build_partition``).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys

from runtime.errors import FlowcError


def add_serve_command(sub) -> None:
    p = sub.add_parser("serve", help="start a task of a cluster (a gRPC task server)",
                       description="Start task TASK of job JOB of a cluster and serve steps "
                       "from masters (fl.Session(target='grpc://host:port')) until interrupted.")
    p.add_argument("--cluster", metavar="FILE.json",
                   help='cluster spec, e.g. {"ps": ["localhost:2222"], "worker": '
                        '["localhost:2223"]} (default: TF_CONFIG\'s "cluster")')
    p.add_argument("--job", metavar="JOB", help="this task's job (default: TF_CONFIG's task type)")
    p.add_argument("--task", metavar="N", type=int, help="this task's index in its job "
                   "(default: TF_CONFIG's task index, else 0)")
    p.add_argument("--token", metavar="T", default=None,
                   help="require this shared token from clients (default: FLOWC_TOKEN, if set)")
    p.add_argument("--bind", metavar="HOST", default="127.0.0.1",
                   help="interface to listen on (default: 127.0.0.1; 0.0.0.0 for every one)")
    p.add_argument("--max-message-mb", metavar="MB", type=int, default=256,
                   help="largest request or response accepted (default: 256)")
    p.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from compiler.distributed import build_partition
    from runtime.cluster import ClusterSpec, ClusterSpecError, parse_tf_config
    from runtime.server import TaskServer

    job, task = args.job, args.task
    if args.cluster:
        cluster = ClusterSpec.load(args.cluster)
    elif os.environ.get("TF_CONFIG"):
        cluster, tf_job, tf_task = parse_tf_config(os.environ["TF_CONFIG"])
        job = job or tf_job
        task = tf_task if task is None else task
    else:
        raise ClusterSpecError("no cluster: pass --cluster FILE.json or set TF_CONFIG")
    if not job:
        raise ClusterSpecError("which job is this task? pass --job (or set TF_CONFIG's task)")
    task = 0 if task is None else task
    token = args.token if args.token is not None else os.environ.get("FLOWC_TOKEN") or None
    server = TaskServer(cluster, job, task, build=build_partition, host=args.bind, token=token,
                        max_message_bytes=args.max_message_mb * 1024 * 1024).start()
    print(f"flowc: serving {server.name} on {server.bound}"
          + (" (token required)" if token else ""), file=sys.stderr, flush=True)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.wait()
    except KeyboardInterrupt:
        server.stop()
    return 0


__all__ = ["add_serve_command", "cmd_serve", "FlowcError"]
