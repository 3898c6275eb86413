"""ONNX Attention and RotaryEmbedding with symbolic dims (batch, sequence lengths unknown at
import time): compiled to C and checked against onnx's reference evaluator at several sizes.
ONNX's own node tests (test_onnx_backend.py) cover the attributes on static shapes."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import dsl as fl  # noqa: E402
from dsl.onnx import import_graph  # noqa: E402


def _run_both(model, feeds):
    imported = import_graph(model, "attention.onnx")
    with fl.Session(graph=imported.graph, backend="c") as sess:
        got = sess.run(list(imported.outputs.values()),
                       {imported.inputs[k]: v for k, v in feeds.items()})
    want = ReferenceEvaluator(model).run(None, feeds)
    return got, want


def _value(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


@pytest.mark.parametrize("causal", [0, 1])
def test_gqa_attention_with_past_and_symbolic_lengths(causal, rng):
    """3-D inputs, 4 query heads over 2 KV heads, a KV cache, an additive mask shorter than
    the keys (padded with -inf), all lengths fed at run time."""
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "pk", "pv"],
                            ["y", "present_k", "present_v", "qk"], q_num_heads=4, kv_num_heads=2,
                            is_causal=causal, qk_matmul_output_mode=2, softcap=3.0)
    graph = helper.make_graph(
        [node], "g",
        [_value("q", ["b", "s", 32]), _value("k", ["b", "t", 16]), _value("v", ["b", "t", 12]),
         _value("mask", ["s", "m"]), _value("pk", ["b", 2, "p", 8]),
         _value("pv", ["b", 2, "p", 6])],
        [_value("y", None), _value("present_k", None), _value("present_v", None),
         _value("qk", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    for b, s, t, p in ((1, 3, 3, 2), (2, 1, 2, 5)):
        mask = rng.normal(size=(s, p + t - 1)).astype(np.float32)
        feeds = {"q": rng.normal(size=(b, s, 32)).astype(np.float32),
                 "k": rng.normal(size=(b, t, 16)).astype(np.float32),
                 "v": rng.normal(size=(b, t, 12)).astype(np.float32),
                 "mask": mask, "pk": rng.normal(size=(b, 2, p, 8)).astype(np.float32),
                 "pv": rng.normal(size=(b, 2, p, 6)).astype(np.float32)}
        got, want = _run_both(model, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_attention_nonpad_lengths_and_window_fed_at_run_time(rng):
    """An external KV cache: per-batch valid lengths, a bool mask, a sliding window (opset 25);
    rows with no key to attend come out zero, not NaN."""
    node = helper.make_node("Attention", ["q", "k", "v", "mask", "", "", "lens"], ["y"],
                            is_causal=1, left_window_size=1)
    graph = helper.make_graph(
        [node], "g",
        [_value("q", ["b", 2, "s", 4]), _value("k", ["b", 2, "t", 4]),
         _value("v", ["b", 2, "t", 4]), _value("mask", ["s", "t"], TensorProto.BOOL),
         _value("lens", ["b"], TensorProto.INT64)],
        [_value("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    b, s, t = 3, 3, 5
    feeds = {"q": rng.normal(size=(b, 2, s, 4)).astype(np.float32),
             "k": rng.normal(size=(b, 2, t, 4)).astype(np.float32),
             "v": rng.normal(size=(b, 2, t, 4)).astype(np.float32),
             "mask": rng.random((s, t)) > 0.3, "lens": np.array([5, 2, 4], np.int64)}
    (got,), (want,) = _run_both(model, feeds)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert np.all(got[1, :, 0] == 0)            # batch 1: 2 valid keys, query 0 sees none


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_on_3d_input_of_symbolic_length(interleaved, rng):
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                            num_heads=2, rotary_embedding_dim=4, interleaved=interleaved)
    graph = helper.make_graph(
        [node], "g", [_value("x", ["b", "s", 12]), _value("cos", [16, 2]),
                      _value("sin", [16, 2]), _value("pos", ["b", "s"], TensorProto.INT64)],
        [_value("y", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    angles = rng.random((16, 2)) * 3
    feeds = {"x": rng.normal(size=(2, 5, 12)).astype(np.float32),
             "cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32),
             "pos": rng.integers(0, 16, (2, 5)).astype(np.int64)}
    (got,), (want,) = _run_both(model, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_linear_attention_and_causal_conv_with_a_symbolic_batch(rng):
    """Gated DeltaNet's mixers (opset 27) with the batch fed at run time: the conv carries its
    state, the linear attention's recurrence is unrolled over the (known) sequence length."""
    nodes = [helper.make_node("CausalConvWithState", ["x", "w", "bias", "conv_past"],
                              ["xc", "conv_present"], activation="silu"),
             helper.make_node("Transpose", ["xc"], ["q"], perm=[0, 2, 1]),
             helper.make_node("LinearAttention", ["q", "k", "v", "state", "decay", "beta"],
                              ["y", "present"], q_num_heads=4, kv_num_heads=2)]
    graph = helper.make_graph(
        nodes, "g",
        [_value("x", ["b", 8, 3]), _value("w", [8, 1, 3]), _value("bias", [8]),
         _value("conv_past", ["b", 8, 2]), _value("k", ["b", 3, 4]), _value("v", ["b", 3, 6]),
         _value("state", ["b", 2, 2, 3]), _value("decay", ["b", 3, 2]), _value("beta", ["b", 3, 2])],
        [_value("y", None), _value("present", None), _value("conv_present", None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    for b in (1, 3):
        def r(*shape):
            return rng.normal(size=shape).astype(np.float32)
        feeds = {"x": r(b, 8, 3), "w": r(8, 1, 3), "bias": r(8), "conv_past": r(b, 8, 2),
                 "k": r(b, 3, 4), "v": r(b, 3, 6), "state": r(b, 2, 2, 3),
                 "decay": -np.abs(r(b, 3, 2)), "beta": 1 / (1 + np.exp(-r(b, 3, 2)))}
        got, want = _run_both(model, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
