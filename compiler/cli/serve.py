"""``flowc serve``: start one task of a cluster and serve until interrupted; ``flowc cluster
up``: start every task of a cluster spec on this machine, for development.

    flowc serve --cluster cluster.json --job worker --task 0 [--token T] [--bind HOST]
    flowc serve --from-slurm --jobs ps=1,worker=2 [--port-base 8888]    (under srun)
    flowc cluster up cluster.json [--token T | --insecure] [--token-file PATH]
    flowc cluster manifest --format slurm|tfjob --jobs ps=1,worker=2 [...]

Without ``--cluster`` the cluster and the task come from ``TF_CONFIG`` (TensorFlow's
convention: ``{"cluster": {...}, "task": {"type": "worker", "index": 0}}``), so tasks start
under any launcher (Kubeflow's TFJob operator sets it for each replica). With ``--from-slurm``
they come from Slurm's environment, as TensorFlow's ``SlurmClusterResolver`` resolves them
(``runtime/slurm.py``), the split into jobs from ``--jobs``. The server binds to 127.0.0.1
(under Slurm: 0.0.0.0, every interface of the node) unless ``--bind`` says otherwise, requires
the token of ``--token`` (or ``FLOWC_TOKEN``) when one is set, and builds the partitions the
master registers with the compiler (``compiler.distributed.build_partition``). It refuses to
listen beyond loopback without a token unless ``--insecure`` says so.

``flowc cluster up`` makes a random token when none is given (``--insecure``: none), hands it
to its tasks in their environment (never on a command line, where other users could read it)
and prints it, or writes it to ``--token-file``, for the clients.
"""
from __future__ import annotations

import argparse
import json
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
    p.add_argument("--bind", metavar="HOST", default=None,
                   help="interface to listen on (default: 127.0.0.1, with --from-slurm "
                        "0.0.0.0; 0.0.0.0 is every one)")
    slurm = p.add_argument_group("Slurm", "with --from-slurm the cluster, job and task come "
                                 "from the environment srun gives each task (SLURM_PROCID, "
                                 "SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST, "
                                 "SLURM_STEP_TASKS_PER_NODE), resolved as TensorFlow's "
                                 "SlurmClusterResolver does")
    slurm.add_argument("--from-slurm", action="store_true",
                       help="take the cluster, job and task from Slurm's environment")
    slurm.add_argument("--jobs", metavar="JOB=N,...", default=None,
                       help="how the step's tasks split into jobs, e.g. ps=1,worker=2; the "
                            "jobs take consecutive ranks in the order of their sorted names "
                            "(default: every task a worker)")
    slurm.add_argument("--port-base", metavar="PORT", type=int, default=None,
                       help="the first task of each node listens on PORT, the next on PORT+1, "
                            "... (default: 8888)")
    slurm.add_argument("--tasks-per-node", metavar="N", type=_positive_int, default=None,
                       help="tasks on each node (default: SLURM_STEP_TASKS_PER_NODE)")
    slurm.add_argument("--gpus-per-task", metavar="N", type=_positive_int, default=None,
                       help="give each task of a node its own N GPUs (CUDA_VISIBLE_DEVICES: "
                            "the node's k-th task gets GPUs k*N .. k*N+N-1; default: leave "
                            "CUDA_VISIBLE_DEVICES as it is)")
    slurm.add_argument("--gpus-per-node", metavar="N", type=_positive_int, default=None,
                       help="GPUs of each node, checked against --gpus-per-task")
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

    p = sub.add_parser("cluster", help="start a cluster here, or write what a cluster manager "
                       "needs to start one",
                       description="'flowc cluster up FILE.json' starts one 'flowc serve' process "
                       "per task of the cluster spec, waits until each answers, prints the "
                       "targets, and stops them all on Ctrl-C or SIGTERM (or when one dies). "
                       "'flowc cluster manifest --format tfjob|slurm' writes a Kubeflow TFJob or "
                       "an sbatch script that starts the tasks of --jobs (or of FILE.json's "
                       "jobs) on a Kubernetes or Slurm cluster. 'flowc cluster spec "
                       "--from-slurm --jobs ...' prints the cluster a Slurm allocation's tasks "
                       "make (in a batch script). See docs/distributed.md.",
                       intermixed=True)
    p.add_argument("action", choices=("up", "manifest", "spec", "wait"),
                   help="'up': start the cluster; 'manifest': write a TFJob or sbatch script; "
                        "'spec': print the cluster resolved from Slurm's environment; 'wait': "
                        "wait until the task grpc://HOST:PORT and every task of its cluster "
                        "answer (--start-timeout)")
    p.add_argument("cluster", metavar="FILE.json", nargs="?",
                   help="cluster spec (for 'manifest': its jobs' task counts, instead of "
                        "--jobs; for 'wait': the target grpc://HOST:PORT)")
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
    m = p.add_argument_group("manifest and spec")
    m.add_argument("--format", choices=("tfjob", "slurm"), default=None,
                   help="tfjob: a Kubeflow TFJob (YAML); slurm: an sbatch script")
    m.add_argument("--jobs", metavar="JOB=N,...", default=None,
                   help="the jobs and their task counts, e.g. ps=1,worker=2 (a TFJob's jobs: "
                        "chief, ps, worker, evaluator)")
    m.add_argument("--name", metavar="NAME", default="flowc",
                   help="the TFJob's or Slurm job's name (default: flowc)")
    m.add_argument("--client", metavar="CMD", default=None,
                   help="the training program, run with FLOWC_TARGET=grpc://... of the chief "
                        "(or worker 0): in the chief's container, or on the batch node")
    m.add_argument("-o", "--output", metavar="FILE", default=None,
                   help="write to FILE instead of stdout")
    m.add_argument("--image", metavar="IMAGE", default="flowc:latest",
                   help="tfjob: the container image with flowc (see examples/cluster/Dockerfile; default: "
                        "flowc:latest)")
    m.add_argument("--port", metavar="PORT", type=int, default=2222,
                   help="tfjob: the port every task listens on (default: 2222)")
    m.add_argument("--token-secret", metavar="NAME", default="flowc-token",
                   help="tfjob: the Kubernetes Secret whose key 'token' is the tasks' token "
                        "(default: flowc-token)")
    m.add_argument("--k8s-namespace", metavar="NS", default=None,
                   help="tfjob: the Kubernetes namespace (default: kubectl's)")
    m.add_argument("--nodes", metavar="N", type=_positive_int, default=None,
                   help="slurm: nodes to allocate (default: Slurm's choice)")
    m.add_argument("--tasks-per-node", metavar="N", type=_positive_int, default=None,
                   help="slurm: tasks on each node")
    m.add_argument("--gpus-per-task", metavar="N", type=_positive_int, default=None,
                   help="slurm: GPUs for each task (each sees its own)")
    m.add_argument("--port-base", metavar="PORT", type=int, default=8888,
                   help="slurm: the first task of a node listens on PORT, the next on PORT+1 "
                        "(default: 8888)")
    m.add_argument("--time", metavar="LIMIT", default=None, help="slurm: --time of the job")
    m.add_argument("--partition", metavar="P", default=None,
                   help="slurm: the partition to run in")
    m.add_argument("--sbatch", metavar="OPTION", action="append", default=[],
                   help="slurm: one more #SBATCH line, e.g. --sbatch=--account=ml (repeatable)")
    m.add_argument("--flowc", metavar="CMD", default="flowc",
                   help="slurm: how the nodes run flowc (default: flowc)")
    m.add_argument("--from-slurm", action="store_true",
                   help="spec: resolve the cluster from this Slurm allocation's environment")
    m.add_argument("--target", metavar="JOB", default=None,
                   help="spec: print only grpc://ADDRESS of JOB's task 0")
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
    if args.action == "manifest":
        return cmd_manifest(args)
    if args.action == "spec":
        return cmd_spec(args)
    if args.action == "wait":
        return cmd_wait(args)
    if not args.cluster:
        raise FlowcError("flowc cluster up: which cluster? pass its spec, FILE.json")
    return cmd_cluster_up(args)


def _manifest_jobs(args: argparse.Namespace) -> dict:
    from runtime.cluster import ClusterSpec, ClusterSpecError
    from runtime.slurm import parse_jobs
    if bool(args.jobs) == bool(args.cluster):
        raise ClusterSpecError("give the jobs either as --jobs JOB=N,... or as a cluster spec "
                               "FILE.json (its task counts)")
    if args.jobs:
        return parse_jobs(args.jobs)
    return {job: len(addrs) for job, addrs in ClusterSpec.load(args.cluster).jobs.items()}


def cmd_manifest(args: argparse.Namespace) -> int:
    """Write a TFJob or an sbatch script for the jobs."""
    from compiler.cli.manifest import slurm_script, tfjob_manifest, to_yaml
    if args.format is None:
        raise FlowcError("flowc cluster manifest: which format? --format tfjob or slurm")
    jobs = _manifest_jobs(args)
    if args.format == "tfjob":
        text = ("# A Kubeflow TFJob; written by `flowc cluster manifest --format tfjob`.\n"
                "# The tasks' token: kubectl create secret generic "
                f"{args.token_secret} --from-literal=token=$(openssl rand -hex 32)\n"
                + to_yaml(tfjob_manifest(jobs, args.name, args.image, args.port,
                                         args.token_secret, args.client,
                                         namespace=args.k8s_namespace)) + "\n")
    else:
        text = slurm_script(jobs, args.name, args.nodes, args.tasks_per_node, args.port_base,
                            args.client, args.time, args.partition, args.sbatch, args.flowc,
                            gpus_per_task=args.gpus_per_task)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        if args.format == "slurm":
            os.chmod(args.output, 0o755)
    else:
        sys.stdout.write(text)
    return 0


def cmd_spec(args: argparse.Namespace) -> int:
    """The cluster a Slurm allocation's tasks resolve (``--from-slurm``), as JSON, or the
    ``grpc://`` target of a job's task 0. It reads the allocation's variables (a batch
    script's), not a job step's: the step that runs the tasks spans the allocation."""
    from runtime.cluster import ClusterSpecError
    from runtime.slurm import DEFAULT_PORT_BASE, parse_jobs, resolve_slurm
    if not args.from_slurm:
        raise ClusterSpecError("flowc cluster spec resolves a cluster from Slurm's environment:"
                               " pass --from-slurm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_STEP_")}
    env["SLURM_PROCID"] = "0"
    found = resolve_slurm(env, parse_jobs(args.jobs) if args.jobs else None,
                          args.port_base if args.port_base is not None else DEFAULT_PORT_BASE,
                          args.tasks_per_node)
    if args.target:
        print(f"grpc://{found.cluster.address(args.target, 0)}")
    else:
        print(json.dumps(found.cluster.to_json()))
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """Wait until the task ``args.cluster`` (``grpc://host:port``) answers, then every task of
    the cluster it reports; with the token of ``--token`` or ``FLOWC_TOKEN``."""
    import time
    from runtime.cluster import ClusterSpec
    from runtime.transport import TaskClient
    target = args.cluster or ""
    if not target.startswith("grpc://"):
        raise FlowcError(f"flowc cluster wait: expected a target grpc://HOST:PORT, not {target!r}")
    token = args.token if args.token is not None else setting("FLOWC_TOKEN") or None
    deadline = time.monotonic() + args.start_timeout

    def status(address: str) -> dict:
        while True:
            client = TaskClient(address, address, token)
            try:
                return client.call("Status", {}, timeout=2)[0]
            except FlowcError:
                if time.monotonic() > deadline:
                    raise FlowcError(f"{address} did not answer within {args.start_timeout:g} "
                                     "s") from None
                time.sleep(0.5)
            finally:
                client.close()

    cluster = ClusterSpec.from_json(status(target[len("grpc://"):]).get("cluster"))
    for _, _, address in cluster.tasks():
        status(address)
    print(f"flowc: {len(cluster.tasks())} tasks answer", file=sys.stderr, flush=True)
    return 0


def cmd_cluster_up(args: argparse.Namespace) -> int:
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
        if not token:
            # the warning comes before the line that says the cluster is up, so whoever waits
            # for that line has the warning too (a signal right after it cannot lose it)
            print("flowc: no token (--insecure): any local user can run steps on these tasks",
                  file=sys.stderr, flush=True)
        print(f"flowc: cluster up: {len(procs)} tasks; targets: {targets}", flush=True)
        if token and args.token_file:
            print(f"flowc: clients need the token: FLOWC_TOKEN=$(cat {args.token_file})",
                  flush=True)
        elif made:
            print(f"flowc: clients need the token: export FLOWC_TOKEN={token}", flush=True)
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
    bind = args.bind or "127.0.0.1"
    slurm_only = [f for f, v in (("--jobs", args.jobs), ("--port-base", args.port_base),
                                 ("--tasks-per-node", args.tasks_per_node),
                                 ("--gpus-per-task", args.gpus_per_task),
                                 ("--gpus-per-node", args.gpus_per_node)) if v is not None]
    if args.from_slurm:
        if args.cluster or job is not None or task is not None:
            raise ClusterSpecError("--from-slurm takes the cluster, job and task from Slurm's "
                                   "environment: do not pass --cluster, --job or --task too")
        from runtime.slurm import DEFAULT_PORT_BASE, parse_jobs, resolve_slurm
        found = resolve_slurm(os.environ, parse_jobs(args.jobs) if args.jobs else None,
                              args.port_base if args.port_base is not None
                              else DEFAULT_PORT_BASE, args.tasks_per_node,
                              args.gpus_per_node, args.gpus_per_task)
        cluster, job, task = found.cluster, found.job, found.task
        if found.cuda_visible_devices is not None:     # before any GPU is looked at
            os.environ["CUDA_VISIBLE_DEVICES"] = found.cuda_visible_devices
        bind = args.bind or "0.0.0.0"
        print(f"flowc: Slurm rank {found.rank} on {found.host} is /job:{job}/task:{task} of "
              + json.dumps(cluster.to_json()), file=sys.stderr, flush=True)
    elif slurm_only:
        raise ClusterSpecError(f"{', '.join(slurm_only)} only go with --from-slurm")
    elif args.cluster:
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
    if args.insecure and not token and not is_loopback_host(bind):
        print(f"flowc: warning: serving on {bind} without a token (--insecure): any machine "
              "that reaches it can run steps on this task", file=sys.stderr, flush=True)
    server = TaskServer(cluster, job, task, build=build_partition, host=bind, token=token,
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


__all__ = ["add_serve_command", "cmd_serve", "cmd_cluster", "cmd_manifest", "cmd_spec",
           "FlowcError"]
