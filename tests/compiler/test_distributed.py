"""Distributed runtime: real task processes (``flowc serve``) on loopback, a master in the
client (``fl.Session(target="grpc://...")``), tensors between tasks over gRPC.

Every task process is killed in fixture teardown and every wait is bounded."""
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

import dsl as fl
from cluster_fixture import ROOT, Cluster, free_port
from runtime.cluster import ClusterSpec, ClusterSpecError, parse_tf_config
from runtime.transport import (TaskClient, TransportError, UnauthenticatedError,
                               UnavailableError, WireFormatError, decode_frame, encode_frame)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, {"ps": 1, "worker": 1})
    yield c
    c.stop()


def _model():
    """A variable on the PS task, the computation on the worker task."""
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    with fl.device("/job:ps/task:0"):
        w = fl.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), name="w")
        b = fl.Variable(np.full([4], 0.25, np.float32), name="b")
    with fl.device("/job:worker/task:0"):
        h = fl.nn.relu(fl.matmul(x, w) + b)
        total = fl.reduce_sum(h)
    return x, w, b, h, total


def test_ps_variable_and_worker_computation_equal_a_local_session(cluster, graph):
    x, w, b, h, total = _model()
    step = fl.train.GradientDescentOptimizer(0.1).minimize(total)
    feed = {x: np.arange(6, dtype=np.float32).reshape(2, 3) / 5}
    with fl.Session(config=fl.ConfigProto(allow_soft_placement=True)) as local:
        local.run([w.initializer, b.initializer])
        expected = local.run([h, total], feed)
        local.run(step, feed)
        expected_w = local.run(w)
    with fl.Session(cluster.target()) as sess:
        sess.run([w.initializer, b.initializer])
        got = sess.run([h, total], feed)
        sess.run(step, feed)
        np.testing.assert_allclose(sess.run(w), expected_w, rtol=1e-6)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    assert np.ndim(got[1]) == 0 and np.isclose(got[1], expected[1])
    ps = cluster.wait_ready("ps", 0)
    worker = cluster.wait_ready("worker", 0)
    assert {"w", "b"} <= set(ps["variables"]) and not {"w", "b"} & set(worker["variables"])


def test_a_partition_with_megabytes_of_constants_registers(cluster, graph):
    """The IR text of a partition travels as a streamed tensor, not in a frame's header, so
    a variable initialized from a large array (its value is a constant in the IR) registers."""
    init = np.random.default_rng(0).standard_normal((1024, 512)).astype(np.float32)
    with fl.device("/job:ps/task:0"):
        table = fl.Variable(init, name="table")
    with fl.device("/job:worker/task:0"):
        total = fl.reduce_sum(table * 2.0)
    with fl.Session(cluster.target()) as sess:
        sess.run(table.initializer)
        np.testing.assert_allclose(sess.run(total), (init * 2.0).sum(dtype=np.float64),
                                   rtol=1e-4)


def test_variables_persist_across_client_sessions(cluster, graph):
    x, w, b, h, total = _model()
    bump = w.assign_add(np.ones([3, 4], np.float32))
    with fl.Session(cluster.target()) as first:
        first.run(w.initializer)
        first.run(bump)
        after = first.run(w)
    other = fl.Graph()                    # a second client: its own graph and session
    with other.as_default():
        with fl.device("/job:ps/task:0"):
            w2 = fl.Variable(np.zeros([3, 4], np.float32), name="w")
        with fl.Session(cluster.target()) as second:
            np.testing.assert_array_equal(second.run(w2), after)
    np.testing.assert_allclose(after, np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4) + 1)


def test_killed_task_is_reported_by_name_not_a_hang(cluster, graph):
    x, w, b, h, total = _model()
    with fl.Session(cluster.target()) as sess:
        sess.run([w.initializer, b.initializer])
        sess.run(total, {x: np.ones([1, 3], np.float32)})
        cluster.kill("ps", 0)
        # UnavailableError (not DeadlineExceededError): reported as dead, not waited out
        with pytest.raises(UnavailableError) as e:
            sess.run(total, {x: np.ones([1, 3], np.float32)},
                     options=fl.RunOptions(timeout_in_ms=20000))
    assert "/job:ps/task:0" in str(e.value) and cluster.address("ps") in str(e.value)
    with pytest.raises(UnavailableError, match=cluster.address("ps")):
        fl.Session(f"grpc://{cluster.address('ps')}")     # a dead target: named at once


def test_hung_task_ends_the_step_at_its_deadline(cluster, graph):
    x, w, b, h, total = _model()
    with fl.Session(cluster.target()) as sess:
        sess.run([w.initializer, b.initializer])
        sess.run(total, {x: np.ones([1, 3], np.float32)})
        os.kill(cluster.procs[("ps", 0)].pid, signal.SIGSTOP)     # alive, but never answers
        with pytest.raises(fl.DeadlineExceededError, match="/job:ps/task:0"):
            sess.run(total, {x: np.ones([1, 3], np.float32)},
                     options=fl.RunOptions(timeout_in_ms=1000))
        # a new step: the task is checked (with a deadline) before registering
        with pytest.raises(fl.DeadlineExceededError, match="/job:ps/task:0"):
            sess.run(h, {x: np.ones([1, 3], np.float32)})


def test_restarted_worker_gets_its_partition_again_and_ps_state_survives(cluster, graph):
    x, w, b, h, total = _model()
    feed = {x: np.ones([2, 3], np.float32)}
    with fl.Session(cluster.target()) as sess:
        sess.run([w.initializer, b.initializer])
        before = sess.run(total, feed)
        cluster.kill("worker", 0)
        cluster.start("worker", 0)
        cluster.wait_ready("worker", 0)
        assert sess.run(total, feed) == before          # registered again, same variables
        assert sess.compile_count == 2


def test_wrong_or_missing_token_is_refused(tmp_path, graph):
    c = Cluster(tmp_path, {"ps": 1, "worker": 1}, token="s3cret")
    try:
        x, w, b, h, total = _model()
        with pytest.raises(UnauthenticatedError, match="wrong token"):
            fl.Session(c.target(), token="guess")
        with pytest.raises(UnauthenticatedError, match="no token"):
            c.client("worker", token="").call("Status", {})
        with fl.Session(c.target(), token="s3cret") as sess:
            sess.run([w.initializer, b.initializer])
            assert sess.run(total, {x: np.ones([2, 3], np.float32)}) > 0
    finally:
        c.stop()


def test_garbage_truncated_and_oversized_requests_leave_the_server_serving(tmp_path, graph):
    c = Cluster(tmp_path, {"worker": 1}, extra_args=["--max-message-mb", "1"])
    try:
        host, port = c.address("worker").split(":")
        for junk in (b"\x00" * 64, os.urandom(4096), b"GET / HTTP/1.1\r\n\r\n"):
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(junk)
        client = c.client("worker")
        raw = client._calls["Status"]
        good = encode_frame({"x": 1}, [np.ones(4, np.float32)])
        for bad in (b"", b"garbage!", good[:-3], good + b"xx", b"FLW1\xff\xff\xff\xff{}"):
            with pytest.raises(Exception) as e:
                raw(bad, timeout=5)
            assert client.error(e.value, "Status").__class__ is WireFormatError
        with pytest.raises(TransportError, match="size limit"):
            client.call("RunStep", {"key": "k"}, [np.zeros(600_000, np.float32)])
        with pytest.raises(WireFormatError, match="step_id"):
            client.call("RunStep", {"key": "k"})
        assert client.call("Status", {})[0]["job"] == "worker"
        with fl.device("/job:worker/task:0"):
            y = fl.constant(2.0) * fl.placeholder(fl.float32, [], name="z")
        with fl.Session(c.target()) as sess:
            assert sess.run(y, {"z:0": 3.0}) == 6.0
        client.close()
    finally:
        c.stop()


# --- without processes ---------------------------------------------------------------------------
def test_frames_round_trip_and_bad_frames_are_named():
    tensors = [np.float32(1.5), np.arange(6, dtype=np.int64).reshape(2, 3), np.zeros((0, 4)),
               np.array([True, False]), np.arange(5, dtype=np.uint8)[::2]]
    header, back = decode_frame(encode_frame({"a": [1, "b"]}, tensors))
    assert header["a"] == [1, "b"]
    for t, u in zip(tensors, back):
        assert np.asarray(t).dtype == u.dtype and np.asarray(t).shape == u.shape
        np.testing.assert_array_equal(np.asarray(t), u)
    frame = encode_frame({}, [np.ones(3, np.float32)])
    with pytest.raises(WireFormatError, match="bad magic"):
        decode_frame(b"XXXX" + frame[4:])
    with pytest.raises(WireFormatError, match="truncated"):
        decode_frame(frame[:-1])
    with pytest.raises(WireFormatError, match="stray"):
        decode_frame(frame + b"\0")
    bad_dtype = bytearray(frame)
    bad_dtype[frame.index(b"}") + 1] = 99
    with pytest.raises(WireFormatError, match="dtype code 99"):
        decode_frame(bytes(bad_dtype))


def test_cluster_spec_and_tf_config():
    spec = ClusterSpec.from_json({"ps": ["localhost:2222"], "worker": ["h:1", "h:2"]})
    assert spec.devices() == ["/job:ps/replica:0/task:0/device:CPU:0",
                              "/job:worker/replica:0/task:0/device:CPU:0",
                              "/job:worker/replica:0/task:1/device:CPU:0"]
    assert spec.address("worker", 1) == "h:2"
    with pytest.raises(ClusterSpecError, match="no task 2"):
        spec.address("worker", 2)
    with pytest.raises(ClusterSpecError, match="host:port"):
        ClusterSpec.from_json({"ps": ["nohost"]})
    cluster, job, task = parse_tf_config(json.dumps(
        {"cluster": {"worker": ["a:1", "a:2"]}, "task": {"type": "worker", "index": 1}}))
    assert (cluster.address(job, task), job, task) == ("a:2", "worker", 1)
    with pytest.raises(ClusterSpecError, match="TF_CONFIG"):
        parse_tf_config("{")


def test_cross_task_pairs_go_through_the_transport(graph):
    from compiler.distributed import compile_for_cluster
    x, w, b, h, total = _model()
    spec = ClusterSpec.from_json({"ps": ["localhost:1"], "worker": ["localhost:2"]})
    step = compile_for_cluster(graph, [x.output], [total.output], [], spec, ("worker", 0))
    ir = {p.name: p.ir for p in step.partitions}
    assert set(ir) == {"/job:ps/task:0", "/job:worker/task:0"}
    assert "_Send(" in ir["/job:ps/task:0"] and "_Recv()" in ir["/job:worker/task:0"]
    assert "MatMul" in ir["/job:worker/task:0"] and "MatMul" not in ir["/job:ps/task:0"]
    from compiler.codegen.emitter import emit_c
    from compiler.ir.parser import parse_graph
    g = parse_graph(ir["/job:ps/task:0"])
    assert '"_RemoteSend"' in emit_c(g, [], []).source


def test_a_task_reaches_a_restarted_peer_at_once(monkeypatch):
    """A task's client of a peer that went away waits out gRPC's reconnect backoff before it
    tries again, failing every call until then even when the peer is back: the channel says
    it lost its peer (``lost``), and the task then makes a new client, which connects at once
    (a killed and restarted PS task failed the worker's next receive)."""
    import time
    from runtime.server import TaskServer
    from runtime.transport import TaskClient
    spec = ClusterSpec.from_json({"ps": [f"localhost:{free_port()}"],
                                  "worker": [f"localhost:{free_port()}"]})
    worker = TaskServer(spec, "worker", 0).start()
    try:
        first = worker.peer("ps", 0)
        assert worker.peer("ps", 0) is first and not first.lost
        with pytest.raises(UnavailableError, match="/job:ps/task:0"):
            first.call("Status", {}, timeout=2)                # nothing listens yet
        deadline = time.monotonic() + 10
        while not first.lost and time.monotonic() < deadline:  # between reconnect attempts
            time.sleep(0.01)
        assert first.lost
        # Whether the channel is still between attempts when the next step asks is a race:
        # take it as lost, as it was a moment ago.
        monkeypatch.setattr(TaskClient, "lost", property(lambda client: client is first))
        second = worker.peer("ps", 0)
        assert second is not first and worker.peer("ps", 0) is second
        ps = TaskServer(spec, "ps", 0).start()
        try:
            header, _ = second.call("Status", {}, timeout=5)
            assert header
        finally:
            ps.stop(0)
    finally:
        worker.stop(0)


def _replica(worker: int, lr: float):
    """One worker's copy of a linear model whose parameters live on the PS task (between-graph
    replication: each worker's client builds its own graph over the same shared variables)."""
    with fl.device("/job:ps/task:0"):
        w = fl.Variable(np.zeros([3, 1], np.float32), name="w")
        b = fl.Variable(np.zeros([1], np.float32), name="b")
    with fl.device(f"/job:worker/task:{worker}"):
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        y = fl.placeholder(fl.float32, [None, 1], name="y")
        loss = fl.reduce_mean(fl.square(fl.matmul(x, w) + b - y))
        train = fl.train.GradientDescentOptimizer(lr).minimize(loss)
    return w, b, x, y, loss, train


def test_async_data_parallel_training_two_workers_one_ps(tmp_path):
    import threading
    c = Cluster(tmp_path, {"ps": 1, "worker": 2})
    try:
        rng = np.random.default_rng(7)
        true_w = np.array([[2.0], [-3.0], [0.5]], np.float32)
        data = rng.normal(size=(256, 3)).astype(np.float32)
        labels = data @ true_w + 1.0
        replicas, sessions = [], []
        for k in range(2):
            g = fl.Graph()
            with g.as_default():
                replicas.append(_replica(k, 0.05))
                sessions.append(fl.Session(c.target("worker", k), graph=g))
        w, b = replicas[0][:2]
        sessions[0].run([w.initializer, b.initializer])
        errors, losses = [], [None, None]

        def work(k):
            try:
                _, _, x, y, loss, train = replicas[k]
                shard = slice(k * 128, (k + 1) * 128)
                for step in range(150):
                    rows = slice(step % 4 * 32, step % 4 * 32 + 32)
                    sessions[k].run(train, {x: data[shard][rows], y: labels[shard][rows]})
                losses[k] = sessions[k].run(loss, {x: data[shard], y: labels[shard]})
            except BaseException as e:                    # noqa: BLE001  (re-raised below)
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
        assert not any(t.is_alive() for t in threads) and not errors, errors
        final_w, final_b = sessions[1].run([replicas[1][0], replicas[1][1]])
        np.testing.assert_allclose(final_w, true_w, atol=0.02)
        np.testing.assert_allclose(final_b, [1.0], atol=0.02)
        assert max(losses) < 1e-3
        for s in sessions:
            s.close()
    finally:
        c.stop()


def test_serve_command_errors_are_plain(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "compiler.cli", "serve", *a], cwd=ROOT,
                                    env=env, capture_output=True, text=True, timeout=60)
    r = run()
    assert r.returncode == 1 and "flowc: error: no cluster" in r.stderr
    spec = tmp_path / "c.json"
    spec.write_text(json.dumps({"worker": ["localhost:1"]}))
    r = run("--cluster", str(spec), "--job", "ps")
    assert r.returncode == 1 and "no job 'ps'" in r.stderr
    with socket.socket() as s:                      # the task's port is taken
        s.bind(("127.0.0.1", 0))
        s.listen()
        spec.write_text(json.dumps({"worker": [f"localhost:{s.getsockname()[1]}"]}))
        r = run("--cluster", str(spec), "--job", "worker")
    assert r.returncode == 1 and "cannot listen" in r.stderr and "Traceback" not in r.stderr


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "FLOWC_TOKEN")}
    run = lambda *a: subprocess.run([sys.executable, "-m", "compiler.cli", "serve", *a], cwd=ROOT,
                                    env=env, capture_output=True, text=True, timeout=60)
    spec = tmp_path / "c.json"
    # The task's port is held on loopback, so a serve that got as far as binding would fail
    # with "cannot listen": the refusal below comes before anything is bound.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        spec.write_text(json.dumps({"worker": [f"localhost:{s.getsockname()[1]}"]}))
        r = run("--cluster", str(spec), "--job", "worker", "--bind", "0.0.0.0")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert ("flowc: error: refusing to serve /job:worker/task:0 on 0.0.0.0 without a token: "
            "0.0.0.0 is not a loopback address") in r.stderr, r.stderr
    assert "--token T or FLOWC_TOKEN" in r.stderr and "--insecure" in r.stderr
    assert "cannot listen" not in r.stderr
    with socket.socket() as s:              # a loopback alias needs no token: it gets to bind
        s.bind(("127.0.0.2", 0))
        s.listen()
        spec.write_text(json.dumps({"worker": [f"127.0.0.2:{s.getsockname()[1]}"]}))
        r = run("--cluster", str(spec), "--job", "worker", "--bind", "127.0.0.2")
    assert r.returncode == 1 and "cannot listen on 127.0.0.2" in r.stderr, r.stderr
    r = run("--cluster", str(spec), "--job", "worker", "--max-streams", "0")
    assert r.returncode == 2 and "--max-streams: must be at least 1" in r.stderr


def _cluster_up(spec: dict, path, *args):
    """``flowc cluster up`` on ``spec``, and a ``next_line()`` of its stdout that waits at most
    60 s (a line that never comes is '')."""
    path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k != "FLOWC_TOKEN"}
    proc = subprocess.Popen([sys.executable, "-m", "compiler.cli", "cluster", "up", str(path),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()

    def next_line() -> str:
        try:
            return lines.get(timeout=60)
        except queue.Empty:
            return ""
    return proc, next_line


def _command_lines_of_children(pid: int) -> list:
    """The command lines of the processes whose parent is ``pid`` (Linux /proc)."""
    lines = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    lines.append(f.read().replace(b"\0", b" ").decode())
        except (OSError, ValueError, IndexError):
            continue
    return lines


def test_cluster_up_makes_a_token_hands_it_over_and_stops_every_task(tmp_path, graph):
    spec = {"ps": [f"localhost:{free_port()}"], "worker": [f"localhost:{free_port()}"]}
    proc, next_line = _cluster_up(spec, tmp_path / "cluster.json")
    try:
        line = next_line()                            # comes once every task answers
        assert "cluster up: 2 tasks" in line and f"grpc://{spec['worker'][0]}" in line, \
            line + proc.stderr.read() if proc.poll() is not None else line
        token_line = next_line()
        assert token_line.startswith("flowc: clients need the token: export FLOWC_TOKEN=")
        token = token_line.strip().rsplit("=", 1)[1]
        assert len(token) >= 32
        children = _command_lines_of_children(proc.pid)
        assert len(children) == 2 and all("serve" in c and token not in c for c in children)
        with fl.device("/job:ps/task:0"):
            v = fl.Variable(np.array([1.0, 2.0], np.float32), name="v")
        y = v.value() * 3.0
        with pytest.raises(UnauthenticatedError, match="no token"):
            fl.Session(f"grpc://{spec['worker'][0]}", token="")
        with pytest.raises(UnauthenticatedError, match="no token"):
            TaskClient(spec["ps"][0]).call("Status", {})
        with fl.Session(f"grpc://{spec['worker'][0]}", token=token) as sess:
            sess.run(v.initializer)
            np.testing.assert_array_equal(sess.run(y), [3.0, 6.0])
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    assert rc == 0
    for address in spec.values():                     # every task is down
        host, port = address[0].split(":")
        with pytest.raises(OSError):
            socket.create_connection((host, int(port)), timeout=2).close()


def test_cluster_up_writes_its_token_for_the_clients_or_runs_insecure_when_told(tmp_path):
    spec = {"worker": [f"localhost:{free_port()}"]}
    token_file = tmp_path / "token"
    proc, next_line = _cluster_up(spec, tmp_path / "cluster.json", "--token-file", str(token_file))
    try:
        assert "cluster up: 1 tasks" in next_line()
        assert next_line().strip() == \
            f"flowc: clients need the token: FLOWC_TOKEN=$(cat {token_file})"
        assert os.stat(token_file).st_mode & 0o777 == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert TaskClient(spec["worker"][0], token=token).call("Status", {})[0]["job"] == "worker"
        with pytest.raises(UnauthenticatedError, match="no token"):
            TaskClient(spec["worker"][0]).call("Status", {})
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    proc, next_line = _cluster_up(spec, tmp_path / "cluster.json", "--insecure")
    try:
        assert "cluster up: 1 tasks" in next_line()
        assert TaskClient(spec["worker"][0]).call("Status", {})[0]["job"] == "worker"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert "no token (--insecure)" in proc.stderr.read()


def test_sharded_embedding_over_two_ps_tasks_trains_like_one_table(tmp_path, graph):
    """An embedding table split over two PS tasks: each shard's rows are gathered on its own
    task, the sparse SGD update runs there, and the result equals one local table."""
    c = Cluster(tmp_path, {"ps": 2, "worker": 1})
    try:
        r = np.random.RandomState(11)
        table = r.randn(10, 4).astype(np.float32)
        ids = np.array([[1, 8], [3, 3], [0, 9]], np.int64)
        target = r.randn(3, 2, 4).astype(np.float32)
        shards = []
        for k in range(2):
            with fl.device(f"/job:ps/task:{k}"):
                shards.append(fl.Variable(table[k::2], name=f"emb_shard{k}"))
        x = fl.placeholder(fl.int64, [None, 2], name="ids")
        with fl.device("/job:worker/task:0"):
            rows = fl.nn.embedding_lookup(shards, x, partition_strategy="mod")
            loss = fl.reduce_sum(fl.square(rows - target))
            step = fl.train.GradientDescentOptimizer(0.05).minimize(loss)
        with fl.Session(c.target()) as sess:
            sess.run([s.initializer for s in shards])
            before = sess.run(rows, {x: ids})
            sess.run(step, {x: ids})
            after = sess.run(shards)
        np.testing.assert_array_equal(before, table[ids])
        expected = table.copy()
        np.add.at(expected, ids.reshape(-1), -0.05 * 2 * (table[ids] - target).reshape(-1, 4))
        np.testing.assert_allclose(after[0], expected[0::2], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(after[1], expected[1::2], rtol=1e-5, atol=1e-6)
        for k in range(2):
            assert f"emb_shard{k}" in c.wait_ready("ps", k)["variables"]
    finally:
        c.stop()


def test_a_killed_ps_task_recovers_from_the_checkpoint_its_saver_wrote(tmp_path, cluster, graph):
    """Train, checkpoint (written by the PS task that holds the variables), SIGKILL the PS:
    the next step names the dead task; a restarted PS has lost its variables (a clear error
    naming them), and restoring the checkpoint brings back exactly the saved values, from
    which training goes on as it would have."""
    x, w, b, h, total = _model()
    with fl.device("/job:ps/task:0"):
        gstep = fl.train.get_or_create_global_step()
    step = fl.train.GradientDescentOptimizer(0.1).minimize(total, global_step=gstep)
    saver = fl.train.Saver(max_to_keep=2)
    feed = {x: np.arange(6, dtype=np.float32).reshape(2, 3) / 5}
    prefix = str(tmp_path / "ckpt" / "model")
    with fl.Session(cluster.target()) as sess:
        sess.run(fl.global_variables_initializer())
        for _ in range(3):
            sess.run(step, feed)
        saved = saver.save(sess, prefix, global_step=sess.run(gstep))
        saved_values = sess.run([w, b, gstep])
        sess.run(step, feed)                                 # progress after the checkpoint
        expected_next = sess.run([w, b])
        cluster.kill("ps", 0)
        with pytest.raises(UnavailableError, match="/job:ps/task:0"):
            sess.run(step, feed, options=fl.RunOptions(timeout_in_ms=20000))
    cluster.start("ps", 0, tf_config=True)
    cluster.wait_ready("ps", 0)
    with fl.Session(cluster.target()) as sess:
        with pytest.raises(fl.FlowcError, match="w"):
            sess.run(w)                                      # the new PS has no value for w
        assert fl.train.latest_checkpoint(str(tmp_path / "ckpt")) == saved
        saver.restore(sess, saved)
        for got, want in zip(sess.run([w, b, gstep]), saved_values):
            np.testing.assert_array_equal(got, want)
        sess.run(step, feed)
        for got, want in zip(sess.run([w, b]), expected_next):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        assert sess.run(gstep) == saved_values[2] + 1


def test_each_ps_task_saves_and_restores_its_own_shard(tmp_path, graph):
    from runtime.tensor_bundle import open_bundle
    c = Cluster(tmp_path, {"ps": 2, "worker": 1})
    try:
        with fl.device("/job:ps/task:0"):
            w = fl.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
        with fl.device("/job:ps/task:1"):
            b = fl.Variable(np.full([3], 0.5, np.float32), name="b")
        saver = fl.train.Saver(sharded=True)
        with fl.Session(c.target()) as sess:
            sess.run([w.initializer, b.initializer])
            path = saver.save(sess, str(tmp_path / "ckpt" / "model"), global_step=1)
            # each ps task wrote its own data shard; one index over both (TF's merged layout)
            bundle = open_bundle(path)
            assert bundle.num_shards == 2
            assert [(k, bundle.entry(k).shard_id) for k in ("w", "b")] == [("w", 0), ("b", 1)]
            assert fl.train.list_variables(path) == [("b", [3]), ("w", [2, 3])]
            sess.run([w.assign(w * 0.0), b.assign(b * 0.0)])
            saver.restore(sess, fl.train.latest_checkpoint(str(tmp_path / "ckpt")))
            np.testing.assert_array_equal(sess.run(w), np.arange(6).reshape(2, 3))
            np.testing.assert_array_equal(sess.run(b), np.full([3], 0.5))
    finally:
        c.stop()
