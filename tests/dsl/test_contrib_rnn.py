"""fl.contrib.rnn: LSTMBlockCell and LSTMBlockFusedCell (TensorFlow's fused LSTM ops behind
TF1's cells) against fl.nn.rnn_cell.LSTMCell with the same weights, TF1's variable names, the
sequence_length handling of the fused cell, a short training run of each, and the core cells
under their tf.contrib.rnn names."""
import numpy as np
import pytest

import dsl as fl

TIME, BATCH, INPUT, UNITS = 6, 3, 4, 5


def _copy(dst_vars, src_vars):
    return [fl.assign(d, s) for d, s in zip(dst_vars, src_vars)]


def _lstm_cell_vars_in_block_order(cell, peephole):
    """LSTMCell makes kernel, bias, w_f_diag, w_i_diag, w_o_diag; the block cells kernel,
    bias, w_i_diag, w_f_diag, w_o_diag."""
    v = cell.variables
    return [v[0], v[1], v[3], v[2], v[4]] if peephole else v


@pytest.mark.parametrize("backend", ["interpreter", "c"])
@pytest.mark.parametrize("peephole,clip", [(False, None), (True, 0.8)])
def test_block_cells_compute_lstm_cells_numbers_with_its_weights(graph, rng, backend,
                                                                 peephole, clip):
    x = fl.placeholder(fl.float32, [None, TIME, INPUT], name="x")
    seq = fl.placeholder(fl.int32, [None], name="seq")
    block = fl.contrib.rnn.LSTMBlockCell(UNITS, use_peephole=peephole, cell_clip=clip)
    out_b, state_b = fl.nn.dynamic_rnn(block, x, dtype=fl.float32, scope="block")
    ref = fl.nn.rnn_cell.LSTMCell(UNITS, use_peepholes=peephole, cell_clip=clip)
    out_r, state_r = fl.nn.dynamic_rnn(ref, x, dtype=fl.float32, scope="ref")
    fused = fl.contrib.rnn.LSTMBlockFusedCell(UNITS, use_peephole=peephole, cell_clip=clip)
    out_f, state_f = fused(fl.transpose(x, [1, 0, 2]), dtype=fl.float32, sequence_length=seq)
    out_l, state_l = fused(fl.unstack(fl.transpose(x, [1, 0, 2])), dtype=fl.float32)
    names = [v.name for v in block.variables + fused.variables]
    suffix = ["w_i_diag:0", "w_f_diag:0", "w_o_diag:0"] if peephole else []
    assert names == ([f"block/lstm_cell/{n}" for n in ["kernel:0", "bias:0"] + suffix]
                     + [f"lstm_fused_cell/{n}" for n in ["kernel:0", "bias:0"] + suffix])
    copies = (_copy(block.variables, _lstm_cell_vars_in_block_order(ref, peephole))
              + _copy(fused.variables, block.variables))
    xs = rng.standard_normal((BATCH, TIME, INPUT)).astype(np.float32) * 2
    lens = np.array([TIME, 2, 0], np.int32)
    with fl.Session(backend=backend) as s:
        s.run(fl.global_variables_initializer())
        s.run(copies[:len(block.variables)])
        s.run(copies[len(block.variables):])
        got = s.run([out_b, state_b, out_r, state_r, out_f, state_f, out_l, state_l],
                    {x: xs, seq: lens})
    ob, sb, orf, sr, of, sf, ol, sl = got
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ob, orf, **tol)
    np.testing.assert_allclose(sb.c, sr.c, **tol)
    np.testing.assert_allclose(sb.h, sr.h, **tol)
    if clip is not None:
        assert np.abs(sb.c).max() <= clip + 1e-6
    of = of.transpose(1, 0, 2)                           # [batch, time, units]
    for b, n in enumerate(lens):
        np.testing.assert_allclose(of[b, :n], orf[b, :n], **tol)
        assert not of[b, n:].any()
        want_h = orf[b, n - 1] if n else np.zeros(UNITS)
        np.testing.assert_allclose(sf.h[b], want_h, **tol)
    np.testing.assert_allclose(sf.c[0], sr.c[0], **tol)
    assert not sf.c[2].any()                               # length 0: the initial state
    assert len(ol) == TIME
    np.testing.assert_allclose(np.stack(ol, 1), orf, **tol)
    np.testing.assert_allclose(sl.c, sr.c, **tol)


def test_fused_cell_needs_a_dtype_or_a_state_and_three_dims(graph):
    fused = fl.contrib.rnn.LSTMBlockFusedCell(UNITS)
    with pytest.raises(ValueError, match="Either initial_state or dtype"):
        fused(np.zeros((TIME, BATCH, INPUT), np.float32))
    with pytest.raises(ValueError, match=r"must be \[time, batch, input_size\]"):
        fused(np.zeros((BATCH, INPUT), np.float32), dtype=fl.float32)


@pytest.mark.parametrize("kind", ["block_cell", "fused"])
def test_a_short_training_run_lowers_the_loss(graph, rng, kind):
    """Predict the running sum of the inputs' first feature at every step."""
    x = fl.placeholder(fl.float32, [TIME, None, INPUT], name="x")
    target = fl.placeholder(fl.float32, [TIME, None, 1], name="y")
    if kind == "fused":
        outputs, _ = fl.contrib.rnn.LSTMBlockFusedCell(16)(x, dtype=fl.float32)
    else:
        cell = fl.contrib.rnn.LSTMBlockCell(16)
        outputs, _ = fl.nn.dynamic_rnn(cell, x, dtype=fl.float32, time_major=True)
    w = fl.Variable(rng.standard_normal((16, 1)).astype(np.float32) * 0.1, name="w_out")
    pred = fl.reshape(fl.matmul(fl.reshape(outputs, [-1, 16]), w), [TIME, -1, 1])
    loss = fl.reduce_mean(fl.square(pred - target))
    step = fl.train.AdamOptimizer(0.02).minimize(loss)
    assert {op.type for op in graph.get_operations()} >= (
        {"BlockLSTM", "BlockLSTMGrad"} if kind == "fused" else {"LSTMBlockCell",
                                                                  "LSTMBlockCellGrad"})
    xs = rng.uniform(-1, 1, (TIME, 32, INPUT)).astype(np.float32)
    ys = np.cumsum(xs[:, :, :1], axis=0) / 2
    with fl.Session(backend="c") as s:
        s.run(fl.global_variables_initializer())
        losses = [s.run([loss, step], {x: xs, target: ys})[0] for _ in range(150)]
    assert losses[-1] < 0.2 * losses[0], losses[::30]


def test_contrib_rnn_names_are_the_core_cells():
    rnn = fl.contrib.rnn
    core = fl.nn.rnn_cell
    for name in ("BasicLSTMCell", "LSTMCell", "GRUCell", "BasicRNNCell", "MultiRNNCell",
                 "DropoutWrapper", "ResidualWrapper", "LSTMStateTuple", "RNNCell"):
        assert getattr(rnn, name) is getattr(core, name), name
    assert rnn.static_rnn is fl.nn.static_rnn
    assert rnn.static_bidirectional_rnn is fl.nn.static_bidirectional_rnn
    assert set(rnn.__all__) <= set(dir(rnn))
