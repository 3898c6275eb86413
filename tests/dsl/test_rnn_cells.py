"""fl.nn.rnn_cell and fl.nn.dynamic_rnn / static_rnn against numpy written from TF1's cell
formulas (LSTM gates i, j, f, o with forget_bias on f; GRU gates r, u then the candidate),
with TF1's variable names, sequence_length (zero outputs past each length, the state copied
through), time_major, initial_state, and gradients (the while loop's equal the unrolled
network's), in the numpy interpreter and in compiled C."""
import numpy as np
import pytest

import dsl as fl

rnn_cell = fl.nn.rnn_cell
B, T, D = 3, 5, 4


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# --- TF1's formulas, in numpy ---------------------------------------------------------------
def np_basic_rnn(w, x, state):
    out = np.tanh(np.concatenate([x, state], 1) @ w["kernel"] + w["bias"])
    return out, out


def np_gru(w, x, h):
    r, u = np.split(sigmoid(np.concatenate([x, h], 1) @ w["gates/kernel"] + w["gates/bias"]),
                    2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"])
    new_h = u * h + (1 - u) * c
    return new_h, new_h


def np_lstm(w, x, state, forget_bias=1.0, peepholes=False, cell_clip=None, proj=False,
            proj_clip=None):
    c, h = state
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"], 4, axis=1)
    if peepholes:
        c = (sigmoid(f + forget_bias + w["w_f_diag"] * c) * c
             + sigmoid(i + w["w_i_diag"] * c) * np.tanh(j))
    else:
        c = c * sigmoid(f + forget_bias) + sigmoid(i) * np.tanh(j)
    if cell_clip is not None:
        c = np.clip(c, -cell_clip, cell_clip)
    m = sigmoid(o + w["w_o_diag"] * c) * np.tanh(c) if peepholes else sigmoid(o) * np.tanh(c)
    if proj:
        m = m @ w["projection/kernel"]
        if proj_clip is not None:
            m = np.clip(m, -proj_clip, proj_clip)
    return m, (c, m)


def np_dynamic_rnn(step, x, state, lengths=None):
    """x: [B, T, D]; TF1's dynamic_rnn: outputs past a length are zeros, the state stays."""
    outs = []
    for t in range(x.shape[1]):
        out, new = step(x[:, t], state)
        if lengths is not None:
            done = (t >= lengths)[:, None]
            out = np.where(done, 0, out)
            new = _map(lambda a, b: np.where(done, a, b), state, new)
        outs.append(out)
        state = new
    return np.stack(outs, 1), state


def _map(fn, a, b):
    if isinstance(a, tuple):
        return tuple(_map(fn, x, y) for x, y in zip(a, b))
    return fn(a, b)


def _weights(sess, cell):
    """The cell's variables by their name within the cell's scope."""
    prefix = cell.scope_name + "/"
    return {v.name[len(prefix):-2]: sess.run(v) for v in cell.variables}


def _flat(state):
    if isinstance(state, tuple):
        return [x for s in state for x in _flat(s)]
    return [state]


CELLS = {
    "basic_rnn": (lambda: rnn_cell.BasicRNNCell(6), np_basic_rnn,
                  ["basic_rnn_cell/kernel", "basic_rnn_cell/bias"]),
    "gru": (lambda: rnn_cell.GRUCell(6), np_gru,
            ["gru_cell/gates/kernel", "gru_cell/gates/bias", "gru_cell/candidate/kernel",
             "gru_cell/candidate/bias"]),
    "basic_lstm": (lambda: rnn_cell.BasicLSTMCell(6, forget_bias=0.5),
                   lambda w, x, s: np_lstm(w, x, s, forget_bias=0.5),
                   ["basic_lstm_cell/kernel", "basic_lstm_cell/bias"]),
    "lstm_peep_proj": (
        lambda: rnn_cell.LSTMCell(6, use_peepholes=True, cell_clip=0.8, num_proj=5,
                                  proj_clip=0.3, forget_bias=0.7),
        lambda w, x, s: np_lstm(w, x, s, forget_bias=0.7, peepholes=True, cell_clip=0.8,
                                proj=True, proj_clip=0.3),
        ["lstm_cell/kernel", "lstm_cell/bias", "lstm_cell/w_f_diag", "lstm_cell/w_i_diag",
         "lstm_cell/w_o_diag", "lstm_cell/projection/kernel"]),
}


@pytest.mark.parametrize("kind", sorted(CELLS))
def test_dynamic_rnn_follows_tf1s_formulas_with_sequence_length(graph, rng, kind):
    make, step, names = CELLS[kind]
    x = fl.placeholder(fl.float32, [None, None, D], name="x")
    lengths = fl.placeholder(fl.int32, [None], name="lengths")
    cell = make()
    outputs, state = fl.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=fl.float32)
    assert [v.name for v in fl.global_variables()] == [f"rnn/{n}:0" for n in names]
    assert [v.name for v in fl.trainable_variables()] == [f"rnn/{n}:0" for n in names]
    assert outputs.shape == (None, None, cell.output_size)
    grads = fl.gradients(fl.reduce_sum(outputs * outputs) + sum(
        fl.reduce_sum(s) for s in _flat(state)), cell.trainable_variables)
    init = fl.global_variables_initializer()
    xv = rng.standard_normal((B, T, D)).astype(np.float32)
    lv = np.array([T, 2, 0], np.int32)
    results = {}
    for backend in ("interpreter", "c"):
        with fl.Session(backend=backend) as s:
            s.run(init)
            w = _weights(s, cell)
            results[backend] = s.run([outputs, state, grads], {x: xv, lengths: lv})
    zero = _map(lambda a, b: np.zeros((B, b), np.float32), cell.state_size, cell.state_size)
    want_out, want_state = np_dynamic_rnn(lambda xt, st: step(w, xt, st), xv, zero, lv)
    for backend, (out, st, g) in results.items():
        np.testing.assert_allclose(out, want_out, rtol=2e-5, atol=2e-6, err_msg=backend)
        assert np.all(out[2] == 0) and np.all(out[1, 2:] == 0)
        for a, b in zip(_flat(tuple(st) if isinstance(st, tuple) else st), _flat(want_state)):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=backend)
        for a, b in zip(g, results["interpreter"][2]):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=backend)
    # the empty sequence keeps the initial (zero) state
    for s in _flat(results["c"][1]):
        assert np.all(s[2] == 0)


def test_multi_rnn_cell_time_major_initial_state_and_names(graph, rng):
    x = fl.placeholder(fl.float32, [T, B, D], name="x")
    cells = [rnn_cell.BasicLSTMCell(5), rnn_cell.GRUCell(3)]
    multi = rnn_cell.MultiRNNCell(cells)
    c0 = fl.placeholder(fl.float32, [B, 5], name="c0")
    h0 = fl.placeholder(fl.float32, [B, 5], name="h0")
    g0 = fl.placeholder(fl.float32, [B, 3], name="g0")
    init_state = (rnn_cell.LSTMStateTuple(c0, h0), g0)
    outputs, state = fl.nn.dynamic_rnn(multi, x, initial_state=init_state, time_major=True,
                                       scope="encoder")
    assert isinstance(state[0], rnn_cell.LSTMStateTuple)
    assert [v.name for v in multi.variables] == [
        "encoder/multi_rnn_cell/cell_0/basic_lstm_cell/kernel:0",
        "encoder/multi_rnn_cell/cell_0/basic_lstm_cell/bias:0",
        "encoder/multi_rnn_cell/cell_1/gru_cell/gates/kernel:0",
        "encoder/multi_rnn_cell/cell_1/gru_cell/gates/bias:0",
        "encoder/multi_rnn_cell/cell_1/gru_cell/candidate/kernel:0",
        "encoder/multi_rnn_cell/cell_1/gru_cell/candidate/bias:0"]
    assert outputs.shape == (T, B, 3)
    init = fl.global_variables_initializer()
    feed = {x: rng.standard_normal((T, B, D)).astype(np.float32),
            c0: rng.standard_normal((B, 5)).astype(np.float32),
            h0: rng.standard_normal((B, 5)).astype(np.float32),
            g0: rng.standard_normal((B, 3)).astype(np.float32)}
    with fl.Session() as s:
        s.run(init)
        w0, w1 = _weights(s, cells[0]), _weights(s, cells[1])
        out, st = s.run([outputs, state], feed)
    gate_bias = w1["gates/bias"]
    np.testing.assert_array_equal(gate_bias, np.ones(6, np.float32))   # TF1: gates start open

    def step(xt, st):
        (c, h), g = st
        o0, s0 = np_lstm(w0, xt, (c, h))
        o1, s1 = np_gru(w1, o0, g)
        return o1, (s0, s1)
    want_out, want_state = np_dynamic_rnn(step, feed[x].transpose(1, 0, 2),
                                          ((feed[c0], feed[h0]), feed[g0]))
    np.testing.assert_allclose(out, want_out.transpose(1, 0, 2), rtol=2e-5, atol=2e-6)
    for a, b in zip(_flat(st), _flat(want_state)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_static_rnn_equals_dynamic_rnn_and_their_gradients_agree(graph, rng):
    x = fl.placeholder(fl.float32, [B, T, D], name="x")
    lengths = fl.placeholder(fl.int32, [B], name="lengths")
    cell = rnn_cell.LSTMCell(4, use_peepholes=True)
    outputs, state = fl.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=fl.float32)
    # the same cell again: the same variables, unrolled
    steps = fl.unstack(x, axis=1)
    s_outputs, s_state = fl.nn.static_rnn(cell, steps, sequence_length=lengths,
                                          dtype=fl.float32)
    assert len(fl.global_variables()) == 5
    loss = fl.reduce_sum(outputs * outputs) + fl.reduce_sum(state.c)
    s_loss = fl.reduce_sum(fl.stack(s_outputs, 1) ** 2) + fl.reduce_sum(s_state.c)
    grads = fl.gradients(loss, cell.variables + [x])
    s_grads = fl.gradients(s_loss, cell.variables + [x])
    init = fl.global_variables_initializer()
    feed = {x: rng.standard_normal((B, T, D)).astype(np.float32),
            lengths: np.array([1, 5, 3], np.int32)}
    with fl.Session() as s:
        s.run(init)
        got = s.run([loss, s_loss, grads, s_grads], feed)
    np.testing.assert_allclose(got[0], got[1], rtol=1e-5)
    for name, a, b in zip([v.name for v in cell.variables] + ["x"], got[2], got[3]):
        assert np.abs(b).max() > 0, name
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)
    # past its length an entry's input has no effect
    assert np.all(got[2][-1][0, 1:] == 0)


def test_gradient_matches_finite_differences(graph, rng):
    x = fl.placeholder(fl.float64, [2, 3, 2], name="x")
    cell = rnn_cell.GRUCell(3, dtype=fl.float64)
    outputs, state = fl.nn.dynamic_rnn(cell, x, sequence_length=[3, 2], dtype=fl.float64)
    loss = fl.reduce_sum(outputs * fl.constant(rng.standard_normal((2, 3, 3)))) + \
        fl.reduce_sum(state * state)
    (gx,) = fl.gradients(loss, [x])
    init = fl.global_variables_initializer()
    xv = rng.standard_normal((2, 3, 2))
    with fl.Session() as s:
        s.run(init)
        got = s.run(gx, {x: xv})
        eps, numeric = 1e-6, np.zeros_like(xv)
        for k in np.ndindex(*xv.shape):
            up, down = xv.copy(), xv.copy()
            up[k] += eps
            down[k] -= eps
            numeric[k] = (s.run(loss, {x: up}) - s.run(loss, {x: down})) / (2 * eps)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)
    assert np.all(got[1, 2] == 0)                    # past the second sequence's length


def test_cell_scopes_are_made_unique_reused_or_refused_as_tf1_does(graph):
    # (what TensorFlow 1.x's tf.compat.v1 does in each case, tried with TF 2.21 + tf_keras)
    x = fl.placeholder(fl.float32, [2, 3, 4])
    a = rnn_cell.BasicLSTMCell(2)
    fl.nn.dynamic_rnn(a, x, dtype=fl.float32)
    fl.nn.dynamic_rnn(a, x, dtype=fl.float32)         # the same cell: the same variables
    assert a.scope_name == "rnn/basic_lstm_cell" and len(fl.global_variables()) == 2
    with pytest.raises(ValueError, match="Variable rnn/basic_lstm_cell/kernel already exists"):
        fl.nn.dynamic_rnn(rnn_cell.BasicLSTMCell(2), x, dtype=fl.float32)
    again = rnn_cell.BasicLSTMCell(2, reuse=True)      # TF1's reuse: the variables of "rnn"
    fl.nn.dynamic_rnn(again, x, dtype=fl.float32)
    assert again.variables == a.variables
    named = rnn_cell.GRUCell(2, name="enc")
    fl.nn.dynamic_rnn(named, x, dtype=fl.float32, scope="layer")
    assert [v.name for v in named.variables][0] == "layer/enc/gates/kernel:0"
    with pytest.raises(ValueError, match="does not exist"):
        fl.nn.dynamic_rnn(rnn_cell.GRUCell(2, reuse=True), x, dtype=fl.float32, scope="other")
    with pytest.raises(ValueError, match="you must give a dtype"):
        fl.nn.dynamic_rnn(rnn_cell.GRUCell(2), x)
    z = fl.zeros([2, 4])
    first, second = rnn_cell.BasicRNNCell(3), rnn_cell.BasicRNNCell(3)
    for cell in (first, second):                      # called outside any rnn scope
        cell(z, cell.zero_state(2, fl.float32))
    assert [v.name for v in first.variables + second.variables] == [
        "basic_rnn_cell/kernel:0", "basic_rnn_cell/bias:0",
        "basic_rnn_cell_1/kernel:0", "basic_rnn_cell_1/bias:0"]
    fw, bw = rnn_cell.GRUCell(2), rnn_cell.GRUCell(2)
    fl.nn.bidirectional_dynamic_rnn(fw, bw, x, dtype=fl.float32)
    assert [fw.scope_name, bw.scope_name] == ["bidirectional_rnn/fw/gru_cell",
                                              "bidirectional_rnn/bw/gru_cell"]


def test_dropout_wrapper(graph, rng):
    x = fl.placeholder(fl.float32, [B, T, D], name="x")
    keep = fl.placeholder_with_default(1.0, [], name="keep")
    cell = rnn_cell.BasicLSTMCell(6)
    wrapped = rnn_cell.DropoutWrapper(cell, input_keep_prob=keep, output_keep_prob=keep,
                                      state_keep_prob=keep, seed=3)
    outputs, state = fl.nn.dynamic_rnn(wrapped, x, dtype=fl.float32)
    plain, _ = fl.nn.dynamic_rnn(cell, x, dtype=fl.float32, scope="rnn")
    assert [v.name for v in fl.global_variables()] == ["rnn/basic_lstm_cell/kernel:0",
                                                       "rnn/basic_lstm_cell/bias:0"]
    init = fl.global_variables_initializer()
    xv = rng.standard_normal((B, T, D)).astype(np.float32)
    with fl.Session() as s:
        s.run(init)
        kept, base = s.run([outputs, plain], {x: xv})
        np.testing.assert_allclose(kept, base, rtol=1e-6)    # keep 1: no dropout
        dropped = s.run(outputs, {x: xv, keep: 0.5})
    zeros = np.mean(dropped == 0)
    assert 0.3 < zeros < 0.7, zeros                     # the output mask drops about half
