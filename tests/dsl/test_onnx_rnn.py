"""ONNX LSTM, GRU and RNN through flowc's importer and compiled C, against a numpy reference of
the ONNX formulas written here (one sequence at a time, as onnxruntime computes them): the
cases ONNX's node tests leave out — reverse and bidirectional with per-sequence lengths,
layout 1, every activation with its alpha/beta, clip, input_forget, linear_before_reset,
outputs left out, an unknown batch, an unknown sequence length (the while loop) and a static
one longer than the unrolling cut-over — and a small model exported by PyTorch."""
from __future__ import annotations

import os
from typing import Dict, List

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import dsl as fl  # noqa: E402
from dsl.onnx import import_graph  # noqa: E402
from dsl.onnx import ops_rnn  # noqa: E402
from oracle import NO_FOLDING  # noqa: E402
from repo_paths import TESTS  # noqa: E402
from runtime.errors import FlowcError  # noqa: E402

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}

# activation -> (function of x, alpha, beta; alpha's default; beta's default), from the spec
ACTS = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: 1 / (1 + np.exp(-x)), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.log1p(np.exp(x)), None, None),
}


def _functions(op, attrs, dirs):
    """Per direction, the activation functions with their alpha/beta bound."""
    names = list(attrs.get("activations") or DEFAULT_ACTS[op])
    if dirs == 2 and len(names) == len(DEFAULT_ACTS[op]):
        names = names * 2
    alphas = list(attrs.get("activation_alpha") or [])
    betas = list(attrs.get("activation_beta") or [])
    fns = []
    for name in names:
        fn, a_default, b_default = ACTS[name.lower()]
        a = (alphas.pop(0) if alphas else a_default) if a_default is not None else None
        b = (betas.pop(0) if betas else b_default) if b_default is not None else None
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    per = len(DEFAULT_ACTS[op])
    return [fns[d * per:(d + 1) * per] for d in range(dirs)]


def reference(op: str, attrs: Dict, X, W, R, B=None, lens=None, h0=None, c0=None, P=None):
    """Y, Y_h, Y_c (Y_c None but for LSTM) of an ONNX recurrent node, in float64."""
    layout = attrs.get("layout", 0)
    X = np.asarray(X, np.float64)
    if layout:
        X = X.swapaxes(0, 1)
        h0 = None if h0 is None else h0.swapaxes(0, 1)
        c0 = None if c0 is None else c0.swapaxes(0, 1)
    steps, batch, _ = X.shape
    dirs, hid = W.shape[0], R.shape[-1]
    g = GATES[op]
    B = np.zeros((dirs, 2 * g * hid)) if B is None else B
    h0 = np.zeros((dirs, batch, hid)) if h0 is None else h0
    c0 = np.zeros((dirs, batch, hid)) if c0 is None else c0
    P = np.zeros((dirs, 3 * hid)) if P is None else P
    lens = np.full(batch, steps) if lens is None else np.clip(lens, 0, steps)
    clip = attrs.get("clip")
    clipped = (lambda v: v) if clip is None else (lambda v: np.clip(v, -clip, clip))
    acts = _functions(op, attrs, dirs)
    reverse = attrs.get("direction", "forward") == "reverse"
    Y = np.zeros((steps, dirs, batch, hid))
    Yh = np.zeros((dirs, batch, hid))
    Yc = np.zeros((dirs, batch, hid))
    for d in range(dirs):
        w, r = W[d].astype(np.float64), R[d].astype(np.float64)
        wb, rb = np.split(B[d].astype(np.float64), 2)
        for b in range(batch):
            h, c = h0[d, b].astype(np.float64), c0[d, b].astype(np.float64)
            order = range(lens[b])
            for t in (reversed(order) if reverse or d == 1 else order):
                x = X[t, b]
                if op == "LSTM":
                    f, gg, hh = acts[d]
                    pi, po, pf = np.split(P[d].astype(np.float64), 3)
                    i, o, fg, cc = np.split(x @ w.T + h @ r.T + wb + rb, 4)
                    i = f(clipped(i + pi * c))
                    fg = 1 - i if attrs.get("input_forget") else f(clipped(fg + pf * c))
                    c = fg * c + i * gg(clipped(cc))
                    h = f(clipped(o + po * c)) * hh(c)
                elif op == "GRU":
                    f, gg = acts[d]
                    wz, wr, wh = np.split(w, 3)
                    rz, rr, rh = np.split(r, 3)
                    wbz, wbr, wbh = np.split(wb, 3)
                    rbz, rbr, rbh = np.split(rb, 3)
                    z = f(clipped(x @ wz.T + h @ rz.T + wbz + rbz))
                    rg = f(clipped(x @ wr.T + h @ rr.T + wbr + rbr))
                    if attrs.get("linear_before_reset"):
                        cand = x @ wh.T + rg * (h @ rh.T + rbh) + wbh
                    else:
                        cand = x @ wh.T + (rg * h) @ rh.T + rbh + wbh
                    h = (1 - z) * gg(clipped(cand)) + z * h
                else:
                    h = acts[d][0](clipped(x @ w.T + h @ r.T + wb + rb))
                Y[t, d, b] = h
            if lens[b] > 0:
                Yh[d, b], Yc[d, b] = h, c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.swapaxes(0, 1), Yc.swapaxes(0, 1)
    return Y, Yh, (Yc if op == "LSTM" else None)


class Case:
    """One recurrent node as an ONNX model, its inputs and the reference's outputs."""

    def __init__(self, name, op, rng, *, steps=4, batch=3, inp=5, hidden=6, dtype=np.float32,
                 x_dims=None, lens=None, initial=False, peepholes=False, bias=True,
                 outputs=("Y", "Y_h", "Y_c"), opset=14, feed_weights=False, **attrs):
        self.name, self.op = name, op
        dirs = 2 if attrs.get("direction") == "bidirectional" else 1
        g = GATES[op]
        layout = attrs.get("layout", 0)
        xshape = (batch, steps, inp) if layout else (steps, batch, inp)
        state_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
        onnx_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

        def arr(*shape, scale=0.5):
            return rng.uniform(-scale, scale, shape).astype(dtype)
        values = {"X": arr(*xshape, scale=1.0), "W": arr(dirs, g * hidden, inp),
                  "R": arr(dirs, g * hidden, hidden)}
        if bias:
            values["B"] = arr(dirs, 2 * g * hidden)
        if lens is not None:
            values["sequence_lens"] = np.asarray(lens, np.int32)
        if initial:
            values["initial_h"] = arr(*state_shape)
            if op == "LSTM":
                values["initial_c"] = arr(*state_shape)
        if peepholes:
            values["P"] = arr(dirs, 3 * hidden)
        order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
        if op != "LSTM":
            order = order[:6]
        names = [n if n in values else "" for n in order]
        while names and names[-1] == "":
            names.pop()
        n_out = 3 if op == "LSTM" else 2
        outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:n_out]]
        while outs and outs[-1] == "":
            outs.pop()
        node = helper.make_node(op, names, outs, name=f"{name}_node", hidden_size=hidden,
                                **attrs)
        fed = {"X": list(x_dims or xshape)}
        if feed_weights:                         # W and R graph inputs, not initializers
            fed.update({"W": list(values["W"].shape), "R": list(values["R"].shape)})
        if lens is not None:
            fed["sequence_lens"] = [batch]
        inputs = [helper.make_tensor_value_info(
            n, TensorProto.INT32 if n == "sequence_lens" else onnx_type, dims)
            for n, dims in fed.items()]
        graph = helper.make_graph(
            [node], name, inputs,
            [helper.make_tensor_value_info(o, onnx_type, [None] * (4 if o == "Y" else 3))
             for o in outs if o],
            initializer=[numpy_helper.from_array(v, n) for n, v in values.items() if n not in fed])
        self.model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(self.model)
        self.feeds = {n: values[n] for n in fed}
        ref = reference(op, attrs, **{k.replace("sequence_lens", "lens").replace(
            "initial_h", "h0").replace("initial_c", "c0"): v for k, v in values.items()})
        self.expected = {o: ref[k].astype(dtype) for k, o in enumerate(("Y", "Y_h", "Y_c"))
                         if o in outs and o}


def run_cases(cases: List[Case], graph_name="rnn") -> Dict[str, Dict[str, np.ndarray]]:
    """Import every case into one graph, compile it to C once, run it; outputs by case."""
    graph = fl.Graph(graph_name)
    imported = {c.name: import_graph(c.model, f"{c.name}.onnx", graph, scope=c.name)
                for c in cases}
    fetches, feeds = [], {}
    for c in cases:
        imp = imported[c.name]
        fetches += [(c.name, o, t) for o, t in imp.outputs.items()]
        feeds.update({imp.inputs[n]: v for n, v in c.feeds.items()})
    with fl.Session(graph=graph, backend="c", options=NO_FOLDING) as s:
        got = s.run([t for _, _, t in fetches], feeds)
    results: Dict[str, Dict[str, np.ndarray]] = {}
    for (case, out, _), value in zip(fetches, got):
        results.setdefault(case, {})[out] = value
    return results


def check(cases: List[Case], rtol=1e-4, atol=1e-5, graph_name="rnn"):
    results = run_cases(cases, graph_name)
    for c in cases:
        assert sorted(results[c.name]) == sorted(c.expected), c.name
        for out, want in c.expected.items():
            got = results[c.name][out]
            assert got.dtype == want.dtype and got.shape == want.shape, (c.name, out, got.shape)
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{c.name} {out}")
    return results


def _cases(rng, **extra):
    """The cases the node tests miss, for each op (``extra`` added to every one)."""
    lens = [4, 1, 0]
    cases = []
    for op in ("LSTM", "GRU", "RNN"):
        more = {"peepholes": True} if op == "LSTM" else {}
        cases += [
            Case(f"{op}_reverse_lens", op, rng, direction="reverse", lens=[2, 4, 3],
                 initial=True, **more, **extra),
            Case(f"{op}_bidirectional_lens", op, rng, direction="bidirectional", lens=lens,
                 initial=True, **more, **extra),
            Case(f"{op}_layout1_bidirectional", op, rng, direction="bidirectional", layout=1,
                 initial=True, lens=[3, 4, 1], **extra),
            Case(f"{op}_clip_no_bias", op, rng, clip=0.3, bias=False, **extra),
        ]
    cases += [
        Case("LSTM_input_forget", "LSTM", rng, input_forget=1, initial=True, **extra),
        Case("LSTM_activations", "LSTM", rng, direction="bidirectional",
             activations=["HardSigmoid", "LeakyRelu", "ScaledTanh",
                          "Sigmoid", "Elu", "Softsign"],
             activation_alpha=[0.3, 0.05, 0.9, 0.7], activation_beta=[0.4, 1.2], **extra),
        Case("GRU_linear_before_reset", "GRU", rng, direction="bidirectional",
             linear_before_reset=1, lens=lens, initial=True, **extra),
        Case("GRU_linear_before_reset_no_bias", "GRU", rng, linear_before_reset=1, bias=False,
             **extra),
        Case("GRU_activations", "GRU", rng, activations=["Affine", "ThresholdedRelu"],
             activation_alpha=[0.8, 0.1], activation_beta=[0.2], **extra),
        Case("LSTM_only_Y_c", "LSTM", rng, outputs=("Y_c",), lens=lens, **extra),
        Case("LSTM_only_Y", "LSTM", rng, outputs=("Y",), direction="reverse", **extra),
        Case("GRU_only_Y_h", "GRU", rng, outputs=("Y_h",), layout=1, **extra),
    ]
    for k, act in enumerate(["Relu", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu",
                             "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"]):
        alpha = {"Affine": [1.5], "LeakyRelu": [0.2], "ThresholdedRelu": [0.05],
                 "ScaledTanh": [1.3], "HardSigmoid": [0.4], "Elu": [0.6]}.get(act)
        beta = {"Affine": [-0.1], "ScaledTanh": [0.7], "HardSigmoid": [0.45]}.get(act)
        attrs = {"activations": [act]}
        if alpha:
            attrs["activation_alpha"] = alpha
        if beta:
            attrs["activation_beta"] = beta
        cases.append(Case(f"RNN_{act}", "RNN", rng, lens=[4, 2, 3] if k % 2 else None,
                          **attrs, **extra))
    cases.append(Case("RNN_default_alphas", "RNN", rng, direction="bidirectional",
                      activations=["LeakyRelu", "HardSigmoid"], **extra))
    return cases


def test_static_lengths_unrolled_match_the_onnx_formulas(rng):
    cases = _cases(rng)
    assert all(c.model.graph.input[0].type.tensor_type.shape.dim[0].dim_value for c in cases)
    check(cases, graph_name="unrolled")


def test_unknown_sequence_lengths_run_in_a_while_loop_and_match(rng):
    """X's time dim symbolic (the dim an exporter marks dynamic): the loop path, fed a
    sequence longer than the unrolling cut-over and, in one case, an unknown batch too."""
    steps = ops_rnn.MAX_UNROLLED_STEPS + 3
    cases = _cases(rng, steps=steps)
    for c in cases:
        dims = c.model.graph.input[0].type.tensor_type.shape.dim
        dims[1 if _layout(c) else 0].dim_param = "seq"
    cases.append(Case("LSTM_unknown_seq_and_batch", "LSTM", rng, steps=steps,
                      direction="bidirectional", x_dims=["seq", "batch", 5]))
    check(cases, graph_name="looped")


def _layout(case: Case) -> int:
    return next((a.i for a in case.model.graph.node[0].attribute if a.name == "layout"), 0)


def test_the_loop_path_is_a_c_loop_writing_y_in_place_and_long_static_sequences_take_it(rng):
    from compiler.codegen.emitter import emit_c
    from compiler.step import make_step_graph, optimize
    steps = ops_rnn.MAX_UNROLLED_STEPS
    short = Case("short", "LSTM", rng, steps=steps, direction="bidirectional", clip=2.0)
    long = Case("long", "GRU", rng, steps=steps + 1, direction="bidirectional", lens=[9, 3, 0])
    check([short, long], graph_name="cutover")
    graph = fl.Graph("cutover")
    imported = {c.name: import_graph(c.model, f"{c.name}.onnx", graph, scope=c.name)
                for c in (short, long)}
    ops = {name: {n.op for n in graph if n.name.startswith(name + "/")} for name in imported}
    assert "LoopCond" not in ops["short"] and "Unpack" in ops["short"]
    assert {"LoopCond", "InplaceUpdate"} <= ops["long"]
    imp = imported["long"]
    step = make_step_graph(graph, [t.output for t in imp.inputs.values()],
                           [t.output for t in imp.outputs.values()], [])
    optimize(step)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    assert source.count("while (1) {") == 1             # both directions in one loop
    # Y of each direction stays in its buffer: written one row per iteration, never copied
    assert source.count("the variable is unchanged */") == 2


def test_weights_known_at_import_are_stored_transposed_and_fed_ones_are_not(rng):
    """W and R initializers become W^T and R^T constants (plain a @ b gemms); W and R fed at
    run time keep transpose_b. Both match the reference, unrolled and in the loop."""
    long = ops_rnn.MAX_UNROLLED_STEPS + 2
    cases = []
    for fed in (False, True):
        tag = "fed" if fed else "init"
        cases += [
            Case(f"LSTM_bidirectional_{tag}", "LSTM", rng, direction="bidirectional",
                 initial=True, peepholes=True, feed_weights=fed),
            Case(f"GRU_bidirectional_{tag}", "GRU", rng, direction="bidirectional",
                 lens=[4, 2, 0], feed_weights=fed),
            Case(f"GRU_linear_before_reset_{tag}", "GRU", rng, linear_before_reset=1,
                 steps=long, feed_weights=fed),
            Case(f"RNN_reverse_{tag}", "RNN", rng, direction="reverse", steps=long,
                 feed_weights=fed),
            Case(f"LSTM_loop_{tag}", "LSTM", rng, steps=long, lens=[long, 3, 1],
                 feed_weights=fed)]
    check(cases, graph_name="weights")
    graph = fl.Graph("weights")
    for c in cases:
        import_graph(c.model, f"{c.name}.onnx", graph, scope=c.name)
    for c in cases:
        ops = [n for n in graph if n.name.startswith(c.name + "/")]
        if c.name == "LSTM_bidirectional_init":          # fused: one BlockLSTMV2 a direction
            assert [n.op for n in ops].count("BlockLSTMV2") == 2, c.name
            assert "MatMul" not in {n.op for n in ops}, c.name
            continue
        matmuls = [n for n in ops if n.op == "MatMul"]
        transposed = {bool(n.attrs.get("transpose_b", False)) for n in matmuls}
        assert matmuls and transposed == {c.name.endswith("_fed")}, c.name


def test_lstms_blocklstm_computes_are_fused_into_it_and_the_rest_are_not(rng):
    """An LSTM with the default activations, no clip, no input_forget, no sequence_lens and
    W and R known at import is one BlockLSTMV2 per direction (the whole sequence in one C
    kernel): forward, reverse, bidirectional, layout 1, peepholes, initial states, no B,
    outputs left out, f64, static and unknown lengths, all matching the ONNX formulas; the
    others keep the step-by-step lowering."""
    long = ops_rnn.MAX_UNROLLED_STEPS + 3
    fused = [
        Case("F_forward", "LSTM", rng),
        Case("F_reverse_peep_init", "LSTM", rng, direction="reverse", peepholes=True,
             initial=True),
        Case("F_bidir_layout1", "LSTM", rng, direction="bidirectional", layout=1,
             initial=True, peepholes=True),
        Case("F_no_bias_long", "LSTM", rng, steps=long, bias=False),
        Case("F_f64", "LSTM", rng, dtype=np.float64, direction="bidirectional"),
        Case("F_only_c", "LSTM", rng, direction="reverse", outputs=("Y_c",))]
    unknown = Case("F_unknown_seq", "LSTM", rng, steps=long, direction="bidirectional",
                   x_dims=["seq", "batch", 5])
    kept = [
        Case("K_clip", "LSTM", rng, clip=1.5),
        Case("K_lens", "LSTM", rng, lens=[4, 2, 3]),
        Case("K_input_forget", "LSTM", rng, input_forget=1),
        Case("K_acts", "LSTM", rng, activations=["HardSigmoid", "Tanh", "Tanh"]),
        Case("K_fed", "LSTM", rng, feed_weights=True)]
    check(fused + [unknown] + kept, graph_name="fusion")
    graph = fl.Graph("fusion")
    for c in fused + [unknown] + kept:
        import_graph(c.model, f"{c.name}.onnx", graph, scope=c.name)
    for c in fused + [unknown] + kept:
        ops = {n.op for n in graph if n.name.startswith(c.name + "/")}
        assert ("BlockLSTMV2" in ops) == c.name.startswith("F_"), c.name
    # the kernel stores only the outputs something reads: h and the cell state, not the gates
    from compiler.codegen.emitter import emit_c
    from compiler.step import make_step_graph, optimize
    g = fl.Graph("fused_source")
    imp = import_graph(fused[0].model, "F_forward.onnx", g)
    step = make_step_graph(g, [t.output for t in imp.inputs.values()],
                           [t.output for t in imp.outputs.values()], [])
    optimize(step)
    source = emit_c(step.graph, step.feeds, step.retvals).source
    assert "y_h[k] = " in source and "y_cs[k] = " in source
    assert "y_i[k] = " not in source and "y_ci[k] = " not in source


@pytest.mark.parametrize("opset", [7, 22])
def test_every_opset_that_defines_the_ops(rng, opset):
    cases = [Case(f"{op}_opset{opset}", op, rng, opset=opset, direction="bidirectional",
                  lens=[4, 2, 1], initial=True) for op in ("LSTM", "GRU", "RNN")]
    check(cases, graph_name=f"opset{opset}")


def test_float64_models(rng):
    cases = [Case(f"{op}_f64", op, rng, dtype=np.float64, direction="bidirectional",
                  lens=[4, 2, 1], initial=True, peepholes=op == "LSTM") for op in GATES]
    check(cases, rtol=1e-10, atol=1e-12, graph_name="f64")


@pytest.mark.parametrize("attrs,match", [
    ({"direction": "sideways"}, "direction must be forward, reverse or bidirectional"),
    ({"activations": ["Tanh", "Tanh"]}, "needs 3 activations"),
    ({"activations": ["Sigmoid", "Swish", "Tanh"]}, "unknown activation 'Swish'"),
])
def test_bad_attributes_are_errors_naming_the_node(rng, attrs, match):
    case = Case("bad", "LSTM", rng)
    node = case.model.graph.node[0]
    for name, value in attrs.items():
        node.attribute.append(helper.make_attribute(name, value))
    with pytest.raises(FlowcError, match=rf"LSTM 'bad_node'.*{match}"):
        import_graph(case.model, "bad.onnx", fl.Graph("bad"))


# --- a model exported by PyTorch -----------------------------------------------------------
TORCH_DIR = os.path.join(TESTS, "data", "onnx_rnn")


def test_a_pytorch_exported_lstm_and_gru_model_matches_torch():
    """tests/data/onnx_rnn/torch_rnn.onnx: nn.LSTM (2 layers, bidirectional) then nn.GRU,
    exported by torch.onnx with the time and batch dims dynamic; expected outputs computed by
    PyTorch (made by tests/data/onnx_rnn/make_torch_rnn.py)."""
    model = onnx.load(os.path.join(TORCH_DIR, "torch_rnn.onnx"))
    data = np.load(os.path.join(TORCH_DIR, "torch_rnn_io.npz"))
    imp = import_graph(model, "torch_rnn.onnx")
    assert {"LSTM", "GRU"} <= {n.op_type for n in model.graph.node}
    names = [vi.name for vi in model.graph.output]
    with fl.Session(graph=imp.graph, backend="c") as s:
        for k in range(2):             # two inputs of different sequence lengths and batches
            x = data[f"x{k}"]
            got = s.run([imp.outputs[n] for n in names], {imp.inputs["x"]: x})
            for n, g in zip(names, got):
                np.testing.assert_allclose(g, data[f"{n}{k}"], rtol=1e-4, atol=1e-5,
                                           err_msg=f"{n} for input {k} {x.shape}")
