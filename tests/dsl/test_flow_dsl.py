"""The text DSL (``*.flow``): the MLP example against its Python twin, the language's features
run on the interpreter, error messages with positions, and no traceback for any input."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsl as fl
import runtime
from compiler.cli import main
from compiler.ir.printer import print_graph
from dsl.flow import FlowError, build_flow, load_flow
from dsl.flow import initializers as init
from repo_paths import ROOT, TESTS

EXAMPLES = os.path.join(ROOT, "examples")
MLP = os.path.join(EXAMPLES, "mlp.flow")
ERRORS = os.path.join(TESTS, "flow_errors")
ERROR_CASES = sorted(f for f in os.listdir(ERRORS) if f.endswith(".flow"))


def mlp_twin() -> fl.Graph:
    """examples/mlp.flow written with the Python builder."""
    g = fl.Graph("mlp")
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 784], name="x")
        h = x
        sizes = [(784, 256), (256, 256), (256, 10)]
        for i, (fan_in, fan_out) in enumerate(sizes, start=1):
            with fl.name_scope(f"dense{i}"):
                w = init.he_normal([fan_in, fan_out], seed=2 * i - 1, name="weights")
                b = init.normal([fan_out], stddev=0.01, seed=2 * i, name="bias")
                h = fl.nn.bias_add(fl.matmul(h, w), b)
                if i < len(sizes):
                    h = fl.nn.relu(h)
        probs = fl.nn.softmax(h, name="probs")
        fl.argmax(probs, axis=1, name="predictions")
    return g


def cnn_twin() -> fl.Graph:
    """examples/cnn_forward.flow written with the Python builder."""
    g = fl.Graph("cnn_forward")
    with g.as_default():
        x = fl.placeholder(fl.f32, [None, 28, 28, 1], name="images")
        for i, (c_in, c_out) in enumerate(((1, 32), (32, 64)), start=1):
            with fl.name_scope(f"conv{i}"):
                k = init.he_normal([5, 5, c_in, c_out], seed=2 * i - 1, name="kernel")
                b = init.normal([c_out], stddev=0.01, seed=2 * i, name="bias")
                c = fl.nn.relu(fl.nn.bias_add(fl.nn.conv2d(x, k, strides=1, padding="SAME"), b))
                x = fl.nn.max_pool(c, ksize=2, strides=2, padding="VALID")
        with fl.name_scope("dense1"):
            flat = fl.reshape(x, [-1, 3136])
            w = init.he_normal([3136, 128], seed=5, name="weights")
            b = init.normal([128], stddev=0.01, seed=6, name="bias")
            h = fl.nn.relu(fl.nn.bias_add(fl.matmul(flat, w), b))
        with fl.name_scope("dense2"):
            w = init.he_normal([128, 10], seed=7, name="weights")
            b = init.normal([10], stddev=0.01, seed=8, name="bias")
            logits = fl.nn.bias_add(fl.matmul(h, w), b)
        probs = fl.nn.softmax(logits, name="probs")
        fl.argmax(probs, axis=1, name="predictions")
    return g


def without_locations(text: str) -> str:
    return re.sub(r"  # [^\n]*", "", text)


def test_mlp_flow_builds_the_same_ir_as_its_python_twin():
    program = load_flow(MLP)
    assert list(program.outputs) == ["probs", "predictions"]
    flow_ir = print_graph(program.graph, elide_constants=True)
    twin_ir = print_graph(mlp_twin(), elide_constants=True)
    assert without_locations(flow_ir) == without_locations(twin_ir)
    by_name = {n.name: n for n in program.graph}
    assert str(by_name["x"].location) == f"{MLP}:11:1"
    matmul = by_name["dense1/MatMul"].location          # written in the imported layers.flow
    assert (os.path.basename(matmul.file), matmul.line, matmul.col) == ("layers.flow", 5, 22)


def test_mlp_flow_compiles_and_runs_like_the_twin(tmp_path, capsys):
    out = str(tmp_path / "mlp")
    assert main(["compile", MLP, "-o", out]) == 0
    assert "fetches: probs f32[?,10], predictions i64[?]" in capsys.readouterr().out
    batch = np.random.default_rng(7).random((5, 784), dtype=np.float32)
    probs, predictions = runtime.load_artifact(out).run({"x": batch})
    twin = mlp_twin()
    with fl.Session(graph=twin, backend="interpreter") as sess:
        want_probs, want_pred = sess.run(["probs:0", "predictions:0"], {"x:0": batch})
    np.testing.assert_allclose(probs, want_probs, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(predictions, want_pred)


def test_cnn_flow_builds_the_same_ir_as_its_twin_and_runs_like_it(tmp_path, capsys):
    path = os.path.join(EXAMPLES, "cnn_forward.flow")
    flow_ir = print_graph(load_flow(path).graph, elide_constants=True)
    assert without_locations(flow_ir) == without_locations(print_graph(cnn_twin(),
                                                                       elide_constants=True))
    out = str(tmp_path / "cnn")
    assert main(["compile", path, "-o", out]) == 0
    assert "fetches: probs f32[?,10], predictions i64[?]" in capsys.readouterr().out
    batch = np.random.default_rng(3).random((3, 28, 28, 1), dtype=np.float32)
    probs, predictions = runtime.load_artifact(out).run({"images": batch})
    with fl.Session(graph=cnn_twin(), backend="interpreter") as sess:
        want_probs, want_pred = sess.run(["probs:0", "predictions:0"], {"images:0": batch})
    np.testing.assert_allclose(probs, want_probs, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(predictions, want_pred)


CONTROL_FLOW = """\
input x: f32[3]
input n: i32[]
input p: bool[]
let y = if (p) {
  let doubled = x * 2.0
  return doubled + 1.0
} else {
  return x - 1.0
}
while (i < n) carry (i = 0, acc = x) {
  return [i + 1, acc * 1.5]
}
output a = y
output b = acc
output steps = i
"""


def test_if_and_while_build_cond_and_while_loop_and_run_in_both_backends(tmp_path):
    path = tmp_path / "cf.flow"
    path.write_text(CONTROL_FLOW)
    program = load_flow(str(path))
    ops = {n.op for n in program.graph}
    assert {"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"} <= ops
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    fetches = list(program.outputs.values())
    for p, n, want_a, want_b in ((True, 3, 2 * xv + 1, xv * 1.5 ** 3), (False, 0, xv - 1, xv)):
        for backend in ("interpreter", "c"):
            with fl.Session(graph=program.graph, backend=backend) as sess:
                a, b, steps = sess.run(fetches, {"x:0": xv, "n:0": np.int32(n), "p:0": p})
            np.testing.assert_allclose(a, want_a, rtol=1e-6)
            np.testing.assert_allclose(b, want_b, rtol=1e-6)
            assert steps == n


def test_cli_loads_flow_files_in_a_fresh_process():
    proc = subprocess.run([sys.executable, "-m", "compiler.cli", "ir", "examples/mlp.flow",
                           "--elide-constants"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "%probs          = Softmax(%dense3/BiasAdd)" in proc.stdout
    assert "# examples/mlp.flow:26:16" in proc.stdout


def test_cli_reports_flow_errors_with_position(capsys):
    bad = os.path.join(ERRORS, "missing_comma.flow")
    assert main(["ir", bad]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"flowc: error: {bad}:3:19: missing ','")
    assert "let y = maximum(x 2.0)\n" in err


def test_compiler_package_never_imports_dsl():
    offenders = []
    for folder, _, files in os.walk(os.path.join(ROOT, "compiler")):
        for f in files:
            if f.endswith(".py"):
                text = open(os.path.join(folder, f), encoding="utf-8").read()
                if re.search(r"^\s*(import dsl|from dsl)\b", text, re.M):
                    offenders.append(f)
    assert offenders == []


FEATURES = '''
# every kind of expression, checked against numpy below
input x: f32[2, 3]
input flags: bool[2, 3]

def affine(v, scale, shift) {
  let scaled = v * scale
  return scaled + shift
}

let arith = 1.0 + 2.0 * x ** 2 - x / 4.0
let neg = -x ** 2
let prod = x @ transpose(x)
name_scope "block" {
  device "/cpu:0" {
    let kw = affine(x, shift=1.0, scale=3.0)
  }
}
let cmp = (x >= 0.5) and not flags or (x == 0.25)
let ne = x != 0.25
let sl = x[:, 1:3]
let row = x[1]
let raw = MatMul(x, x, transpose_b=true)
let mean = reduce_mean(x, axis=1, keepdims=true)
let stacked = concat([x, x], axis=0)
let n = 2 + 3 * 4
output arith
output neg
output prod
output kw
output cmp
output ne
output sl
output row
output raw
output mean
output stacked
output scaled_n = x * n
output named = nn.relu(x)
'''


def test_language_features_compute_what_numpy_does():
    program = build_flow(FEATURES, "features.flow")
    x = np.array([[0.25, 0.5, 1.0], [2.0, -1.0, 0.75]], np.float32)
    flags = np.array([[True, False, True], [False, False, True]])
    with fl.Session(graph=program.graph, backend="interpreter") as sess:
        got = sess.run(program.outputs, {"x:0": x, "flags:0": flags})
    want = {
        "arith": 1.0 + 2.0 * x ** 2 - x / 4.0, "neg": -(x ** 2), "prod": x @ x.T,
        "kw": x * 3.0 + 1.0, "cmp": ((x >= 0.5) & ~flags) | (x == 0.25), "ne": x != 0.25,
        "sl": x[:, 1:3], "row": x[1], "raw": x @ x.T, "mean": x.mean(axis=1, keepdims=True),
        "stacked": np.concatenate([x, x]), "scaled_n": x * 14, "named": np.maximum(x, 0),
    }
    assert set(got) == set(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, err_msg=name)
    nodes = {n.name: n for n in program.graph}
    assert nodes["named"].op == "Relu"
    kw_add = nodes["block/AddV2"]
    assert (kw_add.device, str(kw_add.location)) == ("/device:CPU:0", "features.flow:8:10")


def test_imports_run_each_file_once_relative_to_the_importer(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "base.flow").write_text("let scale = 2.0\n")
    (tmp_path / "lib" / "left.flow").write_text(
        'import "base.flow"\ndef left(v) { return v * scale }\n')
    (tmp_path / "lib" / "right.flow").write_text(
        'import "base.flow"\ndef right(v) {\n  return v +\\\n    scale\n}\n')
    main_file = tmp_path / "model.flow"
    main_file.write_text('import "lib/left.flow"\nimport "lib/right.flow"\n'
                         'input x: f32[2]\noutput y = left(right(\n  x))\n')
    program = load_flow(str(main_file))
    assert [n.op for n in program.graph] == ["Placeholder", "Const", "AddV2", "Const", "Mul"]
    with fl.Session(graph=program.graph, backend="interpreter") as sess:
        got = sess.run(program.outputs["y"], {"x:0": np.array([1.0, -1.0], np.float32)})
    np.testing.assert_allclose(got, [6.0, 2.0])
    add = next(n for n in program.graph if n.op == "AddV2")
    assert os.path.basename(add.location.file) == "right.flow" and add.location.line == 3


@pytest.mark.parametrize("name", ERROR_CASES)
def test_bad_model_reports_its_first_error(name):
    path = os.path.join(ERRORS, name)
    with open(path, encoding="utf-8") as f:
        header = f.readline()
    assert header.startswith("# expect: ")
    with pytest.raises(FlowError) as info:
        load_flow(path)
    lines = str(info.value).splitlines()
    assert lines[0].replace(ERRORS + os.sep, "") == header[len("# expect: "):].rstrip("\n")
    err = info.value
    assert len(lines) == 3 and lines[2] == "  " + " " * (err.col - 1) + "^"


def test_there_are_many_error_cases():
    assert len(ERROR_CASES) >= 25


SNIPPETS = ["input x: f32[?, 3]\n", "let y = ", "x", " + ", " @ ", "nn.relu(", ")", "(", "[",
            "]", ", ", "1", "2.5", '"s"', "true", " == ", " = ", "\n", "{", "}", "def f(a) ",
            "return ", "output ", "name_scope \"n\" ", "device \"/cpu:0\" ",
            "import \"layers.flow\"",
            "var ", ":", "?", "not ", " and ", "MatMul(", "transpose_b=", "-", "**", "#c\n",
            "reduce_sum(", "axis=", "f(", "y", "\\\n", "$", "\t", "\"", "init.normal([2], seed=1)"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SNIPPETS), max_size=30))
def test_random_programs_raise_only_flow_errors(parts):
    try:
        build_flow("".join(parts), os.path.join(EXAMPLES, "random.flow"))
    except FlowError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_text_raises_only_flow_errors(text):
    try:
        build_flow(text, "arbitrary.flow")
    except FlowError:
        pass


_MLP_TEXT = open(MLP, encoding="utf-8").read()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_MLP_TEXT)), st.integers(0, 3),
                          st.sampled_from(list("(){}[],=:\"#\n .-*@x0?") + ["", "let ", "}"])),
                min_size=1, max_size=4))
def test_mutated_mlp_raises_only_flow_errors(edits):
    text = _MLP_TEXT
    for pos, cut, insert in edits:
        text = text[:pos] + insert + text[pos + cut:]
    try:
        build_flow(text, os.path.join(EXAMPLES, "mutated.flow"))
    except FlowError as e:
        assert re.match(r"^.*mutated\.flow:\d+:\d+: error: |^.*layers\.flow:\d+:\d+: error: ",
                        str(e)), str(e)


VARIABLES = '''
input x: f32[?, 2]
def scaled(v) {
  var s: f32 = constant(2.0)
  return v * s
}
name_scope "layer" {
  var w: f32[2, 3] = glorot_uniform(seed=1)
  var b: f32[3] = constant(0.5)
  var c: f32[3]
  var d: f32[3] = init.normal([3], seed=2) * 0.0 + [1.0, 2.0, 3.0]
  var n: i64 = 0
}
let loss = 1.0
let data = scaled(scaled(x))
output y = data @ w + b + d
output w
'''


def test_var_declarations_make_initialised_variables():
    program = build_flow(VARIABLES, "vars.flow")
    g = program.graph
    names = [v.name for v in g.get_collection(fl.GraphKeys.GLOBAL_VARIABLES)]
    assert names == ["layer/w:0", "layer/b:0", "layer/c:0", "layer/d:0", "layer/n:0", "s:0",
                     "s_1:0"]
    handles = {n.name: n for n in g if n.op == "VarHandleOp"}
    assert handles["layer/w"].attrs["shape"] == (2, 3) and str(handles["layer/w"].location) == \
        "vars.flow:8:3"
    assert handles["layer/n"].attrs["dtype"] == fl.int64
    with g.as_default():
        init = fl.global_variables_initializer()
    with fl.Session(graph=g, backend="interpreter") as sess:
        sess.run(init)
        x = np.ones([1, 2], np.float32)
        y, w = sess.run([program.outputs["y"], program.outputs["w"]], {"x:0": x})
        values = sess.run({k: f"{k}/Read/ReadVariableOp:0" for k in ("layer/c", "layer/d")})
    np.testing.assert_allclose(y, (4 * x) @ w + 0.5 + [1.0, 2.0, 3.0], rtol=1e-6)
    assert np.all(np.abs(w) <= np.sqrt(6 / 5)) and np.all(np.abs(values["layer/c"]) <= 1.0)
    np.testing.assert_array_equal(values["layer/d"], [1.0, 2.0, 3.0])


def test_training_keywords_are_still_names_elsewhere():
    program = build_flow("input x: f32[?, 2]\nlet loss = reduce_sum(x)\nlet train = loss * 2.0\n"
                         "metric loss2 = train\nloss = train + 1.0\n", "names.flow")
    decl = program.training
    assert decl.loss.value.op.type == "AddV2" and list(decl.metrics) == ["loss2"]
    assert decl.optimizer is None and decl.data is None and decl.setting("steps") == 1000
