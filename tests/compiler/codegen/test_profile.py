"""Per-kernel profiles: ``flowc compile --profile`` + ``flowc run --profile``, and Session run
metadata with ``RunOptions(trace_level=FULL_TRACE)``. Every kernel is timed and named with its
op and source line; Fused kernels list the nodes they replaced; default builds carry no
profiling code."""
import os
import re

import numpy as np
import pytest

import dsl as fl
from cli_runner import flowc
from compiler.ir.parser import parse_graph
from runtime import profile
from runtime.artifact import load_artifact

MODEL = """\
input x: f32[?, 8]
let h = nn.relu(x * 2.0 + 1.0)
let m = h @ fill([8, 3], 0.5)
output y = reduce_sum(tanh(m), axis=1)
"""

# Nodes of a step graph that run no kernel of their own.
_NO_KERNEL = {"Placeholder", "Const", "_Retval", "NoOp", "_Sink"}
_CALL = re.compile(r'if \(k[0-9a-f]+_\w+\(flowc_T, s_\w+, flowc_rt, "([^"]*)"')


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "model.flow").write_text(MODEL)
    np.save(tmp_path / "x.npy", np.linspace(-1, 1, 40, dtype=np.float32).reshape(5, 8))
    return tmp_path


def _compile(capsys, model_dir, name, *flags):
    out = model_dir / name
    rc, _, err = flowc(capsys, "compile", model_dir / "model.flow", "-o", out, *flags)
    assert rc == 0, err
    return out


def test_flowc_run_profile_times_every_kernel_with_its_source_line(capsys, model_dir):
    art = _compile(capsys, model_dir, "prof", "--profile")
    rc, out, err = flowc(capsys, "run", art, "--feed", f"x={model_dir / 'x.npy'}", "--profile", "3")
    assert rc == 0, err
    assert out.startswith("y = array(")
    assert "profile: 3 steps" in out and "per op type:" in out

    artifact = load_artifact(str(art))
    table = artifact.executable.kernel_table["kernels"]
    # every kernel the entry calls has a counter, and the table names the same nodes
    source = (art / "cpu_0.c").read_text()
    called = _CALL.findall(source)
    assert called and sorted(called) == sorted(k["node"] for k in table)
    graph = parse_graph((art / "graph.ir").read_text())
    assert sorted(k["node"] for k in table) == sorted(
        n.name for n in graph if n.op not in _NO_KERNEL)

    # the report names each kernel's op and its line in the model file
    for k in table:
        assert "model.flow:" in k["location"], k
        row = next(line for line in out.splitlines() if f" {k['node']} " in line)
        assert k["op"] in row and k["location"] in row
    lines = {int(k["location"].split(":")[-2]) for k in table}
    assert {2, 3, 4} <= lines

    # counters: three calls each, percentages over the kernels' total
    results, prof = profile.profile_runs(artifact.executable,
                                         lambda: artifact.run({"x": np.ones((5, 8), np.float32)}), 4)
    assert {k.calls for k in prof.kernels} == {4}
    assert prof.total_ns == sum(k.total_ns for k in prof.kernels) > 0
    assert [k.total_ns for k in prof.kernels] == sorted((k.total_ns for k in prof.kernels),
                                                       reverse=True)
    by_op = {s.op: s for s in prof.by_op()}
    assert sum(s.total_ns for s in by_op.values()) == prof.total_ns
    assert by_op["MatMul"].kernels == 1 and by_op["MatMul"].calls == 4


def test_fused_kernels_list_the_nodes_they_replaced_with_their_lines(capsys, model_dir):
    art = _compile(capsys, model_dir, "prof", "--profile")
    table = load_artifact(str(art)).executable.kernel_table["kernels"]
    fused = [k for k in table if k["op"] == "Fused"]
    assert fused, "the model's elementwise chains fuse"
    replaced = {s["op"]: s for k in fused for s in k["fused_from"]}
    assert {"Mul", "AddV2", "Relu"} <= set(replaced)
    for op in ("Mul", "AddV2", "Relu"):
        assert re.search(r"model\.flow:2:\d+$", replaced[op]["location"]), replaced[op]
    rc, out, _ = flowc(capsys, "run", art, "--feed", f"x={model_dir / 'x.npy'}", "--profile")
    assert rc == 0
    assert re.search(r"fused \S+ \(Relu\) \S*model\.flow:2:\d+", out)


def test_default_build_has_no_profiling_code(capsys, model_dir):
    art = _compile(capsys, model_dir, "plain")
    source = (art / "cpu_0.c").read_text()
    assert "clock_gettime" not in source and "flowc_prof" not in source
    artifact = load_artifact(str(art))
    assert artifact.instrumentation == {"profile": False, "check_numerics": False}
    assert not profile.is_profiled(artifact.executable)
    with pytest.raises(AttributeError):
        artifact.executable.module.lib.flowc_profile_size()
    rc, _, err = flowc(capsys, "run", art, "--feed", f"x={model_dir / 'x.npy'}", "--profile")
    assert rc == 1 and "compiled without profiling" in err and "--profile" in err
    with pytest.raises(profile.NotProfiledError):
        profile.read(artifact.executable)


@pytest.mark.cpu_only
def test_session_full_trace_fills_run_metadata(graph):
    x = fl.placeholder(fl.float32, [None, 4], name="x")
    w = fl.Variable(np.full((4, 2), 0.5, np.float32), name="w")
    y = fl.reduce_sum(fl.nn.relu(fl.matmul(x, w)), name="y")
    with fl.Session() as sess:
        sess.run(fl.global_variables_initializer())
        xv = np.ones((3, 4), np.float32)
        plain = sess.run(y, {x: xv})
        compiled = sess.compile_count
        md = fl.RunMetadata()
        traced = sess.run(y, {x: xv}, options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
                          run_metadata=md)
        assert traced == plain == np.float32(12.0)
        assert sess.compile_count == compiled + 1          # a profiled build of its own
        stats = md.step_stats
        assert [d.device.endswith("CPU:0") for d in stats.devices] == [True]
        names = {k.node: k for k in stats.kernels}
        assert {"MatMul", "y"} <= set(names)
        this_file = os.path.basename(__file__)
        assert all(this_file in k.location for k in stats.kernels if k.node != "w")
        assert all(k.calls == 1 for k in stats.kernels)
        assert "MatMul" in stats.format()
        # the same traced step again: compiled once; untraced runs stay on the plain build
        sess.run(y, {x: xv}, options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
                 run_metadata=fl.RunMetadata())
        sess.run(y, {x: xv}, run_metadata=fl.RunMetadata())
        assert sess.compile_count == compiled + 1


def test_multi_device_step_reports_each_device(graph):
    x = fl.placeholder(fl.float32, [4], name="x")
    with fl.device("/cpu:0"):
        a = fl.exp(x, name="a")
    with fl.device("/cpu:1"):
        b = fl.reduce_sum(a * 3.0, name="b")
    config = fl.ConfigProto(device_count={"CPU": 2})
    with fl.Session(config=config) as sess:
        md = fl.RunMetadata()
        value = sess.run(b, {x: np.zeros(4, np.float32)},
                         options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
                         run_metadata=md)
    assert value == np.float32(12.0)
    devices = {d.device[-5:]: d for d in md.step_stats.devices}
    assert set(devices) == {"CPU:0", "CPU:1"}
    assert "a" in {k.node for k in devices["CPU:0"].kernels}
    assert "b" in {k.node for k in devices["CPU:1"].kernels}
    assert all(k.device == d.device for d in md.step_stats.devices for k in d.kernels)
    text = md.step_stats.format()
    assert text.count("device /job:localhost") == 2


def test_kernels_in_a_loop_count_every_iteration(graph):
    n = fl.placeholder(fl.int32, [], name="n")
    _, acc = fl.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, fl.tanh(a) + 1.0),
                           [0, fl.zeros([3])])
    with fl.Session() as sess:
        md = fl.RunMetadata()
        sess.run(acc, {n: 7}, options=fl.RunOptions(trace_level=fl.RunOptions.FULL_TRACE),
                 run_metadata=md)
    calls = {k.op: k.calls for k in md.step_stats.kernels}
    body = [c for op, c in calls.items() if op in ("Tanh", "Fused")]
    assert body == [7]
    assert calls["Less"] == 8                     # the condition runs once more
