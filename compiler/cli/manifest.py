"""``flowc cluster manifest``: what a cluster manager needs to start the tasks of a cluster.

    flowc cluster manifest --format tfjob --jobs ps=1,worker=2,chief=1 --image IMG [-o FILE]
    flowc cluster manifest --format slurm --jobs ps=1,worker=2 --nodes 3 [--client CMD]

``tfjob``: a Kubeflow ``TFJob`` (``kubeflow.org/v1``) with one replica spec per job (``Chief``,
``PS``, ``Worker``, ``Evaluator``), each replica a container named ``tensorflow`` with the
port ``tfjob-port`` (what the training operator looks for to build ``TF_CONFIG``) running
``flowc serve --bind 0.0.0.0``; the operator's ``TF_CONFIG`` gives each replica its cluster
and task. The token comes from a Kubernetes Secret (``--token-secret``, key ``token``), never
from the manifest. With ``--client CMD`` the chief (or worker 0) also runs CMD, the training
program, once every task answers, with ``FLOWC_TARGET`` pointing at its own task; the job ends when it ends.

``slurm``: an ``sbatch`` script that makes a token (into a file only its owner can read),
starts one ``flowc serve --from-slurm`` per task with ``srun`` (tasks find their job and index
in Slurm's environment, ``runtime/slurm.py``), and, with ``--client CMD``, waits until they answer and runs CMD on the
batch node with ``FLOWC_TARGET`` set to the first worker's ``grpc://`` address, then stops
the tasks.
"""
from __future__ import annotations

import json
import shlex
from typing import Dict, List, Optional, Sequence

from runtime.cluster import ClusterSpecError

TFJOB_REPLICA_TYPES = {"chief": "Chief", "ps": "PS", "worker": "Worker",
                       "evaluator": "Evaluator", "master": "Master"}
TFJOB_PORT = 2222                      # the training operator's default port, "tfjob-port"


def _target_job(jobs: Dict[str, int]) -> str:
    """The job whose task 0 the client talks to: the chief's where there is one, else a
    worker's, else the first job's."""
    for job in ("chief", "master", "worker"):
        if job in jobs:
            return job
    return sorted(jobs)[0]


def tfjob_manifest(jobs: Dict[str, int], name: str, image: str, port: int = TFJOB_PORT,
                   token_secret: str = "flowc-token", client: Optional[str] = None,
                   serve_args: Sequence[str] = (), restart_policy: str = "OnFailure",
                   namespace: Optional[str] = None) -> dict:
    """A TFJob running a ``flowc serve`` task per replica."""
    bad = [j for j in jobs if j not in TFJOB_REPLICA_TYPES]
    if bad:
        raise ClusterSpecError(f"a TFJob has no replica type for job(s) {', '.join(bad)}: its "
                               f"jobs are {', '.join(TFJOB_REPLICA_TYPES)}")
    if sum(1 for j in ("chief", "master") if j in jobs) > 1 or \
            any(jobs.get(j, 0) > 1 for j in ("chief", "master")):
        raise ClusterSpecError("a TFJob has at most one chief (or master) replica")
    serve = ["flowc", "serve", "--bind", "0.0.0.0"] + list(serve_args)
    client_job = _target_job(jobs) if client else None
    specs = {}
    for job in sorted(jobs, key=list(TFJOB_REPLICA_TYPES).index):
        env = [{"name": "FLOWC_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": token_secret, "key": "token"}}}]
        container = {"name": "tensorflow", "image": image, "command": serve,
                     "ports": [{"name": "tfjob-port", "containerPort": port}], "env": env}
        if job == client_job:
            # the task serves in the background; the training program is the container's
            # main process, so the replica (and the job) completes when it does
            script = (f"{shlex.join(serve)} &\n"
                      f"flowc cluster wait \"$FLOWC_TARGET\" --start-timeout 600\n"
                      f"exec {client}")
            container["command"] = ["/bin/sh", "-c", script]
            env.append({"name": "FLOWC_TARGET", "value": f"grpc://localhost:{port}"})
        specs[TFJOB_REPLICA_TYPES[job]] = {
            "replicas": jobs[job],
            "restartPolicy": restart_policy,
            "template": {"spec": {"containers": [container]}},
        }
    metadata = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata,
            "spec": {"runPolicy": {"cleanPodPolicy": "All"}, "tfReplicaSpecs": specs}}


def to_yaml(obj, indent: int = 0) -> str:
    """``obj`` (dicts, lists, strings, numbers, booleans) as block YAML; strings are written
    as JSON strings, which YAML reads as double-quoted scalars."""
    pad = " " * indent
    lines: List[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.append(to_yaml(v, indent + 2))
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)) and v:
                inner = to_yaml(v, indent + 2)
                lines.append(f"{pad}- {inner.lstrip()}")
            else:
                lines.append(f"{pad}- {_scalar(v)}")
    else:
        lines.append(pad + _scalar(obj))
    return "\n".join(lines)


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return json.dumps(v)
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return "{}" if isinstance(v, dict) else "[]"
    return json.dumps(str(v))


def slurm_script(jobs: Dict[str, int], name: str, nodes: Optional[int] = None,
                 tasks_per_node: Optional[int] = None, port_base: int = 8888,
                 client: Optional[str] = None, time_limit: Optional[str] = None,
                 partition: Optional[str] = None, sbatch: Sequence[str] = (),
                 flowc: str = "flowc", serve_args: Sequence[str] = (),
                 gpus_per_task: Optional[int] = None) -> str:
    """An sbatch script that runs the cluster's tasks as one Slurm job step."""
    ntasks = sum(jobs.values())
    split = ",".join(f"{j}={n}" for j, n in sorted(jobs.items()))
    if nodes is not None and tasks_per_node is not None and nodes * tasks_per_node < ntasks:
        raise ClusterSpecError(f"{nodes} nodes of {tasks_per_node} tasks hold fewer than the "
                               f"jobs' {ntasks} tasks")
    head = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --ntasks={ntasks}"]
    if nodes is not None:
        head.append(f"#SBATCH --nodes={nodes}")
    if tasks_per_node is not None:
        head.append(f"#SBATCH --ntasks-per-node={tasks_per_node}")
    if gpus_per_task is not None:
        head.append(f"#SBATCH --gpus-per-task={gpus_per_task}")
    if time_limit:
        head.append(f"#SBATCH --time={time_limit}")
    if partition:
        head.append(f"#SBATCH --partition={partition}")
    head += [f"#SBATCH {opt}" for opt in sbatch]
    serve = f"{flowc} serve --from-slurm --jobs {split} --port-base {port_base}"
    if gpus_per_task is not None:
        serve += f" --gpus-per-task {gpus_per_task}"
    if serve_args:
        serve += " " + shlex.join(serve_args)
    target = _target_job(jobs)
    body = [
        f"# {ntasks} flowc tasks ({split}) as one job step; written by "
        "`flowc cluster manifest --format slurm`.",
        "set -euo pipefail",
        "",
        "# Every task requires this token. It reaches the tasks in their environment (srun "
        "passes",
        "# the environment on), never on a command line; the file is readable by you alone.",
        "umask 077",
        'if [ -z "${FLOWC_TOKEN:-}" ]; then',
        '  FLOWC_TOKEN_FILE="${FLOWC_TOKEN_FILE:-$HOME/.flowc/token-$SLURM_JOB_ID}"',
        '  mkdir -p "$(dirname "$FLOWC_TOKEN_FILE")"',
        "  python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > \"$FLOWC_TOKEN_FILE\"",
        '  FLOWC_TOKEN="$(cat "$FLOWC_TOKEN_FILE")"',
        "fi",
        "export FLOWC_TOKEN",
        "",
        "# One task per rank: each finds its job and index in Slurm's environment.",
        f"srun --ntasks={ntasks} --kill-on-bad-exit=1 {serve} &",
        "SERVERS=$!",
    ]
    if client:
        body += [
            "trap 'kill $SERVERS 2>/dev/null || true' EXIT",
            "",
            f"# The training program talks to /job:{target}/task:0 (the cluster it finds there).",
            f"FLOWC_TARGET=\"$({flowc} cluster spec --from-slurm --jobs {split} "
            f"--port-base {port_base} --target {target})\"",
            "export FLOWC_TARGET",
            f"{flowc} cluster wait \"$FLOWC_TARGET\" --start-timeout 600",
            client,
        ]
    else:
        body += ["", "# No --client: the tasks serve until the job is cancelled or times out;",
                 f"# clients connect to /job:{target}/task:0 "
                 f"(`{flowc} cluster spec --from-slurm ...` prints the cluster).",
                 "wait $SERVERS"]
    return "\n".join(head + body) + "\n"
