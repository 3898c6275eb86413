"""Partitioning with _Send/_Recv and running a step on several CPU devices of one process:
the IR the partition pass writes, results equal to one device, errors and deadlines that
stop every device, and concurrent steps on shared variables."""
import threading

import numpy as np
import pytest

import dsl as fl
from compiler.ir.printer import print_graph
from compiler.options import PipelineOptions
from compiler.passes.partition import split_by_device
from compiler.step import make_step_graph, optimize
from runtime.errors import DeadlineExceededError, FeedError, RuntimeExecutionError

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}".format
FOUR = fl.ConfigProto(device_count={"CPU": 4})


def partitioned(fetches, feeds=(), cpus=2):
    step = make_step_graph(fl.get_default_graph(), [f.output for f in feeds],
                           [f.output for f in fetches])
    optimize(step, PipelineOptions(cpu_devices=cpus,
                                   passes=("prune", "infer-shapes", "place", "partition")))
    return step.graph


def test_one_send_per_tensor_and_destination_and_control_edges_carried(graph):
    x = fl.placeholder(fl.float32, [2], name="x")
    with fl.device("/cpu:1"):
        a = fl.exp(x, name="a")
    with fl.device("/cpu:0"):
        b = fl.add(a, a, name="b")
        c = fl.multiply(a, 2.0, name="c")
    with fl.device("/cpu:1"), fl.control_dependencies([c]):
        d = fl.negative(b, name="d")
    g = partitioned([d], [x])
    sends = [n for n in g if n.op == "_Send"]
    recvs = {n.attrs["tensor_name"]: n for n in g if n.op == "_Recv"}
    assert [s.attrs["tensor_name"] for s in sends] == ["edge_0_a", "edge_1_b", "edge_2_c_control"]
    assert [s.attrs["slot"] for s in sends] == [0, 1, 2]
    for s in sends:                                   # each pair: opposite ends, same key
        r = recvs[s.attrs["tensor_name"]]
        assert (s.assigned_device, r.assigned_device) == (s.attrs["send_device"],
                                                          s.attrs["recv_device"])
        assert s.assigned_device != r.assigned_device
    assert g.node("b").inputs[0].node.name == "a/_recv_0" == g.node("c").inputs[0].node.name
    assert [c.name for c in g.node("d").control_inputs] == ["c/_recv_2"]
    dummy = g.node("c/_control_2")
    assert dummy.op == "Const" and [c.name for c in dummy.control_inputs] == ["c"]
    parts = split_by_device(g)
    assert list(parts) == [CPU(1), CPU(0)]
    text = {dev: print_graph(p) for dev, p in parts.items()}
    assert "%b " in text[CPU(0)] and "%b " not in text[CPU(1)]
    assert "_Send(%a)" in text[CPU(1)] and "_Recv()" in text[CPU(0)]


def test_four_devices_chain(graph):
    x = fl.placeholder(fl.float32, [3], name="x")
    t = x
    for k in range(4):
        with fl.device(f"/cpu:{k}"):
            t = fl.square(t, name=f"sq{k}") + 1.0
    g = partitioned([t], [x], cpus=4)
    pairs = [(n.attrs["send_device"], n.attrs["recv_device"]) for n in g if n.op == "_Send"]
    assert pairs == [(CPU(k), CPU(k + 1)) for k in range(3)]
    assert len(split_by_device(g)) == 4
    with fl.Session(config=FOUR) as s:
        xv = np.array([0.5, -1.0, 2.0], np.float32)
        want = xv
        for _ in range(4):
            want = want * want + 1
        np.testing.assert_allclose(s.run(t, {x: xv}), want, rtol=1e-6)


def _mlp(devices):
    """A two-layer MLP with SGD, its layers on the given devices (None: no request)."""
    rng = np.random.default_rng(0)
    x = fl.placeholder(fl.float32, [None, 8], name="x")
    y = fl.placeholder(fl.int32, [None], name="y")
    params = []
    h = x
    for k, (n_in, n_out) in enumerate(((8, 16), (16, 4))):
        with fl.device(devices[k]):
            w = fl.Variable(rng.normal(size=(n_in, n_out)).astype(np.float32) * 0.3, name=f"w{k}")
            b = fl.Variable(np.zeros(n_out, np.float32), name=f"b{k}")
            h = h @ w + b
            if k == 0:
                h = fl.nn.relu(h)
        params += [w, b]
    loss = fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
    grads = fl.gradients(loss, params)
    step = fl.group(*[p.assign_sub(0.5 * g) for p, g in zip(params, grads)])
    return x, y, loss, step, params


@pytest.mark.cpu_only
def test_an_mlp_on_four_devices_trains_exactly_as_on_one():
    rng = np.random.default_rng(1)
    xv = rng.normal(size=(32, 8)).astype(np.float32)
    yv = rng.integers(0, 4, size=32).astype(np.int32)
    history = {}
    for label, devices, config in (("one", (None, None), None),
                                   ("four", ("/cpu:1", "/cpu:3"), FOUR)):
        g = fl.Graph()
        with g.as_default():
            x, y, loss, step, params = _mlp(devices)
            init = fl.global_variables_initializer()
            with fl.Session(config=config) as s:
                s.run(init)
                losses = [s.run([loss, step], {x: xv, y: yv})[0] for _ in range(5)]
                history[label] = (losses, s.run(params))
                if label == "four":
                    exe = next(iter(s._steps.values()))
                    assert len(exe.parts) >= 2            # it really ran on several devices
    np.testing.assert_array_equal(history["one"][0], history["four"][0])
    for a, b in zip(history["one"][1], history["four"][1]):
        np.testing.assert_array_equal(a, b)
    assert history["one"][0][-1] < history["one"][0][0]


def test_a_failing_device_stops_the_step_and_names_the_node(graph):
    table = fl.Variable(np.zeros([4, 2], np.float32), name="table")
    ids = fl.placeholder(fl.int32, [None], name="ids")
    with fl.device("/cpu:1"):
        rows = fl.identity(fl.gather(fl.constant(np.ones([4, 2], np.float32)), ids), name="rows")
    with fl.device("/cpu:2"):
        out = fl.reduce_sum(rows * 2.0) + fl.reduce_sum(table.value())
    with fl.Session(config=FOUR) as s:
        s.run(table.initializer)
        assert s.run(out, {ids: [0, 3]}) == 8.0
        with pytest.raises(RuntimeExecutionError, match=r"GatherV2.*indices\[1\] = 9"):
            s.run(out, {ids: [0, 9]})
        assert s.run(out, {ids: [1]}) == 4.0                # the session is still usable


def test_a_deadline_ends_a_blocked_receive_and_the_session_stays_usable(graph):
    x = fl.placeholder(fl.float32, [600, 600], name="x")
    with fl.device("/cpu:1"):
        slow = x
        for _ in range(30):                                  # a few hundred ms of BLAS work
            slow = fl.matmul(slow, x) * 1e-3
    with fl.device("/cpu:0"):
        out = fl.reduce_sum(slow)
    xv = np.full([600, 600], 1e-3, np.float32)
    with fl.Session(config=FOUR) as s:
        with pytest.raises(DeadlineExceededError, match="timed out after 1 ms waiting for"):
            s.run(out, {x: xv}, options=fl.RunOptions(timeout_in_ms=1))
        assert np.isfinite(s.run(out, {x: xv}))


def test_concurrent_steps_add_up_exactly(graph):
    counter = fl.Variable(np.zeros([64], np.float64), name="counter")
    inc = counter.assign_add(np.ones([64]), read_value=False)
    threads, steps = 6, 200
    with fl.Session() as s:
        s.run(counter.initializer)
        s.run(inc)                                           # compile once
        compiled = s.compile_count
        errors = []

        def work():
            try:
                for _ in range(steps):
                    s.run(inc)
            except Exception as e:                           # pragma: no cover (reported)
                errors.append(e)

        pool = [threading.Thread(target=work) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=60)
        assert not errors and not any(t.is_alive() for t in pool)
        assert s.compile_count == compiled                   # a cached signature: no compile
        np.testing.assert_array_equal(s.run(counter), np.full([64], 1 + threads * steps))


TWO_DEVICES = """\
input x: f32[2, 3]
device "/cpu:1" {
  let h = nn.relu(x * 2.0)
}
device "/cpu:0" {
  output y = reduce_sum(h, axis=1)
}
"""


def test_cli_shows_placement_and_one_graph_per_device(tmp_path, capsys):
    from cli_runner import flowc
    model = tmp_path / "two.flow"
    model.write_text(TWO_DEVICES)
    rc, out, err = flowc(capsys, "ir", model, "--after", "place", "--cpu-devices", "2",
                         "--log-device-placement")
    assert rc == 0, err
    assert "placement on 2 device(s)" in err and "requested /device:CPU:1" in err
    assert "on /job:localhost/replica:0/task:0/device:CPU:1" in out
    rc, out, err = flowc(capsys, "ir", model, "--after", "partition", "--cpu-devices", "2")
    assert rc == 0, err
    graphs = [line for line in out.splitlines() if line.startswith("graph @")]
    assert len(graphs) == 2 and "_Send(" in out and "_Recv()" in out
    rc, out, err = flowc(capsys, "compile", model, "-o", tmp_path / "art", "--cpu-devices", "2")
    assert rc == 0, err
    import numpy as np
    np.save(tmp_path / "x.npy", np.array([[1, -2, 3], [-4, 5, 6]], np.float32))
    rc, out, err = flowc(capsys, "run", tmp_path / "art", "--feed", f"x={tmp_path / 'x.npy'}")
    assert rc == 0, err
    assert "8" in out and "22" in out                       # relu(2x) summed per row
    rc, out, err = flowc(capsys, "ir", model, "--after", "place")
    assert rc == 1 and "cannot place /device:CPU:1" in err


def test_queue_ops_run_where_the_queue_lives_whatever_device_block_encloses_them(graph):
    with fl.device("/cpu:1"):
        q = fl.FIFOQueue(4, [fl.float32], shapes=[[2]], name="q")
    x = fl.placeholder(fl.float32, [2], name="x")
    with fl.device("/cpu:0"):                      # not the queue's device: no conflict
        put = q.enqueue([fl.multiply(x, 2.0, name="doubled")], name="put")
        got = fl.add(q.dequeue(name="take"), 1.0, name="got")
    step = make_step_graph(fl.get_default_graph(), [x.output], [got.output], [put.node])
    optimize(step, PipelineOptions(cpu_devices=2,
                                   passes=("prune", "infer-shapes", "place", "partition")))
    where = {n: step.graph.node(n).assigned_device for n in ("put", "take", "doubled", "got")}
    assert where == {"put": CPU(1), "take": CPU(1), "doubled": CPU(0), "got": CPU(0)}
    with fl.Session(config=FOUR) as sess:
        sess.run(put, {x: np.array([1, 2], np.float32)})
        np.testing.assert_array_equal(sess.run(got), [3, 5])


def test_colocated_ops_go_to_their_targets_device_in_steps_that_prune_the_target(graph):
    with fl.device("/cpu:1"):
        v = fl.Variable(np.ones(2, np.float32), name="v")
    x = fl.placeholder(fl.float32, [2], name="x")
    with fl.device("/cpu:0"), fl.colocate_with(v):   # the colocation wins over the block
        y = fl.multiply(x, 3.0, name="y")
    g = partitioned([y], [x])
    assert not [n for n in g if n.op == "VarHandleOp"]   # the step does not need the variable
    assert g.node("y").assigned_device == CPU(1)


def test_a_step_fed_values_it_does_not_use_checks_them_all(graph):
    """A one-device step that reads some of the feed dict's values runs alone (no rendezvous
    or worker thread), and every value fed is still checked, used or not."""
    x = fl.placeholder(fl.float32, [], name="x")
    unused = fl.placeholder(fl.float32, [3], name="a_unused")
    v = fl.Variable(np.float32(0.0), name="v")
    step = fl.assign_add(v, 1.0).op
    y = x * 2.0
    feed = {unused: np.zeros(3, np.float32), x: np.float32(4)}
    with fl.Session(graph=graph) as sess:
        sess.run(fl.global_variables_initializer())
        for _ in range(3):
            assert sess.run(step, feed) is None
            assert sess.run(y, feed) == 8
        assert sess.run(v.value()) == 3
        with pytest.raises(FeedError, match="a_unused"):
            sess.run(y, {unused: np.zeros(4, np.float32), x: np.float32(5)})
        assert sess.run(y, {unused: np.zeros(3, np.float32), x: np.float32(5)}) == 10
