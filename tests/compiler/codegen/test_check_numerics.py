"""``--check-numerics``: compiled checks after every floating-point output stop a step at the
first op that produced NaN or Inf, with an ``InvalidArgumentError`` naming the node, its op and
its source line, in the forward and in the backward pass. Without the flag no check is
emitted."""
import numpy as np
import pytest

import dsl as fl
from cli_runner import flowc
from compiler.codegen.emitter import emit_c
from compiler.options import PipelineOptions
from compiler.step import make_step_graph, optimize
from oracle import check_against_interpreter
from runtime.artifact import load_artifact

# line 2: sqrt of the fed value; line 3: log; line 4: the gradient (SqrtGrad, at line 2's op)
MODEL = """\
input x: f32[4]
let y = sqrt(x)
output loss = reduce_sum(log(y + 1.0))
output gx = gradients(loss, [x])[0]
"""


@pytest.fixture
def model_dir(tmp_path):
    (tmp_path / "model.flow").write_text(MODEL)
    for name, value in (("pos", 1.0), ("zero", 0.0), ("neg", -1.0)):
        np.save(tmp_path / f"{name}.npy", np.full(4, value, np.float32))
    return tmp_path


def _run(capsys, art, model_dir, feed):
    return flowc(capsys, "run", art, "--feed", f"x={model_dir / (feed + '.npy')}")


def test_flowc_check_numerics_names_the_op_and_line_forward_and_backward(capsys, model_dir):
    art = model_dir / "checked"
    rc, _, err = flowc(capsys, "compile", model_dir / "model.flow", "-o", art, "--check-numerics")
    assert rc == 0, err
    assert load_artifact(str(art)).instrumentation["check_numerics"] is True

    rc, out, err = _run(capsys, art, model_dir, "pos")
    assert rc == 0 and "gx = array([0.25, 0.25, 0.25, 0.25]" in out

    # forward: sqrt(-1) is the first NaN (log and everything after it are not blamed)
    rc, _, err = _run(capsys, art, model_dir, "neg")
    assert rc == 1
    assert "model.flow:2:9: node 'Sqrt': CheckNumerics: Sqrt: Tensor had NaN values" in err

    # backward: sqrt(0) is finite, its gradient 0.5 / sqrt(0) is not; the error points at the
    # forward op's line and says which op it is the gradient of
    rc, _, err = _run(capsys, art, model_dir, "zero")
    assert rc == 1
    assert "model.flow:2:9: node 'gradients/Sqrt_grad/SqrtGrad'" in err
    assert "SqrtGrad in the backward pass (gradient of 'Sqrt'): Tensor had Inf values" in err


def test_without_the_flag_no_check_is_emitted_and_nan_flows_through(capsys, model_dir):
    art = model_dir / "plain"
    rc, _, err = flowc(capsys, "compile", model_dir / "model.flow", "-o", art)
    assert rc == 0, err
    source = (art / "cpu_0.c").read_text()
    assert "flowc_nonfinite" not in source and "CheckNumerics" not in source
    rc, out, _ = _run(capsys, art, model_dir, "neg")
    assert rc == 0 and "loss = array(nan" in out


def test_session_check_numerics_raises_a_typed_error_in_the_gradient(graph):
    x = fl.placeholder(fl.float32, [3], name="x")
    w = fl.Variable(np.ones(3, np.float32), name="w")
    y = fl.sqrt(x * w, name="y")                                   # the forward op's line
    loss = fl.reduce_sum(y, name="loss")
    grad, = fl.gradients(loss, [w])
    line = y.op.node.location.line
    with fl.Session(config=fl.ConfigProto(check_numerics=True)) as sess:
        sess.run(fl.global_variables_initializer())
        assert sess.run(loss, {x: np.zeros(3, np.float32)}) == 0.0       # forward is finite
        with pytest.raises(fl.InvalidArgumentError) as e:
            sess.run(grad, {x: np.zeros(3, np.float32)})
        assert e.value.node.startswith("gradients/y_grad/")
        assert e.value.location.endswith(f"test_check_numerics.py:{line}:9")
        assert "gradient of 'y'" in str(e.value) and "Inf values" in str(e.value)
        # the session stays usable, and finite values pass the checks
        np.testing.assert_allclose(sess.run(grad, {x: np.full(3, 4.0, np.float32)}),
                                   np.full(3, 0.5 * 4.0 / 2.0, np.float32))
    with fl.Session() as sess:                                   # no checks: Inf*0 = NaN comes back
        sess.run(fl.global_variables_initializer())
        assert not np.isfinite(sess.run(grad, {x: np.zeros(3, np.float32)})).any()


def test_checks_in_a_loop_stop_at_the_iteration_that_overflows(graph):
    n = fl.placeholder(fl.int32, [], name="n")
    _, v = fl.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, fl.exp(v, name="grow")),
                         [0, fl.constant([1.0], fl.float32)])
    with fl.Session(config=fl.ConfigProto(check_numerics=True)) as sess:
        assert np.isfinite(sess.run(v, {n: 2})).all()               # e, e^e
        with pytest.raises(fl.InvalidArgumentError, match=r"Exp: Tensor had Inf values"):
            sess.run(v, {n: 4})                                     # e^e^e^e overflows f32


def test_checked_build_matches_the_interpreter_and_has_one_check_per_float_output(graph, rng):
    x = fl.placeholder(fl.float32, [5, 3], name="x")
    i = fl.placeholder(fl.int32, [5], name="i")
    a = fl.nn.softmax(fl.tanh(x) * 2.0)
    b = fl.reduce_max(x, axis=1) + fl.cast(i, fl.float32)
    c = i * 3                                                     # integers are not checked
    feeds = {"x": rng.normal(size=(5, 3)).astype(np.float32),
             "i": np.arange(5, dtype=np.int32)}
    check_against_interpreter(graph, {"a": a, "b": b, "c": c}, {x: feeds["x"], i: feeds["i"]})
    step = make_step_graph(graph, [x.output, i.output], [a.output, b.output, c.output])
    optimize(step, PipelineOptions(check_numerics=True))
    assert not any(n.op == "Fused" for n in step.graph)          # each op keeps its kernel
    from compiler.codegen.instrument import Instrumentation
    source = emit_c(step.graph, step.feeds, step.retvals,
                    instrumentation=Instrumentation(check_numerics=True)).source
    floats = [n for n in step.graph if n.op not in ("_Retval", "Const")
              and any(o.dtype.is_floating for o in n.outputs)]
    assert source.count("const int flowc_bad = ") == sum(
        1 for n in floats for o in n.outputs if o.dtype.is_floating)
    with fl.Session(config=fl.ConfigProto(check_numerics=True)) as sess:
        got = sess.run({"a": a, "b": b, "c": c}, {x: feeds["x"], i: feeds["i"]})
    with fl.Session(backend="interpreter") as sess:
        want = sess.run({"a": a, "b": b, "c": c}, {x: feeds["x"], i: feeds["i"]})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


def test_flowc_flags_environment_turns_the_checks_on(graph, monkeypatch):
    x = fl.placeholder(fl.float32, [2], name="x")
    y = fl.log(x, name="y")
    monkeypatch.setenv("FLOWC_FLAGS", "--check-numerics")
    with fl.Session() as sess:
        with pytest.raises(fl.InvalidArgumentError, match=r"node 'y': CheckNumerics: Log: "
                                                          r"Tensor had NaN values"):
            sess.run(y, {x: np.array([1.0, -1.0], np.float32)})
