"""fl.train.replica_device_setter: variables on ps tasks (round-robin or greedy by bytes),
everything else on the worker, and a placed training step that keeps each variable's reads,
updates and slots on its ps task."""
import numpy as np

import dsl as fl
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize

PS0, PS1 = "/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"
WORKER = "/job:worker/replica:0/task:0/device:CPU:0"


def test_round_robin_and_greedy_strategies(graph):
    with fl.device(fl.train.replica_device_setter(ps_tasks=2)):
        vs = [fl.Variable(np.zeros([n], np.float32), name=f"v{k}")
              for k, n in enumerate((100, 10, 10, 50))]
        y = vs[1].value() * 2.0
    assert [v.op.device for v in vs] == ["/job:ps/task:0", "/job:ps/task:1"] * 2
    assert y.op.device == "/job:worker"
    greedy = fl.train.GreedyLoadBalancingStrategy(2)
    with fl.device(fl.train.replica_device_setter(ps_tasks=2, ps_strategy=greedy)):
        gs = [fl.Variable(np.zeros([n], np.float32), name=f"g{k}")
              for k, n in enumerate((100, 10, 10, 50))]
    assert [v.op.device for v in gs] == ["/job:ps/task:0", "/job:ps/task:1",
                                         "/job:ps/task:1", "/job:ps/task:1"]
    assert greedy.loads == [400, 280]
    assert fl.train.replica_device_setter(cluster={"worker": ["a:1"]}) is None


def test_a_training_step_keeps_variables_and_their_updates_on_ps(graph):
    with fl.device(fl.train.replica_device_setter(cluster={"ps": ["a:1", "b:2"]})):
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        w = fl.Variable(fl.glorot_uniform_initializer(seed=1), shape=[4, 3], name="w")
        b = fl.Variable(fl.zeros_initializer(), shape=[3], name="b")
        loss = fl.reduce_sum(fl.square(x @ w + b))
        step = fl.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    sg = make_step_graph(fl.get_default_graph(), [x.output], [loss.output], [step.node])
    optimize(sg, PipelineOptions(devices=(PS0, PS1, WORKER)))
    device = {n.name: n.assigned_device for n in sg.graph}
    assert device["w"] == device["w/Momentum"] == PS0 and device["b"] == device["b/Momentum"] == PS1
    for n in sg.graph:
        if n.op in ("AssignSubVariableOp", "AssignVariableOp", "ReadVariableOp"):
            assert n.assigned_device in (PS0, PS1), n.name
        if n.op == "MatMul":
            assert n.assigned_device == WORKER
