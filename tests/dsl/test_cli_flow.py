"""``flowc check`` and ``flowc ir --format json|dot`` on ``*.flow`` models."""
import json
import os
import shutil
import subprocess
import textwrap

import pytest

from compiler.cli import main
from compiler.cli.graph_dot import graph_to_dot
from compiler.ir.graph import Graph
from compiler.ir.types import TensorType
from cli_runner import flowc
from repo_paths import ROOT, TESTS

MLP = os.path.join(ROOT, "examples", "mlp.flow")
ERRORS = os.path.join(TESTS, "flow_errors")

SMALL = textwrap.dedent("""\
    input x: f32[2, 3]
    device "/cpu:0" {
      let h = nn.relu(x * 2.0)
    }
    output y = reduce_sum(h, axis=1)
    """)


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.flow"
    path.write_text(SMALL)
    return path


def test_check_ok_prints_a_summary(capsys):
    rc, out, err = flowc(capsys, "check", MLP)
    assert rc == 0 and err == ""
    assert out.splitlines() == [
        f"{MLP}: ok",
        "  inputs:  x f32[?,784]",
        "  outputs: probs f32[?,10], predictions i64[?]",
        "  nodes:   18 as built, 20 in the step graph",
    ]


def test_check_reports_the_error_with_its_position(capsys):
    bad = os.path.join(ERRORS, "shape_mismatch.flow")
    rc, out, err = flowc(capsys, "check", bad)
    assert rc == 1 and out == ""
    assert err.startswith(f"flowc: error: {bad}:4:9: cannot apply '@': node 'MatMul'")
    assert err.splitlines()[1:] == ["  let c = a @ b", "          ^"]


def test_check_reports_every_model_and_fails_if_any_fails(capsys):
    syntax = os.path.join(ERRORS, "missing_comma.flow")
    semantic = os.path.join(ERRORS, "unknown_name.flow")
    rc, out, err = flowc(capsys, "check", syntax, MLP, semantic)
    assert rc == 1
    assert out.startswith(f"{MLP}: ok\n")
    errors = [line for line in err.splitlines() if line.startswith("flowc: error: ")]
    assert [e[len("flowc: error: "):].split(":")[0] for e in errors] == [syntax, semantic]
    assert err.rstrip().endswith("flowc: 2 of 3 models have errors")


def test_check_honours_fetch_and_catches_unknown_fetch(capsys, small):
    rc, out, _ = flowc(capsys, "check", small, "--fetch", "Relu")
    assert rc == 0 and "  outputs: Relu f32[2,3]" in out
    rc, _, err = flowc(capsys, "check", small, "--fetch", "nope")
    assert rc == 1 and "unknown fetch 'nope'" in err


def test_json_format_lists_every_node_field(capsys, small):
    rc, out, _ = flowc(capsys, "ir", small, "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert (doc["format"], doc["version"], doc["graph"]) == ("flowc-graph", 1, "small")
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert list(nodes["x"]) == ["name", "op", "inputs", "control_inputs", "attrs", "outputs",
                                "device", "assigned_device", "location"]
    assert nodes["x"]["attrs"] == {"dtype": "f32", "shape": [2, 3]}
    relu = nodes["Relu"]
    assert relu["op"] == "Relu" and relu["inputs"] == ["Mul"]
    assert relu["outputs"] == [{"type": "f32[2,3]", "dtype": "f32", "shape": [2, 3]}]
    assert relu["device"] == "/device:CPU:0" and relu["assigned_device"] == ""
    assert relu["location"] == {"file": str(small), "line": 3, "col": 11}
    assert nodes["y"]["device"] == ""


def test_json_summarizes_large_constants_and_keeps_small_ones(capsys):
    rc, out, _ = flowc(capsys, "ir", MLP, "--format", "json")
    nodes = {n["name"]: n for n in json.loads(out)["nodes"]}
    weights = nodes["dense1/weights"]["attrs"]["value"]
    assert weights["shape"] == [784, 256] and weights["bytes"] == 784 * 256 * 4
    assert len(weights["sha256"]) == 64 and "values" not in weights
    assert nodes["Const"]["attrs"]["value"] == {"dtype": "i32", "shape": [], "values": [1]}


def test_json_after_a_pass_and_to_a_file(capsys, small, tmp_path):
    out_file = tmp_path / "g.json"
    rc, out, _ = flowc(capsys, "ir", small, "--after", "infer-shapes", "--format", "json",
                       "-o", out_file)
    assert rc == 0 and out == ""
    ops = [n["op"] for n in json.loads(out_file.read_text())["nodes"]]
    assert "_Retval" in ops


def test_dot_has_shapes_device_clusters_and_dashed_control_edges(capsys, small):
    rc, out, _ = flowc(capsys, "ir", small, "--format", "dot")
    assert rc == 0 and out.startswith('digraph "small" {')
    assert '"Relu" [label="Relu\\nRelu\\nf32[2,3]"];' in out
    assert 'subgraph cluster_0 {' in out and 'label="/device:CPU:0"' in out
    g = Graph("ctl")
    a = g.add_node("Placeholder", (), {"dtype": "f32", "shape": [2]}, name="a",
                   output_types=[TensorType("f32", [2])])
    b = g.add_node("Relu", [a.output(0)], {"T": "f32"}, name="b",
                   output_types=[TensorType("f32", [2])])
    b.add_control_input(g.add_node("NoOp", (), {}, name="init", output_types=[]))
    assert '"init" -> "b" [style=dashed];' in graph_to_dot(g)


def test_dot_styles_send_recv_pairs():
    g = Graph("comm")
    a = g.add_node("Placeholder", (), {"dtype": "f32", "shape": [2]}, name="a",
                   output_types=[TensorType("f32", [2])])
    g.add_node("_Send", [a.output(0)], {"tensor_name": "a:0"}, name="send", output_types=[])
    g.add_node("_Recv", (), {"tensor_name": "a:0"}, name="recv",
               output_types=[TensorType("f32", [2])])
    dot = graph_to_dot(g)
    assert '"send" [label="send\\n_Send", shape=cds' in dot
    assert '"recv" [label="recv\\n_Recv\\nf32[2]", shape=cds' in dot
    assert '"send" -> "recv" [style="dotted,bold"' in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_dot_text_is_valid_graphviz_and_renders(capsys, small, tmp_path):
    rc, out, _ = flowc(capsys, "ir", MLP, "--after", "cse", "--format", "dot")
    proc = subprocess.run(["dot", "-Tsvg"], input=out, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    svg = tmp_path / "g.svg"
    rc, out, _ = flowc(capsys, "ir", small, "--format", "dot", "-o", svg)
    assert rc == 0 and out == ""
    assert "<svg" in svg.read_text()


def test_rendering_without_graphviz_is_a_clear_error(capsys, small, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    rc, _, err = flowc(capsys, "ir", small, "--format", "dot", "-o", tmp_path / "g.png")
    assert rc == 1
    assert "rendering needs Graphviz's 'dot' program" in err
    assert not (tmp_path / "g.png").exists()


def test_only_dot_renders_to_images(capsys, small, tmp_path):
    rc, _, err = flowc(capsys, "ir", small, "--format", "json", "-o", tmp_path / "g.svg")
    assert rc == 1 and "only --format dot can be rendered" in err


def test_dot_text_to_a_dot_file(capsys, small, tmp_path):
    path = tmp_path / "g.dot"
    rc, out, _ = flowc(capsys, "ir", small, "--format", "dot", "-o", path)
    assert rc == 0 and out == "" and path.read_text().startswith('digraph "small"')


ERROR_CASES = sorted(f for f in os.listdir(ERRORS) if f.endswith(".flow"))


def test_there_are_at_least_42_error_cases():
    assert len(ERROR_CASES) >= 42


@pytest.mark.parametrize("name", ERROR_CASES)
def test_check_reports_each_bad_model_at_its_expected_line(capsys, name):
    if name == "colocate_not_supported.flow":
        import dsl
        if hasattr(dsl, "colocate_with"):
            pytest.skip("fl.colocate_with exists now: colocate_with blocks are supported")
    path = os.path.join(ERRORS, name)
    with open(path, encoding="utf-8") as f:
        expected = f.readline()[len("# expect: "):].rstrip("\n")
    rc, out, err = flowc(capsys, "check", path)
    assert rc == 1 and out == ""
    first = err.splitlines()[0].replace(ERRORS + os.sep, "")
    assert first == "flowc: error: " + expected.replace(": error: ", ": ", 1)


def test_check_reports_every_error_of_a_model_without_cascades(tmp_path, capsys):
    model = tmp_path / "many.flow"
    model.write_text(textwrap.dedent("""\
        input x: f32[?, 4]
        let a = x @ undefined_w
        let b = a + 1.0
        input z: f99[3]
        output y = reduce_sum(x, axis=5)
        output ok = x * 2.0
        """))
    rc, out, err = flowc(capsys, "check", model)
    assert rc == 1
    import re
    where = re.findall(r"many\.flow:(\d+):(\d+): ", err)
    assert where == [("2", "13"), ("4", "10"), ("5", "12")]
    assert "unknown name 'undefined_w'" in err and "'b'" not in err   # b: no cascade
    assert err.rstrip().endswith("3 errors")
