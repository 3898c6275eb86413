"""ONNX lowerings of ``dsl/onnx/ops_math_extra.py`` where ONNX says more than the flowc op:
BitShift's out-of-range amounts, CumSum's axis forms, Selu/LeakyRelu attrs, IsInf's flags,
Gelu's modes. Each model is compiled to C and compared with onnx's reference evaluator."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import dsl as fl  # noqa: E402
from dsl.onnx import OnnxImportError, import_graph  # noqa: E402

ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
        np.dtype(np.int8): TensorProto.INT8, np.dtype(np.int32): TensorProto.INT32,
        np.dtype(np.int64): TensorProto.INT64, np.dtype(np.uint8): TensorProto.UINT8,
        np.dtype(np.bool_): TensorProto.BOOL}


def _run_both(node, feeds, out_dtype, opset, initializers=()):
    """(flowc's compiled outputs, onnx reference outputs, the imported graph's op types)."""
    inputs = [helper.make_tensor_value_info(n, ELEM[v.dtype], list(v.shape))
              for n, v in feeds.items()]
    outputs = [helper.make_tensor_value_info(n, ELEM[np.dtype(out_dtype)], None)
               for n in node.output]
    graph = helper.make_graph([node], "g", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, n)
                                           for n, v in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    want = ReferenceEvaluator(model).run(None, feeds)
    imported = import_graph(model, "model.onnx")
    with fl.Session(graph=imported.graph) as sess:
        got = sess.run(list(imported.outputs.values()),
                       {imported.inputs[n]: v for n, v in feeds.items()})
    return got, want, {op.type for op in imported.graph.get_operations()}


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64])
def test_bit_shift_amounts_outside_the_width_follow_onnx(direction, dtype):
    info = np.iinfo(dtype)
    bits = 8 * np.dtype(dtype).itemsize
    x = np.array([1, 5, info.max, info.min, info.max // 3, 0, 7, info.max, 2, 3], dtype)
    amounts = [0, 1, bits - 1, bits, bits + 1, 100 % (info.max + 1), 3, 2, bits - 2, 1]
    if info.min < 0:
        x = np.concatenate([x, np.array([-8, -1, -128, -5], dtype)])
        amounts += [-1, bits, 1, -100]
    y = np.array(amounts, dtype)
    node = helper.make_node("BitShift", ["x", "y"], ["z"], direction=direction)
    opset = 28 if info.min < 0 else 11
    got, want, _ = _run_both(node, {"x": x, "y": y}, dtype, opset)
    np.testing.assert_array_equal(got[0], want[0])


def test_cumsum_axis_as_1d_initializer_or_fed_at_run_time(rng):
    x = rng.normal(size=(3, 4)).astype(np.float32)
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1)
    got, want, ops = _run_both(node, {"x": x}, np.float32, 14,
                               initializers=[("axis", np.array(1, np.int64))])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert "Cumsum" in ops and "MatMul" not in ops
    # the spec says 0-D; some exporters write a 1-element 1-D axis (onnx's evaluator refuses it)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axis")])
    imported = import_graph(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 14)]), "model.onnx")
    with fl.Session(graph=imported.graph) as sess:
        (y,) = sess.run(list(imported.outputs.values()), {imported.inputs["x"]: x})
    np.testing.assert_allclose(y, np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x, rtol=1e-5,
                               atol=1e-6)
    for axis in (0, -1):
        node = helper.make_node("CumProd", ["x", "axis"], ["y"])
        got, want, _ = _run_both(node, {"x": x, "axis": np.array(axis, np.int32)}, np.float32,
                                 26)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")      # onnx's evaluator on inf
def test_activation_attrs_and_defaults(rng):
    x = np.concatenate([rng.normal(size=10) * 3, [0.0, -0.0, np.inf, -np.inf]]).astype(
        np.float32)
    cases = [(helper.make_node("LeakyRelu", ["x"], ["y"]), "LeakyRelu"),       # alpha 0.01
             (helper.make_node("LeakyRelu", ["x"], ["y"], alpha=1.7), "LeakyRelu"),
             (helper.make_node("Selu", ["x"], ["y"]), "Selu"),
             (helper.make_node("Selu", ["x"], ["y"], alpha=2.0, gamma=0.5), "Expm1"),
             (helper.make_node("Softsign", ["x"], ["y"]), "Softsign")]
    for node, op in cases:
        got, want, ops = _run_both(node, {"x": x[:12]}, np.float32, 17)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-7, err_msg=str(node))
        assert op in ops
    for approximate in ("none", "tanh"):
        node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
        got, want, _ = _run_both(node, {"x": x}, np.float32, 20)
        # x * (1 + erf(x / sqrt 2)) / 2 cancels for x << 0: one ulp of erf near -1 (6e-8),
        # times |x| / 2, is the absolute error a correctly rounded erf would leave too
        largest = np.abs(x[np.isfinite(x)]).max()
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=4 * 6e-8 * largest)
    with pytest.raises(OnnxImportError, match="approximate must be 'none' or 'tanh'"):
        _run_both(helper.make_node("Gelu", ["x"], ["y"], name="g1", approximate="fast"),
                  {"x": x}, np.float32, 20)


def test_is_inf_flags():
    x = np.array([1.0, np.inf, -np.inf, np.nan, -2.0], np.float32)
    for pos in (0, 1):
        for neg in (0, 1):
            node = helper.make_node("IsInf", ["x"], ["y"], detect_positive=pos,
                                    detect_negative=neg)
            got, want, _ = _run_both(node, {"x": x}, np.bool_, 20)
            np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")      # 0 / 0 at size 1
def test_window_functions_with_a_fed_size_and_output_types():
    for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
        for periodic, elem, np_dt in ((0, TensorProto.FLOAT, np.float32),
                                      (1, TensorProto.DOUBLE, np.float64)):
            node = helper.make_node(op, ["size"], ["w"], periodic=periodic, output_datatype=elem)
            graph = helper.make_graph(
                [node], "g", [helper.make_tensor_value_info("size", TensorProto.INT64, [])],
                [helper.make_tensor_value_info("w", elem, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
            imported = import_graph(model, "window.onnx")
            with fl.Session(graph=imported.graph) as sess:      # one compile, any size
                for size in (1, 2, 7, 64):
                    feed = np.array(size, np.int64)
                    (got,) = sess.run(list(imported.outputs.values()),
                                      {imported.inputs["size"]: feed})
                    (want,) = ReferenceEvaluator(model).run(None, {"size": feed})
                    assert got.dtype == np_dt and got.shape == (size,)
                    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7,
                                               err_msg=f"{op} {periodic} {size}")
