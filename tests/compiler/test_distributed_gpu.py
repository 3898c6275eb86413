"""A task that hosts a GPU: real task processes (``flowc serve``), the worker's GPU on the CUDA
simulator (``FLOWC_CUDA_SIMULATOR=1`` in its environment) or, marked ``gpu``, this machine's
GPU; the PS task on its CPU alone. The
master learns each task's devices from its ``Status``, places the computation on the worker's
GPU (one op on its CPU), and the worker runs its CPU and GPU parts together through its own
rendezvous, its GPU receiving the variables from the PS task and sending the gradients back
over gRPC."""
import numpy as np
import pytest

import dsl as fl
from cluster_fixture import Cluster

WORKER_GPU = "/job:worker/replica:0/task:0/device:GPU:0"


@pytest.fixture
def gpu_cluster(tmp_path, gpu_target):
    """The worker task on this machine's GPU (``gpu``) or on the simulator; the PS task never
    sees a GPU."""
    worker = {"FLOWC_CUDA_SIMULATOR": "1" if gpu_target == "simulator" else "0"}
    c = Cluster(tmp_path, {"ps": 1, "worker": 1},
                envs={("worker", 0): worker, ("ps", 0): {"FLOWC_CUDA_SIMULATOR": "0",
                                                         "CUDA_VISIBLE_DEVICES": ""}})
    yield c
    c.stop()


def _model():
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    y = fl.placeholder(fl.int32, [None], name="y")
    with fl.device("/job:ps/task:0"):
        w = fl.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), name="w")
        b = fl.Variable(np.full([4], 0.25, np.float32), name="b")
    with fl.device("/job:worker/task:0/device:CPU:0"):
        labels = y % 4                       # on the worker's CPU: its part sends to the GPU's
    with fl.device("/job:worker/task:0"):
        logits = fl.matmul(x, w) + b
        loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                             logits=logits))
        step = fl.train.GradientDescentOptimizer(0.5).minimize(loss)
    return x, y, w, b, logits, loss, step


def test_a_worker_gpu_trains_ps_variables_as_a_local_session(gpu_cluster, graph, capsys):
    worker = gpu_cluster.wait_ready("worker", 0)
    ps = gpu_cluster.wait_ready("ps", 0)
    assert WORKER_GPU in worker["devices"]
    assert not any("GPU" in d for d in ps["devices"])
    x, y, w, b, logits, loss, step = _model()
    rng = np.random.default_rng(0)
    feed = {x: rng.uniform(-1, 1, (8, 3)).astype(np.float32),
            y: rng.integers(0, 40, 8).astype(np.int32)}
    with fl.Session(config=fl.ConfigProto(allow_soft_placement=True,
                                          device_count={"GPU": 0})) as local:
        local.run([w.initializer, b.initializer])
        want = [local.run([loss, step], feed)[0] for _ in range(3)]
        want_w = local.run(w)
    capsys.readouterr()
    with fl.Session(gpu_cluster.target(),
                    config=fl.ConfigProto(log_device_placement=True)) as sess:
        sess.run([w.initializer, b.initializer])
        got = [sess.run([loss, step], feed)[0] for _ in range(3)]
        np.testing.assert_allclose(sess.run(w), want_w, rtol=1e-5, atol=1e-6)
    captured = capsys.readouterr()
    report = captured.out + captured.err
    placed = {line.split()[0]: line.split()[1] for line in report.splitlines()
              if line.startswith("  ") and len(line.split()) >= 2}
    assert placed.get("MatMul") == WORKER_GPU, report
    assert placed.get("FloorMod") == WORKER_GPU.replace("GPU", "CPU"), report
    assert any(op.startswith("SparseSoftmaxCrossEntropyWithLogits") and dev == WORKER_GPU
               for op, dev in placed.items()), report
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[-1] < got[0]
    ps = gpu_cluster.wait_ready("ps", 0)
    assert {"w", "b"} <= set(ps["variables"])            # the variables stay on the PS task


@pytest.fixture
def all_gpu_cluster(tmp_path, gpu_target):
    """Every task hosts a GPU (this machine's, or a simulated one), the parameter servers
    too."""
    env = {"FLOWC_CUDA_SIMULATOR": "1" if gpu_target == "simulator" else "0"}
    c = Cluster(tmp_path, {"ps": 2, "worker": 1},
                envs={(job, k): env for job, k in (("ps", 0), ("ps", 1), ("worker", 0))})
    yield c
    c.stop()


def test_ps_tasks_with_gpus_keep_variables_where_every_step_can_use_them(
        all_gpu_cluster, graph, tmp_path, capsys):
    """With a GPU on each PS task, a variable goes to its task's GPU, and the steps that touch
    it with ops that have CPU kernels only still run: a sharded saver's file ops run on the
    task's CPU beside it (the variables stay on the GPU), and a variable colocated anywhere in
    the graph with an op that has no GPU kernel (a queue's enqueue) lives on its task's CPU
    from its first step on, as TensorFlow places the whole graph once."""
    from runtime.tensor_bundle import open_bundle
    with fl.device("/job:ps/task:0"):
        w = fl.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    with fl.device("/job:ps/task:1"):
        b = fl.Variable(np.full([3], 0.5, np.float32), name="b")
        q = fl.FIFOQueue(4, [fl.float32], shapes=[[3]], shared_name="q")
        with fl.colocate_with(b):
            enqueue = q.enqueue([b.read_value()])
    saver = fl.train.Saver(sharded=True)
    with fl.Session(all_gpu_cluster.target(),
                    config=fl.ConfigProto(log_device_placement=True)) as sess:
        sess.run([w.initializer, b.initializer])          # a step that would suit a GPU
        sess.run(enqueue)
        sess.run(w.assign(w * 2.0))
        path = saver.save(sess, str(tmp_path / "ckpt" / "model"), global_step=1)
        # each ps task wrote its own data shard; one index over both (TF's merged layout)
        bundle = open_bundle(path)
        assert bundle.num_shards == 2
        assert [(k, bundle.entry(k).shard_id) for k in ("w", "b")] == [("w", 0), ("b", 1)]
        assert fl.train.list_variables(path) == [("b", [3]), ("w", [2, 3])]
        sess.run([w.assign(w * 0.0), b.assign(b * 0.0)])
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), np.arange(6).reshape(2, 3) * 2.0)
        np.testing.assert_array_equal(sess.run(b), np.full([3], 0.5))
        np.testing.assert_array_equal(sess.run(q.dequeue()), np.full([3], 0.5))
    captured = capsys.readouterr()
    placed = {}
    for line in (captured.out + captured.err).splitlines():
        parts = line.split()
        if line.startswith("  ") and len(parts) >= 2 and parts[0] in ("w", "b"):
            placed.setdefault(parts[0], set()).add(parts[1])
    assert placed == {"w": {"/job:ps/replica:0/task:0/device:GPU:0"},
                      "b": {"/job:ps/replica:0/task:1/device:CPU:0"}}, placed


def test_a_step_is_placed_again_when_its_task_restarts_without_its_gpu(tmp_path, gpu_target):
    """The worker hosts a GPU, the step runs on it; the worker restarts without one: the next
    run finds the task's devices changed, places and registers the step again (on the CPU)
    and computes the same values."""
    if gpu_target != "simulator":
        pytest.skip("restarts the worker with and without the simulator's GPU")
    no_gpu = {"FLOWC_CUDA_SIMULATOR": "0", "CUDA_VISIBLE_DEVICES": ""}
    c = Cluster(tmp_path, {"ps": 1, "worker": 1},
                envs={("worker", 0): {"FLOWC_CUDA_SIMULATOR": "1"}, ("ps", 0): no_gpu})
    try:
        x = fl.placeholder(fl.float32, [None, 3], name="x")
        with fl.device("/job:ps/task:0"):
            w = fl.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), name="w")
        with fl.device("/job:worker/task:0"):
            y = fl.reduce_sum(fl.nn.relu(fl.matmul(x, w)))
        feed = {x: np.arange(6, dtype=np.float32).reshape(2, 3) / 5}
        with fl.Session(c.target()) as sess:
            sess.run(w.initializer)
            before = sess.run(y, feed)
            assert WORKER_GPU in c.wait_ready("worker", 0)["devices"]
            c.kill("worker", 0)
            c.envs[("worker", 0)] = no_gpu
            c.start("worker", 0)
            assert not any("GPU" in d for d in c.wait_ready("worker", 0)["devices"])
            after = sess.run(y, feed)
        np.testing.assert_allclose(after, before, rtol=1e-6)
    finally:
        c.stop()
