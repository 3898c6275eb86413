"""``fl.train.ClusterSpec`` and ``fl.train.Server``: TF1's cluster spec (dense and sparse jobs,
its errors), a server that serves this process's task to sessions on its ``target``, and the
canonical between-graph program (tests/data/tf1_programs/between_graph_server.py) run as real
processes: one ps and two workers, each worker with its own ``tf.train.Server``.

Every process is killed at the end and every wait is bounded."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import dsl as fl
from cluster_fixture import free_port
from repo_paths import ROOT
from runtime.errors import InternalError, NotFoundError
from runtime.transport import InsecureBindError, TaskClient, UnauthenticatedError

PROGRAM = os.path.join(ROOT, "tests", "data", "tf1_programs", "between_graph_server.py")


# --- ClusterSpec -------------------------------------------------------------------------------
def test_cluster_spec_dense_and_sparse_jobs_as_tf1():
    c = fl.train.ClusterSpec({"ps": ["a:1", "b:2"], "worker": {3: "c:3", 1: "d:4"}})
    assert c.jobs == ["ps", "worker"] and bool(c) and not fl.train.ClusterSpec({})
    assert c.as_dict() == {"ps": ["a:1", "b:2"], "worker": {1: "d:4", 3: "c:3"}}
    assert c.num_tasks("worker") == 2 and c.task_indices("worker") == [1, 3]
    assert c.task_address("ps", 1) == "b:2" and c.task_address("worker", 3) == "c:3"
    assert c.job_tasks("worker") == [None, "d:4", None, "c:3"]
    assert repr(c) == "ClusterSpec({'ps': ['a:1', 'b:2'], 'worker': {1: 'd:4', 3: 'c:3'}})"
    copy = fl.train.ClusterSpec(c)
    assert copy == c and not copy != c and copy is not c
    assert fl.train.ClusterSpec(c.as_cluster_def()) == c            # through a ClusterDef
    assert [j.name for j in c.as_cluster_def().job] == ["ps", "worker"]
    assert c != fl.train.ClusterSpec({"ps": ["a:1", "b:2"]})
    # TF1 compares with a dict of {index: address}, not with the list form
    assert c == {"ps": {0: "a:1", 1: "b:2"}, "worker": {1: "d:4", 3: "c:3"}}
    assert fl.train.ClusterSpec({"w": {"0": "a:1"}}).as_dict() == {"w": ["a:1"]}
    assert fl.train.ClusterSpec({"w": []}).as_dict() == {"w": {}}


def test_cluster_spec_errors_are_tf1s():
    C = fl.train.ClusterSpec
    with pytest.raises(TypeError, match=r"`cluster` must be a dictionary mapping one or more "
                                        r"job names to lists of network addresses"):
        C(["a:1"])
    with pytest.raises(TypeError, match="The tasks for job 'ps' must be a list or a dictionary "
                                        "from integers to strings."):
        C({"ps": "a:1"})
    with pytest.raises(TypeError, match="Task address 1 must be bytes or unicode"):
        C({"ps": [1]})
    with pytest.raises(TypeError, match="Job name 1 must be bytes or unicode"):
        C({1: ["a:1"]})
    c = C({"ps": ["a:1"], "worker": {1: "b:2"}})
    for call in (lambda: c.num_tasks("x"), lambda: c.task_indices("x"),
                 lambda: c.task_address("x", 0), lambda: c.job_tasks("x")):
        with pytest.raises(ValueError, match="No such job in cluster: 'x'"):
            call()
    with pytest.raises(ValueError, match="No task with index 0 in job 'worker'"):
        c.task_address("worker", 0)


def test_replica_device_setter_takes_a_cluster_spec():
    cluster = fl.train.ClusterSpec({"ps": ["a:1", "b:2"], "worker": ["c:3"]})
    with fl.Graph().as_default():
        with fl.device(fl.train.replica_device_setter(worker_device="/job:worker/task:0",
                                                      cluster=cluster)):
            v0 = fl.Variable(1.0, name="v0")
            v1 = fl.Variable(2.0, name="v1")
            total = v0 + v1
    assert [v.op.device for v in (v0, v1)] == ["/job:ps/task:0", "/job:ps/task:1"]
    assert total.op.device == "/job:worker/task:0"
    assert fl.train.replica_device_setter(cluster=fl.train.ClusterSpec({"worker": ["c:3"]})) \
        is None


# --- Server ------------------------------------------------------------------------------------
def test_server_argument_errors_are_tf1s():
    S = fl.train.Server
    with pytest.raises(ValueError, match="Must specify an explicit `job_name`."):
        S({"ps": ["localhost:0"], "worker": ["localhost:0"]}, start=False)
    with pytest.raises(ValueError, match="Must specify an explicit `task_index`."):
        S({"ps": ["localhost:0", "localhost:0"]}, start=False)
    with pytest.raises(TypeError, match="Could not convert `server_or_cluster_def` to a "
                                        r"`tf.train.ServerDef` or `tf.train.ClusterSpec`."):
        S(5, start=False)
    with pytest.raises(ValueError, match="No such job in cluster: 'x'"):
        S({"ps": ["localhost:0"]}, job_name="x", start=False)
    with pytest.raises(InternalError, match='Task 3 was not defined in job "ps"'):
        S({"ps": ["localhost:0"]}, task_index=3, start=False)
    with pytest.raises(NotFoundError, match=r"The available server factories are: \[ GRPC"):
        S({"ps": ["localhost:0"]}, protocol="foo", start=False)
    with pytest.raises(ValueError, match="every index 0..n-1 of a job"):
        S({"ps": {1: "localhost:0"}}, start=False)


def test_server_beyond_loopback_needs_a_token(monkeypatch):
    monkeypatch.delenv("FLOWC_TOKEN", raising=False)
    with pytest.raises(InsecureBindError, match="refusing to serve /job:worker/task:0 on "
                                                "0.0.0.0 without a token"):
        fl.train.Server({"worker": ["192.0.2.1:0"]}, start=False)


def test_server_beyond_loopback_serves_on_every_interface_with_the_token(monkeypatch):
    monkeypatch.setenv("FLOWC_TOKEN", "s3cret")
    server = fl.train.Server({"worker": ["192.0.2.1:0"]})
    try:
        port = int(server.target.rsplit(":", 1)[1])
        assert server.target == f"grpc://localhost:{port}"
        assert server.cluster_spec.as_dict() == {"worker": [f"192.0.2.1:{port}"]}
        for token, ok in (("s3cret", True), ("wrong", False)):
            client = TaskClient(f"localhost:{port}", "/job:worker/task:0", token)
            try:
                if ok:
                    assert client.call("Status", {}, timeout=10)[0]["job"] == "worker"
                else:
                    with pytest.raises(UnauthenticatedError, match="wrong token"):
                        client.call("Status", {}, timeout=10)
            finally:
                client.close()
    finally:
        server.stop(0)


def test_a_server_def_gives_the_cluster_and_the_task():
    cluster = fl.train.ClusterSpec({"ps": ["localhost:0"], "worker": ["localhost:0"]})
    sd = fl.train.ServerDef(cluster=cluster.as_cluster_def(), job_name="ps", task_index=0)
    server = fl.train.Server(sd, job_name="worker", start=False)
    try:
        assert (server.server_def.job_name, server.server_def.protocol) == ("worker", "grpc")
        assert fl.train.ClusterSpec(server.server_def.cluster) == cluster
        assert server.cluster_spec.task_address("ps", 0) == "localhost:0"
        assert server.cluster_spec.task_address("worker", 0) != "localhost:0"
    finally:
        server.stop(0)


def test_local_server_runs_sessions_and_keeps_variables(graph):
    server = fl.train.Server.create_local_server()
    try:
        assert server.target.startswith("grpc://localhost:") and \
            not server.target.endswith(":0")
        sd = server.server_def
        assert (sd.job_name, sd.task_index, sd.protocol) == ("localhost", 0, "grpc")
        assert server.cluster_spec.as_dict() == {"localhost": [server.target[len("grpc://"):]]}
        v = fl.Variable(np.arange(3, dtype=np.float32), name="v")
        bump = v.assign_add(np.ones(3, np.float32))
        with fl.Session(server.target) as sess:
            sess.run(v.initializer)
            sess.run(bump)
        with fl.Session(server.target) as sess:        # the task kept the variable
            np.testing.assert_allclose(sess.run(v * 2.0), [2.0, 4.0, 6.0])
        server.start()                                  # starting again does nothing
    finally:
        server.stop(0)


def test_join_returns_when_the_server_stops():
    server = fl.train.Server({"worker": [f"localhost:{free_port()}"]})
    joined = threading.Event()
    t = threading.Thread(target=lambda: (server.join(), joined.set()), daemon=True)
    t.start()
    assert not joined.wait(0.5)                         # serving: join blocks
    server.stop(0)
    assert joined.wait(30)


# --- the TF1 between-graph program in real processes ----------------------------------------
def _start(tmp_path, cluster, job, task, steps):
    env = dict(os.environ)
    env.pop("FLOWC_TOKEN", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    log = open(tmp_path / f"{job}_{task}.log", "w")
    proc = subprocess.Popen([sys.executable, PROGRAM, "--cluster", json.dumps(cluster),
                             "--job_name", job, "--task_index", str(task), "--steps", str(steps),
                             "--out", str(tmp_path / f"{job}_{task}.npz")],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc


def test_the_program_says_flowc_only_in_its_import_line():
    with open(PROGRAM) as f:
        assert [ln for ln in f if "dsl" in ln] == ["import dsl as tf\n"]


def test_tf1_between_graph_program_one_ps_two_workers(tmp_path):
    steps = 25
    cluster = {"ps": [f"localhost:{free_port()}"],
               "worker": [f"localhost:{free_port()}", f"localhost:{free_port()}"]}
    procs = {}
    try:
        for job, task in (("ps", 0), ("worker", 0), ("worker", 1)):
            procs[(job, task)] = _start(tmp_path, cluster, job, task, steps)
        logs = lambda: "\n".join(f"--- {j}:{t}\n" + (tmp_path / f"{j}_{t}.log").read_text()
                                 for j, t in procs)
        deadline = time.monotonic() + 300
        for task in (0, 1):
            try:
                rc = procs[("worker", task)].wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"worker {task} did not finish in time:\n{logs()}")
            assert rc == 0, logs()
        assert procs[("ps", 0)].poll() is None, logs()         # the ps serves until killed
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
    seen = [np.load(tmp_path / f"worker_{k}.npz") for k in (0, 1)]
    for s in seen:
        assert len(s["losses"]) == steps
        assert s["losses"][-1] < 0.5 * s["losses"][0], s["losses"]      # each worker learns
    # the worker that finished last saw every step of both: the global step and the counts
    # (variables on the ps task) were updated by each worker, once per step
    last = max(seen, key=lambda s: int(s["global_step"]))
    assert int(last["global_step"]) == 2 * steps
    np.testing.assert_array_equal(last["counts"], [steps, steps])
