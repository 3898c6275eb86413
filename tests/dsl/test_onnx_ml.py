"""TreeEnsemble (``ai.onnx.ml``) through flowc (compiled C) against onnx's reference on random
forests: every split mode, set membership, missing values tracked either way, several trees
and targets, and each aggregate function."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnx_compare import assert_close, run_both, run_flowc  # noqa: E402


def _forest(rng, n_trees, depth, n_features, n_targets):
    """Node and leaf attribute lists of ``n_trees`` full binary trees of ``depth``."""
    a = {k: [] for k in ("featureids", "splits", "modes", "truenodeids", "falsenodeids",
                         "trueleafs", "falseleafs", "missing")}
    leaf_targets, leaf_weights, roots, members = [], [], [], []

    def build(d):
        index = len(a["modes"])
        for k in a:
            a[k].append(0)
        mode = int(rng.integers(0, 7))
        a["modes"][index] = mode
        a["featureids"][index] = int(rng.integers(0, n_features))
        a["splits"][index] = float(rng.integers(-2, 3))
        a["missing"][index] = int(rng.integers(0, 2))
        if mode == 6:
            # no 0.0: the reference reads set members with `while (m := next(it)) and not
            # isnan(m)`, which takes 0.0 for the end of the set
            members.extend(float(v) for v in rng.choice([-2, -1, 1, 2], 2, replace=False))
            members.append(np.nan)
        for side in ("true", "false"):
            if d + 1 == depth:
                a[f"{side}leafs"][index] = 1
                a[f"{side}nodeids"][index] = len(leaf_weights)
                leaf_targets.append(int(rng.integers(0, n_targets)))
                leaf_weights.append(float(rng.uniform(-3, 3)))
            else:
                a[f"{side}nodeids"][index] = build(d + 1)
        return index

    for _ in range(n_trees):
        roots.append(build(0))
    return a, leaf_targets, leaf_weights, roots, members


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_matches_the_reference(aggregate, dtype, rng):
    a, targets, weights, roots, members = _forest(rng, 4, 3, 3, 3)
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE

    def tensor(name, values, t):
        return numpy_helper.from_array(np.asarray(values, t), name)
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=3,
        aggregate_function=aggregate, nodes_featureids=a["featureids"],
        nodes_splits=tensor("nodes_splits", a["splits"], dtype),
        nodes_modes=tensor("nodes_modes", a["modes"], np.uint8),
        nodes_truenodeids=a["truenodeids"], nodes_falsenodeids=a["falsenodeids"],
        nodes_trueleafs=a["trueleafs"], nodes_falseleafs=a["falseleafs"],
        nodes_missing_value_tracks_true=a["missing"], leaf_targetids=targets,
        leaf_weights=tensor("leaf_weights", weights, dtype), tree_roots=roots,
        **({"membership_values": tensor("membership_values", members, dtype)}
           if members else {}))
    x = rng.integers(-3, 4, (40, 3)).astype(dtype)
    x[rng.random((40, 3)) < 0.15] = np.nan
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, [40, 3])],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 5),
                                                    helper.make_opsetid("", 21)])
    got, want = run_both(model, {"x": x})
    assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_tree_ensemble_set_members_may_be_zero():
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=1, nodes_featureids=[0],
        nodes_splits=numpy_helper.from_array(np.zeros(1, np.float32), "nodes_splits"),
        nodes_modes=numpy_helper.from_array(np.array([6], np.uint8), "nodes_modes"),
        nodes_truenodeids=[0], nodes_falsenodeids=[1], nodes_trueleafs=[1],
        nodes_falseleafs=[1], leaf_targetids=[0, 0], tree_roots=[0],
        leaf_weights=numpy_helper.from_array(np.array([1, 2], np.float32), "leaf_weights"),
        membership_values=numpy_helper.from_array(np.array([0, 3, np.nan], np.float32),
                                                  "membership_values"))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [4, 1])], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                         None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 5)])
    (y,) = run_flowc(model, {"x": np.array([[0], [3], [1], [np.nan]], np.float32)})
    np.testing.assert_array_equal(y.reshape(-1), [1, 1, 2, 2])


def _ml_model(node, feeds):
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype),
                                            list(v.shape)) for n, v in feeds.items()]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(
        o, TensorProto.UNDEFINED, None) for o in node.output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 3)])


@pytest.mark.parametrize("shape,index", [((3, 4, 5), [[4, 0, 4]]), ((6,), [5, 1])])
def test_binarizer_and_array_feature_extractor_match_the_reference(shape, index, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[0] = np.nan
    feeds = {"x": x, "i": np.asarray(index, np.int64)}
    for node in (helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml",
                                  threshold=0.3),
                 helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"],
                                  domain="ai.onnx.ml")):
        used = {k: v for k, v in feeds.items() if k in node.input}
        got, want = run_both(_ml_model(node, used), used)
        assert_close(got, want)
