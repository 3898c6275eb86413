"""examples/rnn_while.flow: a tanh RNN over variable-length sequences run by a while loop
whose trip count is fed at run time. Its loss and gradients equal those of the same network
unrolled; its compiled training step is a C while loop (plus the gradient's backward loop)
that saves values on stacks; a short training run learns the task."""
import io
import re
import os

import numpy as np
import pytest

import dsl as fl
from compiler.codegen.control_flow import saved_bytes_per_iteration
from compiler.codegen.emitter import emit_c
from compiler.step import make_step_graph, optimize
from dsl.flow import load_flow
from dsl.trainer import spec_from_flow, train
from repo_paths import EXAMPLES

MODEL = os.path.join(EXAMPLES, "rnn_while.flow")


def _batch(lengths, seed=0):
    rng = np.random.default_rng(seed)
    lengths = np.array(lengths, dtype=np.int32)
    x = rng.integers(0, 2, size=(len(lengths), 20)).astype(np.float32)
    x[np.arange(20)[None, :] >= lengths[:, None]] = 0.0
    return x, lengths, x.sum(axis=1).astype(np.int32)


def _load():
    program = load_flow(MODEL)
    g = program.graph
    with g.as_default():
        variables = {v.name.split(":")[0]: v for v in fl.trainable_variables()}
    inputs = {n.name: fl.Tensor(n.output(0)) for n in g if n.op == "Placeholder"}
    return program, g, variables, inputs


def _unrolled(variables, inputs, steps):
    """The network of rnn_while.flow with its loop unrolled ``steps`` times."""
    x, length, y = inputs["x"], inputs["length"], inputs["y"]
    w_in, w_rec, b = (variables[f"cell/{k}"] for k in ("w_in", "w_rec", "b"))
    w_out, b_out = variables["readout/w_out"], variables["readout/b_out"]
    bits = fl.transpose(x)
    h = fl.matmul(fl.zeros_like(x), fl.zeros([20, 32]))
    for t in range(steps):
        bit = fl.expand_dims(fl.gather(bits, t), 1)
        nxt = fl.tanh(fl.matmul(bit, w_in) + fl.matmul(h, w_rec) + b)
        running = fl.expand_dims(fl.cast(t < length, fl.f32), 1)
        h = running * nxt + (1.0 - running) * h
    logits = fl.nn.bias_add(fl.matmul(h, w_out), b_out)
    return fl.reduce_mean(fl.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def test_while_rnn_loss_and_gradients_equal_the_unrolled_network():
    program, g, variables, inputs = _load()
    loss = program.training.loss.value
    names = sorted(variables)
    x, lengths, y = _batch([5, 13, 9, 7])           # the loop runs 13 times, as fed
    feed = {inputs["x"]: x, inputs["length"]: lengths, inputs["y"]: y}
    with g.as_default():
        grads = fl.gradients(loss, [variables[k] for k in names])
        unrolled = _unrolled(variables, inputs, int(lengths.max()))
        unrolled_grads = fl.gradients(unrolled, [variables[k] for k in names])
        init = fl.global_variables_initializer()
    results = {}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=g, backend=backend) as s:
            s.run(init)
            results[backend] = s.run([loss, grads, unrolled, unrolled_grads], feed)
    for backend, (lw, gw, lu, gu) in results.items():
        np.testing.assert_allclose(lw, lu, rtol=1e-5, err_msg=backend)
        for k, a, b in zip(names, gw, gu):
            assert np.abs(b).max() > 0, k                  # every weight gets a gradient
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=f"{backend} {k}")


def test_compiled_training_step_is_a_c_while_loop_that_saves_values_on_stacks():
    program, g, variables, inputs = _load()
    loss = program.training.loss.value
    with g.as_default():
        train_op = fl.train.AdamOptimizer(0.01).minimize(loss)
    step = make_step_graph(g, [t.output for t in inputs.values()], [loss.output],
                           [train_op.node])
    optimize(step)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    assert source.count("while (1) {") == 2                  # the loop and its gradient
    # the cell is in the source once per loop, not once per step of a sequence
    matmuls = source.count("= MatMul(")
    assert 0 < matmuls < 20, matmuls
    assert "StackPushV2" in source and "StackPopV2" in source
    saved = saved_bytes_per_iteration(step.graph)
    assert len(saved) == 1
    frame, count, nbytes = saved[0]
    assert count >= 2 and "?" in nbytes                       # per row of the batch
    assert f"/* loop frame {frame}: saves {count} values on stacks, {nbytes} bytes per " \
           "iteration */" in source


def test_a_short_training_run_learns_to_count_the_ones():
    spec = spec_from_flow(MODEL)
    out = io.StringIO()
    result = train(spec, steps=300, eval_every=300, out=out, err=io.StringIO(), progress=False)
    # 21 classes; the most common count is right for about 18% of the sequences
    assert result.metrics["accuracy"] > 0.6, out.getvalue()


LOOP_GRADIENT_MODEL = '''
import dsl as fl

def build():
    g = fl.Graph()
    with g.as_default():
        xs = fl.placeholder(fl.f32, [None, None, 8], name="xs")
        w = fl.constant([[0.1] * 8] * 8)
        n = fl.placeholder(fl.i32, [], name="n")
        _, h = fl.while_loop(lambda i, h: i < n,
                             lambda i, h: (i + 1, fl.tanh(fl.matmul(h, w) + fl.gather(xs, i))),
                             [0, fl.gather(xs, 0)])
        (g_xs,) = fl.gradients(fl.reduce_sum(h), [xs])
    return g, {"h": h, "grad": g_xs}
'''


def test_flowc_compile_reports_the_bytes_a_loop_saves_per_iteration(tmp_path, capsys):
    from cli_runner import flowc
    model = tmp_path / "rnn_grad.py"
    model.write_text(LOOP_GRADIENT_MODEL)
    rc, out, err = flowc(capsys, "compile", model, "-o", tmp_path / "out")
    assert rc == 0, err
    # the counter i, the shapes of the addition's two inputs (2 x i32[2]: its gradient needs
    # only their shapes), and h and tanh's output ([?, 8] f32, 32 bytes per row each)
    assert re.search(r"loop while: saves 5 values for its gradient, 20 \+ 64\*\? bytes per "
                     r"iteration \(\?: a dim known at run time\)", out), out
