"""TensorFlow's error classes across tasks: a step that fails on a task server raises, in the
client, the class it raised on the task (``fl.errors``), naming the node, its op and where it
was written, as a local session does (tests/dsl/test_error_classes.py); a task that is gone is
an ``fl.errors.UnavailableError``. Two task servers in this process, on loopback."""
from __future__ import annotations

import os

import numpy as np
import pytest

import dsl as fl
from cluster_fixture import free_port
from compiler.distributed import build_partition
from runtime.cluster import ClusterSpec
from runtime.server import TaskServer

BOUND = fl.RunOptions(timeout_in_ms=20000)
THIS_FILE = os.path.basename(__file__)


@pytest.fixture
def cluster():
    spec = ClusterSpec.from_json({"ps": [f"127.0.0.1:{free_port()}"],
                                  "worker": [f"127.0.0.1:{free_port()}"]})
    servers = {job: TaskServer(spec, job, 0, build=build_partition).start()
               for job in ("ps", "worker")}
    yield spec, servers
    for server in servers.values():
        server.stop(0)


def _check(err, cls, node):
    assert type(err) is not fl.errors.OpError and isinstance(err, cls), (type(err), str(err))
    assert err.error_code == cls.error_code
    assert err.node_def is not None and err.node_def.name == node, (err.node_def, str(err))
    assert f"'{node}'" in str(err)
    assert err.location and THIS_FILE in err.location, err.location
    assert err.op is not None and err.op.name == node


def test_a_task_error_is_raised_as_its_class_with_its_node(cluster):
    spec, servers = cluster
    g = fl.Graph()
    with g.as_default():
        with fl.device("/job:ps/task:0"):
            never_set = fl.Variable(np.zeros(3, np.float32), name="never_set")
            q = fl.FIFOQueue(2, [fl.float32], shapes=[[]], name="q")
            deq, close = q.dequeue(name="deq"), q.close()
        with fl.device("/job:worker/task:0"):
            ids = fl.placeholder(fl.int32, [None], name="ids")
            gat = fl.gather(fl.constant(np.arange(10, dtype=np.float32).reshape(5, 2)), ids,
                            name="gat")
            uses = fl.reduce_sum(never_set * 2.0, name="uses")
    read = never_set.value().op.name
    with fl.Session(f"grpc://{spec.address('worker', 0)}", graph=g) as sess:
        with pytest.raises(fl.errors.InvalidArgumentError) as caught:
            sess.run(gat, {ids: np.array([1, 7], np.int32)}, options=BOUND)
        _check(caught.value, fl.errors.InvalidArgumentError, "gat")
        assert caught.value.node_def.op == "GatherV2"

        with pytest.raises(fl.errors.FailedPreconditionError) as caught:
            sess.run(uses, options=BOUND)                  # the read on ps fails
        _check(caught.value, fl.errors.FailedPreconditionError, read)

        sess.run(close, options=BOUND)
        with pytest.raises(fl.errors.OutOfRangeError) as caught:
            sess.run(deq, options=BOUND)
        _check(caught.value, fl.errors.OutOfRangeError, "deq")

        servers["ps"].stop(0)                              # the ps task is gone
        with pytest.raises(fl.errors.UnavailableError) as caught:
            sess.run(deq, options=BOUND)
        assert "/job:ps/task:0" in str(caught.value)
        assert caught.value.error_code == fl.errors.UNAVAILABLE
