"""tf.contrib.rnn's GRUBlockCell and GRUBlockCellV2 (dsl/contrib/gru_ops.py): TensorFlow's
variable names; with GRUCell's weights, V2 gives GRUCell's outputs, state and gradients in
fl.nn.dynamic_rnn (with sequence_length, in the interpreter and compiled C), as TensorFlow
documents; a small sequence model built on it trains; and its argument checks."""
import numpy as np
import pytest

import dsl as fl
from dsl.contrib.gru_ops import GRUBlockCell, GRUBlockCellV2

B, T, D, N = 3, 5, 4, 6


def test_variable_names_are_tensorflows(graph):
    x = fl.placeholder(fl.float32, [B, T, D])
    fl.nn.dynamic_rnn(GRUBlockCellV2(N), x, dtype=fl.float32)
    fl.nn.dynamic_rnn(GRUBlockCell(cell_size=N), x, dtype=fl.float32, scope="v1")
    names = [(v.name, v.shape) for v in fl.global_variables()]
    assert names == [
        ("rnn/gru_cell/gates/kernel:0", (D + N, 2 * N)), ("rnn/gru_cell/gates/bias:0", (2 * N,)),
        ("rnn/gru_cell/candidate/kernel:0", (D + N, N)),
        ("rnn/gru_cell/candidate/bias:0", (N,)),
        # V1's names: the gate kernel is "w_c", the candidate kernel "w_ru" (TensorFlow's)
        ("v1/gru_cell/w_c:0", (D + N, 2 * N)), ("v1/gru_cell/b_ru:0", (2 * N,)),
        ("v1/gru_cell/w_ru:0", (D + N, N)), ("v1/gru_cell/b_c:0", (N,))]
    assert {n.op for n in graph} >= {"GRUBlockCell"}


def test_v2_matches_gru_cell_with_the_same_weights(graph, rng):
    x = fl.placeholder(fl.float32, [None, None, D], name="x")
    lengths = fl.placeholder(fl.int32, [None], name="lengths")
    block, ref = GRUBlockCellV2(N), fl.nn.rnn_cell.GRUCell(N)
    runs = {}
    for key, cell in (("block", block), ("ref", ref)):
        outputs, state = fl.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=fl.float32,
                                           scope=key)
        loss = fl.reduce_sum(outputs * outputs) + fl.reduce_sum(state)
        runs[key] = [outputs, state] + fl.gradients(loss, [x] + cell.variables)
    assert [v.name[len("block/"):] for v in block.variables] == \
        [v.name[len("ref/"):] for v in ref.variables]
    copy = fl.group(*[fl.assign(r, b) for r, b in zip(ref.variables, block.variables)])
    init = fl.global_variables_initializer()
    feed = {x: rng.standard_normal((B, T, D)).astype(np.float32),
            lengths: np.array([T, 2, 0], np.int32)}
    for backend in ("interpreter", "c"):
        with fl.Session(backend=backend) as s:
            s.run(init)
            s.run(copy)
            got = s.run(runs, feed)
        names = ["outputs", "state", "d_x"] + [v.name for v in block.variables]
        for name, a, b in zip(names, got["block"], got["ref"]):
            assert np.abs(b).max() > 0, name
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"{backend} {name}")
        assert np.all(got["block"][0][2] == 0)          # the empty sequence: zero outputs


def test_a_sequence_model_on_the_block_cell_trains(graph, rng):
    # predict, from a sequence, the mean of its first feature over time
    xs = rng.standard_normal((32, 6, 3)).astype(np.float32)
    ys = xs[:, :, :1].mean(axis=1)
    x = fl.placeholder(fl.float32, [None, 6, 3])
    y = fl.placeholder(fl.float32, [None, 1])
    _, state = fl.nn.dynamic_rnn(GRUBlockCellV2(8), x, dtype=fl.float32)
    pred = fl.layers.dense(state, 1)
    loss = fl.reduce_mean(fl.square(pred - y))
    train = fl.train.AdamOptimizer(0.03).minimize(loss)
    with fl.Session() as s:
        s.run(fl.global_variables_initializer())
        first = s.run(loss, {x: xs, y: ys})
        for _ in range(60):
            s.run(train, {x: xs, y: ys})
        last = s.run(loss, {x: xs, y: ys})
    assert last < 0.25 * first, (first, last)


def test_argument_checks(graph):
    with pytest.raises(ValueError, match="Exactly one of num_units or cell_size"):
        GRUBlockCellV2(4, cell_size=4)
    with pytest.raises(ValueError, match="Exactly one of num_units or cell_size"):
        GRUBlockCell()
    cell = GRUBlockCellV2(4)
    with pytest.raises(ValueError, match="expected ndim=2, found ndim=3"):
        cell(fl.zeros([2, 3, 5]), fl.zeros([2, 4]))
    with pytest.raises(ValueError, match="Expecting input_size to be set"):
        GRUBlockCell(4)(fl.placeholder(fl.float32, [2, None]), fl.zeros([2, 4]))
    with pytest.raises(ValueError, match="cell_size 4 vs 3"):
        GRUBlockCell(4)(fl.zeros([2, 5]), fl.zeros([2, 3]))


def test_the_gru_block_cells_are_reached_through_contrib_rnn():
    from dsl.contrib import gru_ops
    assert fl.contrib.rnn.GRUBlockCell is gru_ops.GRUBlockCell
    assert fl.contrib.rnn.GRUBlockCellV2 is gru_ops.GRUBlockCellV2
