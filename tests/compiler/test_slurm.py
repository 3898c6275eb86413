"""Slurm: ``flowc serve --from-slurm`` resolves its task from Slurm's environment as
TensorFlow's SlurmClusterResolver does, and ``flowc cluster manifest --format slurm`` writes an
sbatch script that runs; both tested with simulated Slurm environments (no Slurm here): a fake
``srun`` starts the tasks with the variables srun gives each."""
import json
import os
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest

from cluster_fixture import ROOT
from runtime.slurm import (SlurmEnvironmentError, expand_hostlist, expand_tasks_per_node,
                           parse_jobs, resolve_slurm)


def test_host_lists_expand_as_slurm_writes_them():
    assert expand_hostlist("n1") == ["n1"]
    assert expand_hostlist("n[1-2],m5,o[3-4,6,7-9]") == \
        ["n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"]
    assert expand_hostlist("gpu[08-11]") == ["gpu08", "gpu09", "gpu10", "gpu11"]
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand_hostlist("a.b-c[1,3]") == ["a.b-c1", "a.b-c3"]
    for bad in ("n[1-2", "n[a-b]", "n[3-1]", "n1,,n2", ""):
        with pytest.raises(SlurmEnvironmentError):
            expand_hostlist(bad)
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    with pytest.raises(SlurmEnvironmentError):
        expand_tasks_per_node("2(3)")
    assert parse_jobs("worker=2,ps=1") == {"worker": 2, "ps": 1}
    for bad in ("ps", "ps=0", "ps=1,ps=2", "=1"):
        with pytest.raises(SlurmEnvironmentError):
            parse_jobs(bad)


def _env(rank, nodes="n[1-2]", per_node="2(x2)", ntasks=4, step=True):
    p = "SLURM_STEP_" if step else "SLURM_"
    return {"SLURM_PROCID": str(rank), p + ("NUM_TASKS" if step else "NTASKS"): str(ntasks),
            p + "NODELIST" if step else "SLURM_JOB_NODELIST": nodes,
            p + "TASKS_PER_NODE": per_node}


def test_ranks_fill_nodes_in_order_and_jobs_take_ranks_in_sorted_order():
    jobs = {"worker": 3, "ps": 1}
    got = [resolve_slurm(_env(r), jobs) for r in range(4)]
    want = {"ps": ["n1:8888"], "worker": ["n1:8889", "n2:8888", "n2:8889"]}
    assert all(t.cluster.to_json() == want for t in got)
    assert [(t.job, t.task, t.host) for t in got] == \
        [("ps", 0, "n1"), ("worker", 0, "n1"), ("worker", 1, "n2"), ("worker", 2, "n2")]
    # nodes are sorted by name (TensorFlow's order), whatever order Slurm lists them in
    t = resolve_slurm(_env(0, nodes="b7,a3", per_node="1(x2)", ntasks=2), None, port_base=2000)
    assert t.cluster.to_json() == {"worker": ["a3:2000", "b7:2000"]}
    # the allocation's variables where a step's are missing (a batch script)
    t = resolve_slurm(_env(1, step=False), {"worker": 4})
    assert (t.job, t.task, t.cluster.address("worker", 3)) == ("worker", 1, "n2:8889")
    # uneven nodes
    t = resolve_slurm(_env(2, nodes="c[1-3]", per_node="2,1(x2)", ntasks=4), jobs)
    assert t.cluster.to_json()["worker"] == ["c1:8889", "c2:8888", "c3:8888"]


def test_gpus_are_split_between_the_tasks_of_a_node():
    got = [resolve_slurm(_env(r), None, gpus_per_task=2, gpus_per_node=4) for r in range(4)]
    assert [t.cuda_visible_devices for t in got] == ["0,1", "2,3", "0,1", "2,3"]
    assert resolve_slurm(_env(0), None).cuda_visible_devices is None
    with pytest.raises(SlurmEnvironmentError, match="GPUs"):
        resolve_slurm(_env(0), None, gpus_per_task=3, gpus_per_node=4)


def test_environments_that_do_not_fit_are_named():
    with pytest.raises(SlurmEnvironmentError, match="SLURM_PROCID"):
        resolve_slurm({}, None)
    with pytest.raises(SlurmEnvironmentError, match="ask for 2 tasks.*has 4"):
        resolve_slurm(_env(0), {"ps": 1, "worker": 1})
    with pytest.raises(SlurmEnvironmentError, match="2 nodes but tasks-per-node for 1"):
        resolve_slurm(_env(0, per_node="4"), None)
    with pytest.raises(SlurmEnvironmentError, match="outside"):
        resolve_slurm(_env(4), None)


def _free_port_run(n):
    """A port P with P .. P+n-1 free on every interface."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for k in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind(("", base + k))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


FAKE_SRUN = r"""#!/bin/bash
# srun, simulated: --ntasks=N copies of the command, each with the environment srun gives a
# task of the step (rank, the step's tasks, nodes and tasks per node); stops them on TERM.
n=1
while [[ "$1" == -* ]]; do
  case "$1" in --ntasks=*) n="${1#--ntasks=}";; esac
  shift
done
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; exit 0' TERM INT
for ((i = 0; i < n; i++)); do
  SLURM_PROCID=$i SLURM_STEP_NUM_TASKS=$n SLURM_STEP_NODELIST="$SLURM_JOB_NODELIST" \
    SLURM_STEP_TASKS_PER_NODE="$SLURM_TASKS_PER_NODE" "$@" &
  pids+=($!)
done
wait
"""

CLIENT = r"""
import json, os, sys
import numpy as np
import dsl as fl
with fl.device("/job:ps/task:0"):
    w = fl.Variable(np.ones([2], np.float32), name="w")
with fl.device("/job:worker/task:1"):
    x = fl.placeholder(fl.float32, [2], name="x")
    loss = fl.reduce_sum(fl.square(w * x))
    train = fl.train.GradientDescentOptimizer(0.25).minimize(loss)
with fl.Session(os.environ["FLOWC_TARGET"]) as sess:
    sess.run(w.initializer)
    sess.run(train, {x: np.array([1.0, 2.0], np.float32)})
    print(json.dumps({"w": sess.run(w).tolist(), "target": os.environ["FLOWC_TARGET"]}))
"""


def test_the_sbatch_script_runs_ps_and_workers_split_by_flags(tmp_path):
    """The script ``flowc cluster manifest --format slurm`` writes, run as sbatch would run
    it on a one-node allocation (the node: localhost) with a simulated srun: three
    ``flowc serve --from-slurm`` tasks find their jobs (ps=1, worker=2) in their environment,
    serve on every interface with the token the script made, and the client trains through
    the first worker."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN)
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    base = _free_port_run(3)
    script = tmp_path / "job.sbatch"
    flowc = f"{sys.executable} -m compiler.cli"
    r = subprocess.run([sys.executable, "-m", "compiler.cli", "cluster", "manifest", "--format",
                        "slurm", "--jobs", "worker=2,ps=1", "--nodes", "1", "--port-base",
                        str(base), "--flowc", flowc, "--client",
                        f"{sys.executable} {client}", "-o", str(script)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = script.read_text()
    assert "#SBATCH --ntasks=3" in text and "#SBATCH --nodes=1" in text
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SLURM_") and k != "FLOWC_TOKEN"}
    env.update({"PATH": f"{bin_dir}:{env['PATH']}", "PYTHONPATH": ROOT, "SLURM_JOB_ID": "42",
                "SLURM_JOB_NODELIST": "localhost", "SLURM_NTASKS": "3",
                "SLURM_TASKS_PER_NODE": "3", "SLURM_PROCID": "0",
                "FLOWC_TOKEN_FILE": str(tmp_path / "token")})
    r = subprocess.run(["bash", str(script)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=240, start_new_session=True)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(out["w"], [1 - 0.25 * 2 * 1, 1 - 0.25 * 2 * 4])   # w - lr*2wx^2
    assert out["target"] == f"grpc://localhost:{base + 1}"        # worker 0: rank 1
    # each task said which it is; the token was made, and only its owner can read it
    assert "Slurm rank 0 on localhost is /job:ps/task:0" in r.stderr
    assert "Slurm rank 2 on localhost is /job:worker/task:1" in r.stderr
    assert (tmp_path / "token").stat().st_mode & 0o077 == 0
    assert "(token required)" in r.stderr


def test_serve_from_slurm_errors_are_plain(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(_env(0))
    r = subprocess.run([sys.executable, "-m", "compiler.cli", "serve", "--from-slurm",
                        "--jobs", "ps=1,worker=2"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "ask for 3 tasks" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "compiler.cli", "serve", "--jobs", "ps=1"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "only go with --from-slurm" in r.stderr
