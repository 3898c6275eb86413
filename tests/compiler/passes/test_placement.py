"""The place pass: colocation groups, partial and conflicting constraints, defaults, and the
placement report."""
import pytest

import dsl as fl
from compiler.devices import Device, local_devices, merge_device_specs, parse_device_spec
from compiler.passes.manager import PassContext, get_pass
from compiler.options import PipelineOptions
from compiler.passes.place import PlacementError
from compiler.step import make_step_graph, optimize
from compiler.errors import GraphError

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}".format


def place(fetches, targets=(), cpus=4, **options):
    g = fl.get_default_graph()
    step = make_step_graph(g, [], [f.output for f in fetches], [t.node for t in targets])
    ctx = PassContext(PipelineOptions(cpu_devices=cpus, **options))
    for name in ("prune", "infer-shapes", "place"):
        get_pass(name).run(step.graph, ctx)
    return {n.name: n.assigned_device for n in step.graph}, ctx.placement_report


def test_device_specs_parse_merge_and_match():
    assert parse_device_spec("/job:ps/task:1/device:gpu:0") == {"job": "ps", "task": "1",
                                                               "device": "GPU:0"}
    assert parse_device_spec("cpu:1") == {"device": "CPU:1"}
    assert merge_device_specs("/job:ps/task:0", "/task:1/device:CPU:2") == \
        "/job:ps/task:1/device:CPU:2"
    d = Device.parse(CPU(2))
    assert d.matches("/device:CPU:*") and d.matches("/job:localhost") and not d.matches("/cpu:1")
    assert [x.short for x in local_devices(2, 1)] == ["CPU:0", "CPU:1", "GPU:0"]
    for bad in ("/job", "/task:x", "/device:"):
        with pytest.raises(GraphError, match="bad device spec"):
            parse_device_spec(bad)


def test_a_variable_its_reads_updates_and_colocated_ops_share_a_device(graph):
    with fl.device("/cpu:2"):
        w = fl.Variable(fl.ones_initializer(), shape=[2, 2], name="w")
    x = fl.constant([[1.0, 2.0]])
    y = x @ w
    upd = w.assign_sub(fl.ones([2, 2]))
    with fl.colocate_with(w):
        slot = fl.Variable(fl.zeros_initializer(), shape=[2, 2], name="w/Momentum")
    where, report = place([y, upd, slot.value()])
    for name in ("w", "w/Read/ReadVariableOp", "AssignSubVariableOp", "w/Momentum",
                 "w/Momentum/Read/ReadVariableOp"):
        assert where[name] == CPU(2), name
    assert where["MatMul"] == CPU(2)                          # unconstrained: with its inputs
    assert report.placements["AssignSubVariableOp"].reason == \
        "colocated with 'w', which requests /device:CPU:2"


def test_partial_specs_pick_the_first_matching_device(graph):
    with fl.device("/device:CPU:*"):
        a = fl.constant(1.0) + 1.0
    with fl.device("/job:localhost"):
        b = a * 2.0
    with fl.device("/cpu:3"):
        c = b - 1.0
    where, _ = place([c])
    assert where[a.op.name] == CPU(0) and where[b.op.name] == CPU(0)
    assert where[c.op.name] == CPU(3)


def test_unconstrained_sources_go_with_their_consumers(graph):
    x = fl.constant([1.0, 2.0], name="x")
    with fl.device("/cpu:1"):
        y = x * 3.0
    where, report = place([y])
    assert where["x"] == CPU(1)
    assert "consumer" in report.placements["x"].reason


def test_unplaced_state_stays_on_the_default_device_whatever_the_step(graph):
    """A variable nobody placed does not follow its data: the step that initializes it (from
    a value on CPU:2) and the step that reads it (for CPU:3) both find it on CPU:0."""
    with fl.device("/cpu:2"):
        start = fl.constant([1.0, 2.0], name="start") * 2.0
    v = fl.Variable(start, name="v")
    with fl.device("/cpu:3"):
        doubled = v.value() * 2.0
    q = fl.FIFOQueue(4, [fl.float32], shapes=[[2]], name="q")
    init_where, report = place([], targets=[v.initializer])
    read_where, _ = place([doubled], targets=[q.enqueue([doubled])])
    assert init_where["v"] == read_where["v"] == CPU(0)
    assert init_where["v/Assign"] == CPU(0) and read_where["q"] == CPU(0)
    assert "state without a device request" in report.placements["v"].reason


def test_conflicting_constraints_name_both_nodes_and_the_chain(graph):
    with fl.device("/cpu:1"):
        w = fl.Variable(1.0, name="w")
    with fl.device("/cpu:2"):          # a raw read (w.read_value() would colocate with w)
        r = fl.raw_ops.ReadVariableOp(resource=w.handle, dtype=fl.float32)
    with pytest.raises(PlacementError) as e:
        place([r])
    text = str(e.value)
    assert "conflicting devices" in text and "/device:CPU:2" in text and "/device:CPU:1" in text
    assert "uses the resource 'w'" in text and "test_placement.py" in text


def test_a_device_that_does_not_exist_is_an_error(graph):
    with fl.device("/device:GPU:0"):
        y = fl.constant(1.0) + 2.0
    with pytest.raises(PlacementError, match=r"cannot place /device:GPU:0.*available: .*CPU:0"):
        place([y], cpus=1)
    with fl.device("/cpu:7"):
        z = fl.constant(1.0) + 2.0
    with pytest.raises(PlacementError, match="no available device matches"):
        place([z], cpus=2)


def test_placement_is_deterministic_and_logged(graph, capsys):
    xs = [fl.constant(float(i)) for i in range(6)]
    with fl.device("/cpu:1"):
        s = fl.add_n(xs)
    first, _ = place([s], log_device_placement=True)
    again, _ = place([s])
    assert first == again
    err = capsys.readouterr().err
    assert "placement on 4 device(s)" in err and "AddN" in err


def test_the_default_pipeline_places_everything_on_one_cpu(graph):
    y = fl.constant(2.0) * fl.placeholder(fl.float32, [], name="p")
    step = make_step_graph(fl.get_default_graph(), [], [y.output])
    step.feeds[:] = [n for n in step.graph if n.op == "Placeholder"]
    optimize(step, PipelineOptions())
    assert {n.assigned_device for n in step.graph} == {CPU(0)}
