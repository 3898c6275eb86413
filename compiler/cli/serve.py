"""``flowc serve``: start one task of a cluster and serve until interrupted; ``flowc cluster
up``: start every task of a cluster spec on this machine, for development.

    flowc serve --cluster cluster.json --job worker --task 0 [--token T] [--bind HOST]
    flowc cluster up cluster.json [--token T | --insecure] [--token-file PATH]

Without ``--cluster`` the cluster and the task come from ``TF_CONFIG`` (TensorFlow's
convention: ``{"cluster": {...}, "task": {"type": "worker", "index": 0}}``), so tasks start
under any launcher. The server binds to 127.0.0.1 unless ``--bind`` says otherwise, requires
the token of ``--token`` (or ``FLOWC_TOKEN``) when one is set, and builds the partitions the
master registers with the compiler (``compiler.distributed.build_partition``). It refuses to
listen beyond loopback without a token unless ``--insecure`` says so.

``flowc cluster up`` makes a random token when none is given (``--insecure``: none), hands it
to its tasks in their environment (never on a command line, where other users could read it)
and prints it, or writes it to ``--token-file``, for the clients.
"""
from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys

from runtime.errors import FlowcError
from runtime.stream_guard import (DEFAULT_MAX_STREAMS, DEFAULT_MAX_STREAMS_PER_PEER,
                                  DEFAULT_STREAM_IDLE_TIMEOUT_S)
from compiler.options import setting


def add_serve_command(sub) -> None:
    p = sub.add_parser("serve", help="start a task of a cluster (a gRPC task server)",
                       description="Start task TASK of job JOB of a cluster and serve steps "
                       "from masters (fl.Session(target='grpc://host:port')) until interrupted. "
                       "The task hosts its CPU and the GPUs this process can use (pycuda and "
                       "a CUDA GPU, or FLOWC_CUDA_SIMULATOR=N simulated ones).")
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
                   help="largest single message accepted or sent; larger requests and "
                        "responses travel as streams of chunks (default: 256)")
    p.add_argument("--max-tensor-mb", metavar="MB", type=int, default=16384,
                   help="largest single tensor accepted or sent (default: 16384)")
    p.add_argument("--insecure", action="store_true",
                   help="allow --bind beyond loopback without a token (anyone who reaches the "
                        "task can run steps on it)")
    p.add_argument("--max-streams", metavar="N", type=_positive_int,
                   default=DEFAULT_MAX_STREAMS,
                   help="streams (large requests and responses) open at once; more are refused "
                        f"at once, so other calls always find a thread (default: "
                        f"{DEFAULT_MAX_STREAMS})")
    p.add_argument("--max-streams-per-peer", metavar="N", type=_positive_int,
                   default=DEFAULT_MAX_STREAMS_PER_PEER,
                   help="streams open at once from one calling host (default: "
                        f"{DEFAULT_MAX_STREAMS_PER_PEER})")
    p.add_argument("--stream-idle-timeout", metavar="S", type=_positive_float,
                   default=DEFAULT_STREAM_IDLE_TIMEOUT_S,
                   help="seconds a stream may send nothing before it is ended (default: "
                        f"{DEFAULT_STREAM_IDLE_TIMEOUT_S:g})")
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser("cluster", help="start every task of a cluster on this machine",
                       description="'flowc cluster up FILE.json' starts one 'flowc serve' process "
                       "per task of the cluster spec, waits until each answers, prints the "
                       "targets, and stops them all on Ctrl-C or SIGTERM (or when one dies).")
    p.add_argument("action", choices=("up",), help="'up': start the cluster")
    p.add_argument("cluster", metavar="FILE.json", help="cluster spec")
    p.add_argument("--token", metavar="T", default=None,
                   help="shared token every task requires (default: FLOWC_TOKEN, if set, "
                        "else a random one, printed for the clients)")
    p.add_argument("--insecure", action="store_true",
                   help="no token: any local user can run steps on the tasks")
    p.add_argument("--token-file", metavar="PATH", default=None,
                   help="write the token to PATH (readable by you alone) instead of printing "
                        "it; clients: FLOWC_TOKEN=$(cat PATH)")
    p.add_argument("--start-timeout", metavar="S", type=float, default=60.0,
                   help="seconds to wait for each task to answer (default: 60)")
    p.set_defaults(handler=cmd_cluster)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {text})")
    return value


def cluster_token(args: argparse.Namespace) -> tuple:
    """(token, made): ``--token``, else ``FLOWC_TOKEN``, else a new random one (``made``);
    ``(None, False)`` with ``--insecure`` and neither given."""
    given = args.token if args.token is not None else setting("FLOWC_TOKEN") or None
    if given or args.insecure:
        return given, False
    return secrets.token_urlsafe(32), True


def write_token_file(path: str, token: str) -> None:
    """The token in a new file only its owner can read (an existing file is replaced)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(tmp, path)


def cmd_cluster(args: argparse.Namespace) -> int:
    """Start every task of the cluster as a child process; tear them all down together."""
    import subprocess
    import time
    from runtime.cluster import ClusterSpec
    from runtime.transport import TaskClient

    cluster = ClusterSpec.load(args.cluster)
    token, made = cluster_token(args)
    if token and args.token_file:
        write_token_file(args.token_file, token)
    env = dict(os.environ)                 # the token goes to the tasks in their environment
    env.pop("FLOWC_TOKEN", None)
    if token:
        env["FLOWC_TOKEN"] = token
    procs = {}

    def stop_all() -> None:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        for job, addresses in sorted(cluster.jobs.items()):
            for task in range(len(addresses)):
                cmd = [sys.executable, "-m", "compiler.cli", "serve", "--cluster", args.cluster,
                       "--job", job, "--task", str(task)]
                procs[(job, task)] = subprocess.Popen(cmd, env=env)
        for (job, task), proc in procs.items():
            address = cluster.jobs[job][task]
            deadline = time.monotonic() + args.start_timeout
            while True:
                if proc.poll() is not None:
                    raise FlowcError(f"/job:{job}/task:{task} at {address} exited with status "
                                     f"{proc.returncode} while starting")
                client = TaskClient(address, token=token)
                try:
                    client.call("Status", {}, timeout=2)
                    client.close()
                    break
                except FlowcError:
                    client.close()
                    if time.monotonic() > deadline:
                        raise FlowcError(f"/job:{job}/task:{task} at {address} did not answer "
                                         f"within {args.start_timeout:g} s") from None
                    time.sleep(0.2)
        targets = ", ".join(f"grpc://{a}" for a in cluster.jobs.get("worker", ())) or \
            ", ".join(f"grpc://{a}" for addrs in cluster.jobs.values() for a in addrs)
        print(f"flowc: cluster up: {len(procs)} tasks; targets: {targets}", flush=True)
        if token and args.token_file:
            print(f"flowc: clients need the token: FLOWC_TOKEN=$(cat {args.token_file})",
                  flush=True)
        elif made:
            print(f"flowc: clients need the token: export FLOWC_TOKEN={token}", flush=True)
        elif not token:
            print("flowc: no token (--insecure): any local user can run steps on these tasks",
                  file=sys.stderr, flush=True)
        while all(proc.poll() is None for proc in procs.values()):
            time.sleep(0.5)
        dead = [f"/job:{j}/task:{t}" for (j, t), proc in procs.items() if proc.poll() is not None]
        raise FlowcError(f"task {', '.join(dead)} exited; stopping the cluster")
    except KeyboardInterrupt:
        print("flowc: stopping the cluster", file=sys.stderr, flush=True)
        return 0
    finally:
        stop_all()


def cmd_serve(args: argparse.Namespace) -> int:
    from compiler.distributed import build_partition
    from runtime.cluster import ClusterSpec, ClusterSpecError, parse_tf_config
    from runtime.server import TaskServer, is_loopback_host

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
    token = args.token if args.token is not None else setting("FLOWC_TOKEN") or None
    if args.insecure and not token and not is_loopback_host(args.bind):
        print(f"flowc: warning: serving on {args.bind} without a token (--insecure): any machine "
              "that reaches it can run steps on this task", file=sys.stderr, flush=True)
    server = TaskServer(cluster, job, task, build=build_partition, host=args.bind, token=token,
                        max_message_bytes=args.max_message_mb * 1024 * 1024,
                        max_tensor_bytes=args.max_tensor_mb * 1024 * 1024,
                        max_streams=args.max_streams,
                        max_streams_per_peer=args.max_streams_per_peer,
                        stream_idle_timeout_s=args.stream_idle_timeout,
                        insecure=args.insecure).start()
    gpus = [d.rsplit("/", 1)[-1] for d in server.devices if "/device:GPU:" in d]
    print(f"flowc: serving {server.name} on {server.bound}"
          + (f", with {', '.join(gpus)}" if gpus else "")
          + (" (token required)" if token else ""), file=sys.stderr, flush=True)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server.wait()
    except KeyboardInterrupt:
        server.stop()
    return 0


__all__ = ["add_serve_command", "cmd_serve", "cmd_cluster", "FlowcError"]
