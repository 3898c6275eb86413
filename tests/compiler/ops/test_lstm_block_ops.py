"""TensorFlow's fused LSTM ops: LSTMBlockCell, BlockLSTM, BlockLSTMV2, LSTMBlockCellGrad,
BlockLSTMGrad and BlockLSTMGradV2.

The numpy references against TensorFlow's own results (a TF1 GraphDef with all six ops,
recorded into tests/data/tf1_layers/block_lstm_graph.* by record_block_lstm.py there, imported
and run both ways), against each other (BlockLSTM is LSTMBlockCell in a loop, BlockLSTMV2 is
BlockLSTM with the c and f gate blocks swapped); the compiled C against the references over
dtypes (f16 through f32), peepholes, cell clips, seq_len_max short of the end and 0, static
and fed dims, empty batches and sequences, and the run-time errors; the python gradients
against finite differences, compiled and interpreted."""
import os

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from repo_paths import TESTS
from runtime.dtypes import as_dtype
from runtime.errors import FlowcError

A = fl.apply_op
DATA = os.path.join(TESTS, "data", "tf1_layers")
NAMES = ["i", "cs", "f", "o", "ci", "co", "h"]
WEIGHTS = ("cs0", "h0", "w", "wci", "wcf", "wco", "b")


def _params(rng, batch, inp, cell, dtype=np.float32, scale=0.5):
    shapes = {"cs0": (batch, cell), "h0": (batch, cell), "w": (inp + cell, 4 * cell),
              "wci": (cell,), "wcf": (cell,), "wco": (cell,), "b": (4 * cell,)}
    values = {k: (rng.standard_normal(s) * scale).astype(dtype) for k, s in shapes.items()}
    values["cs0"] = rng.uniform(-2, 2, shapes["cs0"]).astype(dtype)
    return values


def _args(p):
    return [p[k] for k in WEIGHTS]


def _grad_op(op):
    return {"BlockLSTM": "BlockLSTMGrad", "BlockLSTMV2": "BlockLSTMGradV2"}[op]


# --- compiled C against the references ---------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_six_ops_match_the_interpreter(graph, rng, dtype):
    time, batch, inp, cell = 5, 3, 4, 6
    fdt = as_dtype(dtype)
    p = _params(rng, batch, inp, cell, dtype)
    x = fl.placeholder(fdt, [None, None, inp], name="x")
    seq = fl.placeholder(fl.int64, [], name="seq_len_max")
    w = fl.placeholder(fdt, [None, None], name="w")       # a fed w: its dims checked at run time
    args = _args(p)
    fetches = {}
    for op in ("BlockLSTM", "BlockLSTMV2"):
        for peep, clip in ((False, 0.0), (True, 0.6), (True, -1.0)):
            key = f"{op}/{peep}/{clip}"
            ins = [seq, x] + args[:2] + [w] + args[3:]
            outs = A(op, ins, {"use_peephole": peep, "cell_clip": clip})
            fetches.update({f"{key}/{n}": t for n, t in zip(NAMES, outs)})
            cs_grad = (rng.standard_normal((time, batch, cell))).astype(dtype)
            grads = A(_grad_op(op), ins + list(outs) + [cs_grad, outs[6] + 1.0],
                      {"use_peephole": peep})
            fetches.update({f"{key}/grad{k}": t for k, t in enumerate(grads)})
    for peep, clip, fb in ((False, 3.0, 1.0), (True, 0.4, 0.3)):
        key = f"cell/{peep}/{clip}"
        ins = [x[1]] + args[:2] + [w] + args[3:]
        outs = A("LSTMBlockCell", ins, {"use_peephole": peep, "cell_clip": clip,
                                        "forget_bias": fb})
        fetches.update({f"{key}/{n}": t for n, t in zip(NAMES, outs)})
        grads = A("LSTMBlockCellGrad", ins + list(outs[:6]) + [outs[1] * 0.5, outs[6] - 1.0],
                  {"use_peephole": peep})
        fetches.update({f"{key}/grad{k}": t for k, t in enumerate(grads)})
    xs = (rng.standard_normal((time, batch, inp)) * 1.5).astype(dtype)
    for steps in (time, 3, 0):
        got = check_against_interpreter(graph, fetches, {x: xs, seq: steps, w: p["w"]})
        h = got["BlockLSTM/True/0.6/h"]
        assert h.shape == (time, batch, cell) and not h[steps:].any()
        assert np.abs(got["BlockLSTM/True/0.6/cs"]).max() <= 0.6 + 1e-6
        assert not got["BlockLSTMV2/False/0.0/grad0"][steps:].any()     # x_grad past the end
        if steps:
            assert h[:steps].all()
    assert got["cell/True/0.4/grad1"].shape == (batch, 4 * cell)


def test_half_precision_runs_in_float32(graph, rng):
    p = _params(rng, 2, 3, 4, np.float16)
    x = fl.placeholder(fl.float16, [4, 2, 3], name="x")
    outs = A("BlockLSTMV2", [np.int64(3), x] + _args(p), {"use_peephole": True})
    got = check_against_interpreter(graph, list(outs),
                                    {x: rng.standard_normal((4, 2, 3)).astype(np.float16)})
    assert got["6"].dtype == np.float16


def test_empty_batches_and_sequences(graph, rng):
    p = _params(rng, 0, 3, 4)
    x = fl.placeholder(fl.float32, [None, None, 3], name="x")
    outs = A("BlockLSTM", [fl.cast(fl.shape(x)[0], fl.int64), x] + _args(p))
    grads = A("BlockLSTMGrad", [fl.cast(fl.shape(x)[0], fl.int64), x] + _args(p) + list(outs)
              + [outs[1], outs[6]], {"use_peephole": False})
    for xs in (np.zeros((5, 0, 3), np.float32), np.zeros((0, 0, 3), np.float32)):
        got = check_against_interpreter(graph, list(outs) + list(grads), {x: xs})
        assert got["6"].shape == xs.shape[:2] + (4,) and got["7"].shape == xs.shape
        assert not got["10"].any()                                      # w_grad


# --- the references against each other ------------------------------------------------------
def test_block_lstm_is_the_cell_in_a_loop_and_v2_has_the_c_and_f_gates_swapped(graph, rng):
    time, batch, inp, cell = 4, 2, 3, 5
    p = _params(rng, batch, inp, cell)
    x = rng.standard_normal((time, batch, inp)).astype(np.float32)
    attrs = {"use_peephole": True, "cell_clip": 0.9, "forget_bias": 0.0}
    block = A("BlockLSTM", [np.int64(time), x] + _args(p), attrs)
    c, h, steps = p["cs0"], p["h0"], []
    for t in range(time):
        outs = A("LSTMBlockCell", [x[t], c, h] + _args(p)[2:], attrs)
        steps.append(outs)
        c, h = outs[1], outs[6]
    swap = np.concatenate([np.arange(cell), np.arange(2 * cell, 3 * cell),
                           np.arange(cell, 2 * cell), np.arange(3 * cell, 4 * cell)])
    v2_args = _args(p)
    v2_args[2], v2_args[6] = p["w"][:, swap], p["b"][swap]
    v2 = A("BlockLSTMV2", [np.int64(time), x] + v2_args,
           {"use_peephole": True, "cell_clip": 0.9})
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            got_block, got_steps, got_v2 = s.run([list(block), steps, list(v2)])
        for k, name in enumerate(NAMES):
            np.testing.assert_allclose(got_block[k], np.stack([st[k] for st in got_steps]),
                                       rtol=1e-5, atol=1e-6, err_msg=f"{backend} {name}")
            np.testing.assert_allclose(got_v2[k], got_block[k], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{backend} V2 {name}")


# --- errors ---------------------------------------------------------------------------------
def test_bad_sizes_and_seq_len_max_are_errors(graph, rng):
    p = _params(rng, 2, 3, 4)
    x = fl.placeholder(fl.float32, [None, None, None], name="x")
    seq = fl.placeholder(fl.int64, [], name="seq")
    w = fl.placeholder(fl.float32, [None, None], name="w")
    args = _args(p)
    h = A("BlockLSTM", [seq, x] + args[:2] + [w] + args[3:])[6]
    xs = np.zeros((3, 2, 3), np.float32)
    cases = [({seq: 4, w: p["w"]}, r"seq_len_max must be between 0 and 3 but is 4"),
             ({seq: -1, w: p["w"]}, r"seq_len_max must be between 0 and 3 but is -1"),
             ({seq: 2, w: np.zeros((8, 16), np.float32)},
              r"w\.dim_size\(0\) != input_size \+ cell_size: 8 != 7"),
             ({seq: 2, w: np.zeros((7, 12), np.float32)},
              r"w\.dim_size\(1\) != cell_size \* 4: 12 != 16")]
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            for feed, message in cases:
                with pytest.raises(FlowcError, match=message):
                    s.run(h, {x: xs, **feed})
    with pytest.raises(ShapeError, match="not a multiple of 4"):
        A("BlockLSTM", [np.int64(1), xs] + args[:2] + [np.zeros((7, 15), np.float32)] + args[3:])
    with pytest.raises(ShapeError, match="cell sizes"):
        A("LSTMBlockCell", [xs[0], p["cs0"], np.zeros((2, 5), np.float32)] + args[2:])


# --- gradients ------------------------------------------------------------------------------
def _numeric_gradient(sess, loss, feeds, x, eps=1e-6):
    out = np.zeros_like(feeds[x])
    for k in np.ndindex(*out.shape):
        values = []
        for step in (eps, -eps):
            moved = dict(feeds)
            moved[x] = feeds[x].copy()
            moved[x][k] += step
            values.append(sess.run(loss, moved))
        out[k] = (values[0] - values[1]) / (2 * eps)
    return out


@pytest.mark.parametrize("op", ["LSTMBlockCell", "BlockLSTM", "BlockLSTMV2"])
def test_gradients_match_finite_differences(graph, rng, op):
    time, batch, inp, cell = 3, 2, 2, 3
    values = _params(rng, batch, inp, cell, np.float64)
    values["x"] = rng.standard_normal((time, batch, inp) if op != "LSTMBlockCell"
                                      else (batch, inp))
    ph = {k: fl.placeholder(fl.float64, v.shape, name=k) for k, v in values.items()}
    losses = {}
    for peep in (False, True):
        ins = [ph["x"]] + [ph[k] for k in WEIGHTS]
        if op != "LSTMBlockCell":
            ins = [np.int64(time - (1 if peep else 0))] + ins
        outs = A(op, ins, {"use_peephole": peep, "cell_clip": 0.0})
        shape = values["x"].shape[:-1] + (cell,)
        loss = (fl.reduce_sum(outs[6] * rng.uniform(0.5, 1.5, shape))
                + fl.reduce_sum(outs[1] * rng.uniform(0.5, 1.5, shape)))
        losses[peep] = (loss, fl.gradients(loss, list(ph.values())))
    feeds = {ph[k]: v for k, v in values.items()}
    with fl.Session(graph=graph, backend="interpreter") as s:
        numeric = {peep: [_numeric_gradient(s, loss, feeds, t) for t in ph.values()]
                   for peep, (loss, _) in losses.items()}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as s:
            for peep, (loss, grads) in losses.items():
                for name, got, want in zip(ph, s.run(grads, feeds), numeric[peep]):
                    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7,
                                               err_msg=f"{backend} {peep} {name}")
                    if name in ("wci", "wcf", "wco") and not peep:
                        assert not got.any()


# --- TensorFlow's graphs --------------------------------------------------------------------
def _tf_graph():
    pytest.importorskip("google.protobuf", reason="GraphDef import needs protobuf")
    from compiler.interop.graphdef import load_graphdef_model
    model = load_graphdef_model(os.path.join(DATA, "block_lstm_graph.pb"))
    return model.graph, np.load(os.path.join(DATA, "block_lstm_graph.npz"))


def test_a_tensorflow_graphdef_with_the_six_ops_imports_and_matches():
    from dsl.tensor import Tensor
    g, tf = _tf_graph()
    assert {n.op for n in g} >= {"LSTMBlockCell", "LSTMBlockCellGrad", "BlockLSTM",
                                 "BlockLSTMV2", "BlockLSTMGrad", "BlockLSTMGradV2"}
    names = [k for k in tf.files if "/" in k]
    assert len(names) == 47
    fetches = [Tensor(g.output(k.replace("/", "__"))) for k in names]
    feed = {Tensor(g.output("x")): tf["x"], Tensor(g.output("seq_len_max")): tf["seq_len_max"]}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=g, backend=backend) as s:
            got = s.run(fetches, feed)
        for name, v in zip(names, got):
            np.testing.assert_allclose(v, tf[name], rtol=2e-5, atol=2e-5,
                                       err_msg=f"{backend} {name}")


def test_block_lstm_v2_gradient_is_tensorflows_block_lstm_grad_v2():
    """flowc differentiates BlockLSTMV2 with BlockLSTMGradV2 (checked against finite
    differences above); TensorFlow registers BlockLSTMGrad, whose gates are in BlockLSTM's
    order, for it too. The recorded TensorFlow graph has both: flowc's gradient is the
    BlockLSTMGradV2 that TensorFlow computes when asked for it directly."""
    pytest.importorskip("google.protobuf", reason="GraphDef import needs protobuf")
    tf = np.load(os.path.join(DATA, "block_lstm_graph.npz"))
    with open(os.path.join(DATA, "block_lstm_graph.pb"), "rb") as f:
        graph_def = f.read()
    wrt = ["x", "cs0", "h0", "w", "wci", "wcf", "wco", "b"]
    with fl.Graph().as_default() as g:
        fl.import_graph_def(graph_def, name="")
        t = g.get_tensor_by_name
        loss = (fl.reduce_sum(t("block_v2:1") * t("block_v2_weight1:0"))
                + fl.reduce_sum(t("block_v2:6") * t("block_v2_weight6:0")))
        grads = fl.gradients(loss, [t(f"{n}:0") for n in wrt])
        assert grads[0].op.type == "BlockLSTMGradV2"
        with fl.Session(backend="interpreter") as s:
            got = s.run(grads, {t("x:0"): tf["x"], t("seq_len_max:0"): tf["seq_len_max"]})
    for name, v in zip(wrt, got):
        np.testing.assert_allclose(v, tf[f"block_grad_v2/{name}"], rtol=2e-5, atol=2e-5,
                                   err_msg=name)
        if name == "w":                    # TensorFlow's own tf.gradients gets another w_grad
            assert not np.allclose(v, tf[f"block_v2_grad/{name}"], atol=1e-3)
