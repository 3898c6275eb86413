"""ONNX's training operator set (``ai.onnx.preview.training``): Momentum, Nesterov momentum,
Adagrad and Adam imported from that domain, compiled to C and compared with onnx's reference
evaluator over several steps, so the step count T > 0 (which ONNX's node tests never feed)
takes the other branch of each update."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import dsl as fl  # noqa: E402
from dsl.onnx import UnsupportedOpsError, check_supported, import_graph  # noqa: E402

TRAINING = "ai.onnx.preview.training"


def _model(op, n, accumulators, attrs, domain=TRAINING):
    names = ["R", "T"] + [f"{k}{i}" for k in ["X", "G"] + accumulators for i in range(n)]
    outs = [f"{k}{i}_new" for k in ["X"] + accumulators for i in range(n)]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    shapes = [[3], [2, 2]][:n]
    inputs = [helper.make_tensor_value_info("R", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("T", TensorProto.INT64, [])]
    inputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, shapes[i % n])
               for i, name in enumerate(names[2:])]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in outs]
    graph = helper.make_graph([node], "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, 1)])


def _steps(model, feeds, steps):
    """Runs ``steps`` updates with flowc (one compile) and the reference, feeding each one's
    new tensors and accumulators to the next with T = 0, 1, 2, ... (the gradients stay);
    returns both histories."""
    imported = import_graph(model, "train.onnx")
    out_names = [vi.name for vi in model.graph.output]
    reference = ReferenceEvaluator(model)
    got_all, want_all = [], []
    with fl.Session(graph=imported.graph) as sess:
        ours, theirs = dict(feeds), dict(feeds)
        for t in range(steps):
            for state in (ours, theirs):
                state["T"] = np.array(t, np.int64)
            got = sess.run(list(imported.outputs.values()),
                           {imported.inputs[k]: v for k, v in ours.items()})
            want = reference.run(None, theirs)
            got_all.append(got)
            want_all.append(want)
            for name, g, w in zip(out_names, got, want):
                ours[name[:-4]] = np.asarray(g, np.float32)
                theirs[name[:-4]] = np.asarray(w, np.float32)
    return got_all, want_all


def _feeds(rng, n, accumulators):
    feeds = {"R": np.array(0.1, np.float32)}
    shapes = [(3,), (2, 2)][:n]
    for k in ["X", "G"] + accumulators:
        for i in range(n):
            low = -0.7 if k == "G" else 0.5
            feeds[f"{k}{i}"] = rng.uniform(low, low + 1.5, shapes[i]).astype(np.float32)
    return feeds


CASES = [
    ("Momentum", ["V"], dict(alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.01)),
    ("Momentum", ["V"], dict(alpha=0.8, beta=0.7, mode="nesterov", norm_coefficient=0.02)),
    ("Adagrad", ["H"], dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01)),
    ("Adam", ["V", "H"], dict(alpha=0.9, beta=0.99, epsilon=1e-6, norm_coefficient=0.01,
                              norm_coefficient_post=0.05)),
    ("Adam", ["V", "H"], dict()),
]


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}_{c[2].get('mode', '')}{len(c[2])}")
def test_optimizer_steps_match_the_reference_past_the_first_step(case, n, rng):
    op, accumulators, attrs = case
    model = _model(op, n, accumulators, attrs)
    got, want = _steps(model, _feeds(rng, n, accumulators), 4)
    for step, (g, w) in enumerate(zip(got, want)):
        for k, (a, b) in enumerate(zip(g, w)):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6, err_msg=f"step {step} out {k}")
    # the tensors did move, and differently on later steps than on the first
    assert not np.allclose(got[0][0], got[-1][0])


def test_the_training_ops_are_found_only_in_their_domain():
    model = _model("Adam", 1, ["V", "H"], {}, domain="")
    with pytest.raises(UnsupportedOpsError, match="Adam"):
        check_supported(model, "adam.onnx")
    check_supported(_model("Adam", 1, ["V", "H"], {}), "adam.onnx")
