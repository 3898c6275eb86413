"""A task's cluster, job and index from Slurm's environment, as TensorFlow's
``SlurmClusterResolver`` resolves them (``flowc serve --from-slurm``).

Slurm starts one process per task of a job step (``srun``) and tells each, in its
environment, its rank (``SLURM_PROCID``), how many tasks the step has
(``SLURM_STEP_NUM_TASKS``, or the allocation's ``SLURM_NTASKS``), its nodes
(``SLURM_STEP_NODELIST``, or ``SLURM_JOB_NODELIST``: a host list such as
``node[01-03],gpu7``) and how many tasks run on each (``SLURM_STEP_TASKS_PER_NODE``, or
``SLURM_TASKS_PER_NODE``: ``2(x3),1``). From these, as TensorFlow does:

- the tasks of a node listen on ``port_base``, ``port_base + 1``, ...; the task list is the
  nodes sorted by name, each with its tasks in order (Slurm's block distribution: ranks fill a
  node before the next);
- the jobs (``{"ps": 1, "worker": 2}``; default: every task a worker) take consecutive ranks,
  in the order of their sorted names: here ranks 0 is ``ps`` task 0, ranks 1 and 2 are
  ``worker`` tasks 0 and 1; the jobs' task counts must add up to the step's tasks;
- with ``gpus_per_task``, task ``k`` of a node sees GPUs ``k*g .. k*g+g-1`` of it
  (``CUDA_VISIBLE_DEVICES``), within ``gpus_per_node``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional

from runtime.cluster import ClusterSpec, ClusterSpecError

DEFAULT_PORT_BASE = 8888                   # TensorFlow's SlurmClusterResolver's


class SlurmEnvironmentError(ClusterSpecError):
    """Slurm's environment is missing a variable, malformed, or does not fit the jobs asked."""


def expand_hostlist(text: str) -> List[str]:
    """Slurm's compact host list as names, in order, duplicates kept:
    ``n[1-2],m5,o[3-4,6]`` -> ``n1 n2 m5 o3 o4 o6``; ``c[01-03]`` keeps the zero padding
    (``c01 c02 c03``); several ranges in one name multiply (``r[1-2]n[1-2]`` -> ``r1n1 r1n2
    r2n1 r2n2``)."""
    hosts: List[str] = []
    for item in _split_top(text.strip(), "hostlist"):
        hosts.extend(_expand_one(item, text))
    if not hosts:
        raise SlurmEnvironmentError(f"empty Slurm host list {text!r}")
    return hosts


def _split_top(text: str, what: str) -> List[str]:
    """``text`` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise SlurmEnvironmentError(f"nested brackets in Slurm {what} {text!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise SlurmEnvironmentError(f"unbalanced brackets in Slurm {what} {text!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise SlurmEnvironmentError(f"unbalanced brackets in Slurm {what} {text!r}")
    items.append(text[start:])
    for item in items:
        if not item:
            raise SlurmEnvironmentError(f"empty name in Slurm {what} {text!r}")
    return items


def _expand_one(item: str, whole: str) -> List[str]:
    m = re.search(r"\[([^\]]*)\]", item)
    if m is None:
        return [item]
    head, tail = item[:m.start()], item[m.end():]
    values = []
    for part in m.group(1).split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise SlurmEnvironmentError(f"bad range {part!r} in Slurm host list {whole!r}")
        if not dash:
            values.append(lo)
            continue
        if int(hi) < int(lo):
            raise SlurmEnvironmentError(f"descending range {part!r} in Slurm host list "
                                        f"{whole!r}")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(str(v).zfill(width) for v in range(int(lo), int(hi) + 1))
    return [head + v + rest for v in values for rest in _expand_one(tail, whole)]


def expand_tasks_per_node(text: str) -> List[int]:
    """Slurm's tasks-per-node list as one count per node: ``2(x3),1`` -> ``[2, 2, 2, 1]``."""
    counts: List[int] = []
    for item in text.strip().split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", item.strip())
        if m is None:
            raise SlurmEnvironmentError(f"bad Slurm tasks-per-node list {text!r}")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts


def parse_jobs(text: str) -> Dict[str, int]:
    """``ps=1,worker=2`` (``:`` works as well as ``=``) as ``{"ps": 1, "worker": 2}``."""
    jobs: Dict[str, int] = {}
    for item in text.split(","):
        name, sep, count = item.strip().replace(":", "=").partition("=")
        if not sep or not name or not count.strip().isdigit() or int(count) < 1:
            raise SlurmEnvironmentError(f"bad job split {text!r}: expected JOB=N,... with N "
                                        "at least 1, like ps=1,worker=2")
        if name in jobs:
            raise SlurmEnvironmentError(f"job '{name}' given twice in {text!r}")
        jobs[name] = int(count)
    return jobs


@dataclass
class SlurmTask:
    cluster: ClusterSpec
    job: str
    task: int
    rank: int
    host: str
    cuda_visible_devices: Optional[str]    # None: leave CUDA_VISIBLE_DEVICES alone


def _var(env: Mapping[str, str], *names: str) -> str:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip() != "":
            return value.strip()
    raise SlurmEnvironmentError(f"{' or '.join(names)} is not set: is this process a task of a "
                                "Slurm job step (started by srun)?")


def _int_var(env: Mapping[str, str], *names: str) -> int:
    value = _var(env, *names)
    if not value.isdigit():
        raise SlurmEnvironmentError(f"{names[0]}={value!r} is not a count")
    return int(value)


def resolve_slurm(env: Mapping[str, str], jobs: Optional[Dict[str, int]] = None,
                  port_base: int = DEFAULT_PORT_BASE, tasks_per_node: Optional[int] = None,
                  gpus_per_node: Optional[int] = None,
                  gpus_per_task: Optional[int] = None) -> SlurmTask:
    """This task's cluster, job, index (and GPUs) from Slurm's environment ``env``."""
    rank = _int_var(env, "SLURM_PROCID")
    num_tasks = _int_var(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
    hosts = expand_hostlist(_var(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"))
    if tasks_per_node is not None:
        per_node = [tasks_per_node] * len(hosts)
    else:
        per_node = expand_tasks_per_node(_var(env, "SLURM_STEP_TASKS_PER_NODE",
                                              "SLURM_TASKS_PER_NODE"))
        if len(per_node) != len(hosts):
            raise SlurmEnvironmentError(f"Slurm lists {len(hosts)} nodes but tasks-per-node "
                                        f"for {len(per_node)}")
    if len(set(hosts)) != len(hosts):
        raise SlurmEnvironmentError(f"a node is listed twice in the Slurm host list {hosts}")
    layout = sorted(zip(hosts, per_node))                  # TensorFlow sorts the nodes
    slots = sum(per_node)
    if slots < num_tasks or (tasks_per_node is None and slots != num_tasks):
        raise SlurmEnvironmentError(f"the tasks per node add up to {slots} tasks but the "
                                    f"Slurm step has {num_tasks}")
    jobs = dict(jobs) if jobs else {"worker": num_tasks}
    if sum(jobs.values()) != num_tasks:
        raise SlurmEnvironmentError(
            f"the jobs ask for {sum(jobs.values())} tasks ("
            + ", ".join(f"{j}={n}" for j, n in sorted(jobs.items()))
            + f") but the Slurm step has {num_tasks}: start as many (srun --ntasks) as the jobs "
            "have tasks")
    if not 0 <= rank < num_tasks:
        raise SlurmEnvironmentError(f"SLURM_PROCID={rank} is outside the step's {num_tasks} "
                                    "tasks")
    if port_base < 1 or port_base + max(per_node) - 1 > 65535:
        raise SlurmEnvironmentError(f"ports {port_base}.. do not fit {max(per_node)} tasks "
                                    "per node")
    if gpus_per_task is not None:
        if gpus_per_node is None:
            gpus_per_node = gpus_per_task * max(per_node)
        if max(per_node) * gpus_per_task > gpus_per_node:
            raise SlurmEnvironmentError(f"{max(per_node)} tasks of {gpus_per_task} GPUs each "
                                        f"need more than a node's {gpus_per_node} GPUs")
    addresses, nodes, gpus = [], [], []
    for host, count in layout:
        for k in range(count):
            addresses.append(f"{host}:{port_base + k}")
            nodes.append(host)
            if gpus_per_task is not None:
                gpus.append(",".join(str(g) for g in range(k * gpus_per_task,
                                                           (k + 1) * gpus_per_task)))
    spec, start = {}, 0
    job = index = None
    for name, count in sorted(jobs.items()):             # TensorFlow sorts the jobs
        spec[name] = addresses[start:start + count]
        if start <= rank < start + count:
            job, index = name, rank - start
        start += count
    return SlurmTask(ClusterSpec.from_json(spec, "the cluster from Slurm's environment"),
                     job, index, rank, nodes[rank], gpus[rank] if gpus else None)
