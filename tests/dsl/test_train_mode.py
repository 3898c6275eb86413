"""Train/eval mode, as TensorFlow 1.x has it: ``fl.layers.dropout(x, rate, training=...)`` with a
Python bool or a scalar bool tensor (a cond-free select), inference steps without any dropout
op when the switch is not fed, the ``.flow`` built-in ``training`` input, and ``flowc train``
feeding it true in training steps only."""
import os
import re

import numpy as np
import pytest

import dsl as fl
from cli_runner import flowc
from compiler.model_loader import load_model
from compiler.step import make_step_graph, optimize
from dsl.flow import build_flow, load_flow
from dsl.trainer import TrainSpec, train
from repo_paths import EXAMPLES

BACKENDS = ("c", "interpreter")
X = np.arange(1, 2001, dtype=np.float32).reshape(40, 50)


def step_ops(graph, fetches, feeds=()):
    """The ops of the optimized step that computes ``fetches`` feeding ``feeds``."""
    step = make_step_graph(graph, [f.output for f in feeds], [f.output for f in fetches])
    optimize(step)
    return sorted({n.op for n in step.graph})


def check_dropped(y, x, rate):
    """``y`` is ``x`` with some elements zeroed and the rest scaled by 1 / (1 - rate)."""
    kept = y != 0
    np.testing.assert_allclose(y[kept], x[kept] / (1 - rate), rtol=1e-6)
    assert 0.2 < 1 - kept.mean() < 0.4            # rate 0.3 of 2000 elements


# --- fl.layers.dropout ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_python_bool_builds_only_its_side(graph, backend):
    x = fl.constant(X)
    off = fl.layers.dropout(x, rate=0.3, seed=1, training=False)
    on = fl.layers.dropout(x, rate=0.3, seed=1, training=True)
    ops = {n.op for n in graph}
    assert "SelectV2" in ops and sum(n.op == "RandomUniform" for n in graph) == 1
    with fl.Session(backend=backend) as sess:
        y_off, y_on = sess.run([off, on])
    np.testing.assert_array_equal(y_off, X)
    check_dropped(y_on, X, 0.3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_switch_selects_without_cond(graph, backend):
    training = fl.placeholder_with_default(False, [], name="training")
    x = fl.placeholder(fl.float32, [None, 50], name="x")
    y = fl.layers.dropout(x, rate=0.3, seed=2, training=training)
    ops = {n.op for n in graph}
    assert not ops & {"Switch", "Merge", "Enter", "Exit"}      # one straight-line step
    with fl.Session(backend=backend) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: X}), X)
        check_dropped(sess.run(y, {x: X, training: True}), X, 0.3)
        np.testing.assert_array_equal(sess.run(y, {x: X, training: False}), X)


def test_an_unfed_switch_leaves_no_dropout_op_in_the_step(graph):
    training = fl.placeholder_with_default(False, [], name="training")
    x = fl.placeholder(fl.float32, [None, 50], name="x")
    y = fl.nn.relu(fl.layers.dropout(x, rate=0.5, seed=3, training=training))
    inference = step_ops(graph, [y], [x])
    assert "RandomUniform" not in inference and "SelectV2" not in inference
    assert "RandomUniform" in step_ops(graph, [y], [x, training])


def test_gradients_flow_through_the_selected_side(graph):
    training = fl.placeholder_with_default(False, [], name="training")
    x = fl.placeholder(fl.float32, [40, 50], name="x")
    y = fl.layers.dropout(x, rate=0.3, seed=4, training=training)
    (dx,) = fl.gradients(fl.reduce_sum(y), [x])
    with fl.Session() as sess:
        np.testing.assert_array_equal(sess.run(dx, {x: X}), np.ones_like(X))
        got, g = sess.run([y, dx], {x: X, training: True})
    np.testing.assert_allclose(g, np.where(got != 0, 1 / 0.7, 0), rtol=1e-6)


def test_the_dropout_layer_object(graph):
    layer = fl.layers.Dropout(rate=0.3, seed=5, name="drop")
    x = fl.constant(X)
    a = layer(x, training=True)
    b = layer.apply(x)
    # as TensorFlow 1.x's layer objects: every call in the layer's own name scope
    assert a.name.startswith("drop/") and b.name == "drop/Identity:0"
    with fl.Session() as sess:
        ya, yb = sess.run([a, b])
    check_dropped(ya, X, 0.3)
    np.testing.assert_array_equal(yb, X)


def test_a_switch_must_be_a_scalar_bool(graph):
    x = fl.constant(X)
    with pytest.raises(TypeError, match="scalar bool"):
        fl.layers.dropout(x, training=fl.placeholder(fl.bool_, [3]))
    with pytest.raises(TypeError, match="scalar bool"):
        fl.layers.dropout(x, training=fl.constant(1.0))
    with pytest.raises(TypeError, match="Python bool or a scalar bool tensor"):
        fl.layers.dropout(x, training="yes")


def test_a_constant_switch_is_known_when_the_graph_is_built(graph):
    x = fl.constant(X)
    fl.layers.dropout(x, rate=0.3, training=fl.constant(False))
    assert not any(n.op == "RandomUniform" for n in graph)


def test_nn_dropout_always_drops_as_in_tf1(graph):
    y = fl.nn.dropout(fl.constant(X), rate=0.3, seed=6)
    with fl.Session() as sess:
        check_dropped(sess.run(y), X, 0.3)


def test_made_while_a_loop_is_built_a_lifted_op_stays_outside_it(graph):
    made = []

    def body(i, acc):
        with graph.lifted():
            made.append(fl.placeholder_with_default(False, [], name="switch"))
        return i + 1, acc + fl.cast(made[0], fl.float32)

    _, total = fl.while_loop(lambda i, acc: i < 3, body, [0, 0.0])
    assert made[0].op.node is graph.nodes[1]               # at the start, after its default
    assert made[0].name == "switch:0" and not made[0].op.node.control_inputs
    with fl.Session() as sess:
        assert sess.run(total) == 0.0
        assert sess.run(total, {made[0]: True}) == 3.0


# --- the .flow built-in -------------------------------------------------------------------------
FLOW = """
input x: f32[?, 4]
def block(v) {
  return layers.dropout(v, rate=0.5, seed=1, training=training)
}
name_scope "net" {
  let h = block(x) * 2.0
}
output y = h
output mode = cast(training, f32)
"""


def test_the_built_in_training_input():
    program = build_flow(FLOW, "model.flow")
    switch = program.training_switch
    assert switch is not None and switch.name == "training:0"
    node = switch.op.node
    assert node.op == "PlaceholderWithDefault" and node.output_types[0].shape == ()
    assert node.inputs[0].node.attrs["value"] == np.array(False)
    assert [n.name for n in program.graph.nodes[:2]] == ["training/default", "training"]
    assert sum(n.op == "PlaceholderWithDefault" for n in program.graph) == 1
    x = np.ones((3, 4), np.float32)
    with fl.Session(graph=program.graph) as sess:
        y, mode = sess.run([program.outputs["y"], program.outputs["mode"]], {"x:0": x})
        np.testing.assert_array_equal(y, 2 * x)
        assert mode == 0.0
        y, mode = sess.run([program.outputs["y"], program.outputs["mode"]],
                           {"x:0": x, switch: True})
        assert mode == 1.0 and set(np.unique(y)) <= {0.0, 4.0}


def test_a_model_that_does_not_use_training_has_no_switch():
    program = build_flow("input x: f32[2]\noutput y = x * 2.0\n", "m.flow")
    assert program.training_switch is None
    assert not any(n.name.startswith("training") for n in program.graph)


def test_a_file_may_bind_the_name_itself():
    program = build_flow("input training: f32[2]\noutput y = training * 2.0\n", "m.flow")
    assert program.training_switch is None
    assert program.graph.node("training").op == "Placeholder"


def test_training_inside_a_while_loop_is_made_outside_it():
    program = build_flow("""
input x: f32[4]
while (i < 3) carry (i = 0, acc = x) {
  return [i + 1, layers.dropout(acc, rate=0.5, seed=1, training=training) + 1.0]
}
output y = acc
""", "loop.flow")
    node = program.training_switch.op.node
    assert not node.control_inputs and node.name == "training"
    with fl.Session(graph=program.graph) as sess:
        np.testing.assert_array_equal(sess.run(program.outputs["y"],
                                               {"x:0": np.ones(4, np.float32)}), [4.0] * 4)


def test_the_step_of_flowc_compile_is_inference_and_training_is_asked_for(capsys, tmp_path):
    path = tmp_path / "m.flow"
    path.write_text(FLOW)
    rc, out, err = flowc(capsys, "ir", path, "--after", "fold-constants")
    assert rc == 0 and "RandomUniform" not in out
    rc, out, err = flowc(capsys, "ir", path, "--after", "fold-constants", "--training")
    assert rc == 0 and "RandomUniform" in out
    assert load_model(str(path)).training.node.name == "training"
    rc, out, err = flowc(capsys, "compile", path, "-o", tmp_path / "art")
    assert rc == 0 and "feeds:   x f32[?,4]" in out
    y, mode = _run(capsys, tmp_path, "art")
    np.testing.assert_array_equal(y, np.full((2, 4), 2.0))
    assert mode == 0.0
    rc, out, err = flowc(capsys, "compile", path, "--training", "-o", tmp_path / "art_t")
    assert rc == 0
    y, mode = _run(capsys, tmp_path, "art_t")
    assert mode == 1.0 and set(np.unique(y)) <= {0.0, 4.0}


def _run(capsys, tmp_path, artifact):
    """(y, mode) of the artifact's run on ones."""
    np.save(tmp_path / "x.npy", np.ones((2, 4), np.float32))
    rc, _, err = flowc(capsys, "run", tmp_path / artifact, "--feed", f"x={tmp_path / 'x.npy'}",
                       "--save", tmp_path / "out.npz")
    assert rc == 0, err
    with np.load(tmp_path / "out.npz") as f:
        return f["y"], float(f["mode"])


def test_training_needs_a_switch(capsys, tmp_path):
    path = tmp_path / "plain.flow"
    path.write_text("input x: f32[2]\noutput y = x * 2.0\n")
    rc, _, err = flowc(capsys, "compile", path, "--training", "-o", tmp_path / "art")
    assert rc == 1 and "has no training switch" in err and "plain.flow" in err


# --- flowc train ------------------------------------------------------------------------------
# The loss pulls w towards 1 when training is on and towards 5 when it is off: a run whose
# training steps feed it true ends with w near 1, and its evaluation (training off) sees a
# loss near (1 - 5) ** 2 = 16; the metric says which mode the evaluation ran in.
SWITCHED = """
input x: f32[?, 1]
var w: f32[] = 0.0
let target = if (training) { return 1.0 } else { return 5.0 }
loss = reduce_mean(square(x * 0.0 + w - target))
metric trained_mode = cast(training, f32)
optimizer = sgd(learning_rate=0.1)
train(steps=100, batch_size=8, eval_every=100)
"""


def _data(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((40, 1), np.float32))
    return str(path)


def test_flowc_train_feeds_training_true_in_training_steps_only(tmp_path):
    model = tmp_path / "switched.flow"
    model.write_text(SWITCHED)
    data = _data(tmp_path)
    from dsl.trainer import load_spec
    spec = load_spec(str(model), check_data=False)
    assert spec.training is not None
    result = train(spec, data=data, out=open(os.devnull, "w"), err=open(os.devnull, "w"))
    assert result.metrics["trained_mode"] == 0.0
    assert abs(result.loss - 16.0) < 0.01


def test_a_python_spec_may_use_a_plain_placeholder_switch(tmp_path):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 1], name="x")
        is_training = fl.placeholder(fl.bool_, [], name="is_training")
        w = fl.Variable(0.0, name="w")
        target = fl.where(is_training, 1.0, 5.0)
        loss = fl.reduce_mean(fl.square(x * 0.0 + w.value() - target))
        spec = TrainSpec(g, loss, fl.train.GradientDescentOptimizer(0.1),
                         {"mode": fl.cast(is_training, fl.float32)}, _data(tmp_path),
                         steps=100, batch_size=8, training=is_training)
    result = train(spec, out=open(os.devnull, "w"), err=open(os.devnull, "w"))
    assert result.metrics["mode"] == 0.0 and abs(result.loss - 16.0) < 0.01


def test_a_switch_that_cannot_be_fed_is_refused(tmp_path):
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [None, 1], name="x")
        w = fl.Variable(0.0, name="w")
        loss = fl.reduce_mean(x * w.value())
        spec = TrainSpec(g, loss, fl.train.GradientDescentOptimizer(0.1), data=_data(tmp_path),
                         training=fl.constant(True))
    from dsl.trainer import TrainError
    with pytest.raises(TrainError, match="cannot feed"):
        train(spec, out=open(os.devnull, "w"), err=open(os.devnull, "w"))


def test_the_train_step_of_a_flow_file_runs_in_training_mode(capsys, tmp_path):
    model = tmp_path / "switched.flow"
    model.write_text(SWITCHED)
    switch = r"%training +\= Const\(\) \{dtype=bool, value=tensor<bool\[\]>\[VALUE\]\}"
    rc, out, _ = flowc(capsys, "ir", model, "--step", "train", "--after", "fold-constants")
    assert rc == 0 and re.search(switch.replace("VALUE", "true"), out), out
    rc, out, _ = flowc(capsys, "ir", model, "--step", "eval", "--after", "fold-constants")
    assert rc == 0 and re.search(switch.replace("VALUE", "false"), out), out


def test_the_dropout_example_declares_what_flowc_train_needs():
    program = load_flow(os.path.join(EXAMPLES, "digits_mlp_dropout.flow"))
    assert program.training_switch is not None
    assert program.training.loss is not None and "accuracy" in program.training.metrics


def test_a_python_model_names_its_switch_for_training(capsys, tmp_path):
    path = tmp_path / "model.py"
    path.write_text('''
import dsl as fl

def build():
    g = fl.Graph()
    with g.as_default():
        is_training = fl.placeholder_with_default(False, [], name="is_training")
        x = fl.placeholder(fl.float32, [None, 4], name="x")
        y = fl.layers.dropout(x, rate=0.5, seed=1, training=is_training)
    return {"graph": g, "fetches": {"y": y}, "training": is_training}
''')
    assert load_model(str(path)).training.node.name == "is_training"
    rc, out, _ = flowc(capsys, "ir", path, "--after", "fold-constants")
    assert rc == 0 and "RandomUniform" not in out
    rc, out, _ = flowc(capsys, "ir", path, "--after", "fold-constants", "--training")
    assert rc == 0 and "RandomUniform" in out
