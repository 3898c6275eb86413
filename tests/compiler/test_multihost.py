"""Tasks on separate hosts: each ``flowc serve`` task in a network namespace of its own
address (``tests/netns_fixture.py``), the client in the machine's namespace. Skipped, with the
reason, where namespaces cannot be made (not root, no ``ip``)."""
import time

import numpy as np
import pytest

import dsl as fl
from cluster_fixture import ROOT, Cluster
from netns_fixture import Hosts, netns_unavailable
from runtime.transport import TaskClient, UnauthenticatedError

_why = netns_unavailable()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

TOKEN = "multihost-test-token"


@pytest.fixture
def hosts3():
    h = Hosts(3)
    yield h
    h.close()


def _replica(k, ps="/job:ps/task:0", worker="/job:worker/task:{k}"):
    """Worker ``k``'s graph: a linear model whose variables live on the PS task (with
    ``ps=worker=None``: the same model in one process)."""
    with fl.device(ps):
        w = fl.Variable(np.zeros([3, 1], np.float32), name="w")
        b = fl.Variable(np.zeros([1], np.float32), name="b")
    with fl.device(worker and worker.format(k=k)):
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        y = fl.placeholder(fl.float32, [None, 1], name="y")
        loss = fl.reduce_mean(fl.square(fl.matmul(x, w) + b - y))
        train = fl.train.GradientDescentOptimizer(0.1).minimize(loss)
    return w, b, x, y, loss, train


def _data():
    rng = np.random.default_rng(3)
    true_w = np.array([[2.0], [-3.0], [0.5]], np.float32)
    data = rng.normal(size=(64, 3)).astype(np.float32)
    return data, data @ true_w + 1.0


def test_ps_and_two_workers_train_across_hosts(tmp_path, hosts3):
    """ps on one host, a worker on each of the two others: the steps of the two workers, in
    turn, give what the same steps give in one process, and the tensors went over the hosts'
    interfaces (their traffic counters grew), not loopback."""
    c = Cluster(tmp_path, {"ps": 1, "worker": 2}, token=TOKEN, hosts=hosts3)
    try:
        assert c.address("ps").startswith(hosts3.address(0) + ":")
        data, labels = _data()
        before = [hosts3.rx_tx_bytes(k) for k in range(3)]
        replicas, sessions = [], []
        for k in range(2):
            g = fl.Graph()
            with g.as_default():
                replicas.append(_replica(k))
                sessions.append(fl.Session(c.target("worker", k), graph=g, token=TOKEN))
        sessions[0].run([replicas[0][0].initializer, replicas[0][1].initializer])
        steps = 20
        for step in range(steps):
            k = step % 2
            w, b, x, y, loss, train = replicas[k]
            rows = slice(step % 4 * 16, step % 4 * 16 + 16)
            sessions[k].run(train, {x: data[rows], y: labels[rows]})
        got = sessions[1].run([replicas[1][0], replicas[1][1], replicas[1][4]],
                              {replicas[1][2]: data, replicas[1][3]: labels})
        for s in sessions:
            s.close()
        after = [hosts3.rx_tx_bytes(k) for k in range(3)]

        g = fl.Graph()                       # the same steps, in one process
        with g.as_default():
            w, b, x, y, loss, train = _replica(0, ps=None, worker=None)
            with fl.Session() as sess:
                sess.run([w.initializer, b.initializer])
                for step in range(steps):
                    rows = slice(step % 4 * 16, step % 4 * 16 + 16)
                    sess.run(train, {x: data[rows], y: labels[rows]})
                want = sess.run([w, b, loss], {x: data, y: labels})
        for a, e in zip(got, want):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
        assert got[2] < 0.5 * float(np.mean(labels ** 2))      # it did learn
        # every host sent and received: the variables travelled between hosts
        for k in range(3):
            assert after[k][0] > before[k][0] and after[k][1] > before[k][1], (k, before, after)
    finally:
        c.stop()


def test_a_partitioned_host_is_named_within_the_deadline_and_recovers(tmp_path, hosts3):
    """The ps host's link goes down: the step fails by the step's deadline (not gRPC's or
    TCP's much longer timeouts) with an error that names the task cut off; when the link is
    back the same session steps again, with the variables as they were."""
    c = Cluster(tmp_path, {"ps": 1, "worker": 2}, token=TOKEN, hosts=hosts3)
    try:
        data, labels = _data()
        w, b, x, y, loss, train = _replica(0)
        with fl.Session(c.target("worker", 0), token=TOKEN) as sess:
            sess.run([w.initializer, b.initializer])
            sess.run(train, {x: data[:16], y: labels[:16]})
            kept = sess.run([w, b])
            deadline_ms = 3000
            hosts3.link_down(0)
            try:
                start = time.monotonic()
                with pytest.raises(fl.errors.OpError) as e:
                    sess.run(train, {x: data[:16], y: labels[:16]},
                             options=fl.RunOptions(timeout_in_ms=deadline_ms))
                took = time.monotonic() - start
            finally:
                hosts3.link_up(0)
            assert "/job:ps/task:0" in str(e.value), e.value
            assert isinstance(e.value, (fl.errors.DeadlineExceededError,
                                        fl.errors.UnavailableError)), repr(e.value)
            assert took < deadline_ms / 1000 + 2.0, took       # by the deadline, not later
            # the link is back: the next steps run, from the values the cut step left alone
            got = None
            for _ in range(20):
                try:
                    got = sess.run([w, b], options=fl.RunOptions(timeout_in_ms=5000))
                    break
                except (fl.errors.DeadlineExceededError, fl.errors.UnavailableError):
                    time.sleep(0.25)
            assert got is not None, "the session did not recover after the link came back"
            for a, e2 in zip(got, kept):
                np.testing.assert_array_equal(a, e2)
            sess.run(train, {x: data[:16], y: labels[:16]})
    finally:
        c.stop()


def test_a_task_on_a_host_address_refuses_calls_without_the_token(tmp_path, hosts3):
    c = Cluster(tmp_path, {"worker": 1}, token=TOKEN, hosts=hosts3)
    try:
        address = c.address("worker")
        assert not address.startswith(("127.", "localhost"))
        for token in (None, "wrong"):
            client = TaskClient(address, "/job:worker/task:0", token)
            try:
                with pytest.raises(UnauthenticatedError, match="/job:worker/task:0"):
                    client.call("Status", {}, timeout=10)
            finally:
                client.close()
        client = TaskClient(address, "/job:worker/task:0", TOKEN)
        try:
            assert client.call("Status", {}, timeout=10)[0]["address"] == address
        finally:
            client.close()
        with pytest.raises(fl.errors.UnauthenticatedError):
            fl.Session(c.target(), token=None)
    finally:
        c.stop()


def test_a_task_on_a_host_address_will_not_start_without_a_token(hosts3):
    r = hosts3.run(1, ["python3", "-m", "compiler.cli", "serve", "--cluster", "/dev/stdin",
                       "--job", "worker", "--task", "0", "--bind", hosts3.address(1)],
                   input=f'{{"worker": ["{hosts3.address(1)}:2222"]}}', cwd=ROOT,
                   capture_output=True, text=True, timeout=60,
                   env={k: v for k, v in __import__("os").environ.items() if k != "FLOWC_TOKEN"})
    assert r.returncode != 0
    assert "without a token" in r.stderr, r.stderr
