"""ONNX linear quantization (``dsl/onnx/ops_quant.py``) compiled to C against onnx's reference
evaluator: per-tensor, per-axis and blocked scales (also with dims known only at run time),
ties rounding half to even, saturation, int8/uint8/int16 zero points, and the integer
products with per-channel zero points and scales."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from dsl.onnx import OnnxImportError  # noqa: E402
from onnx_compare import assert_close, node_model, run_both, run_flowc  # noqa: E402


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.int16])
@pytest.mark.parametrize("mode", ["tensor", "axis", "blocked", "blocked_dynamic"])
def test_quantize_and_dequantize_round_trip_like_the_reference(zp_dtype, mode, rng):
    info = np.iinfo(zp_dtype)
    x = rng.uniform(-300, 300, (3, 5, 4)).astype(np.float32)
    x[0, 0, :] = [2.5, 3.5, -2.5, -0.5]          # ties round to even after x / 1
    x[0, 1, :] = [1e9, -1e9, 0.0, np.float32(info.max) * 4]   # saturate
    attrs, shapes = {}, None
    if mode == "tensor":
        scale = np.array(1.0, np.float32)
        zp = np.array(info.min // 2 + 3, zp_dtype)
    elif mode == "axis":
        attrs = dict(axis=-2)
        scale = rng.uniform(0.5, 3, 5).astype(np.float32)
        scale[0] = 1.0
        zp = rng.integers(info.min // 2, info.max // 2, 5).astype(zp_dtype)
    else:
        attrs = dict(axis=1, block_size=2)       # 5 entries: blocks of 2, 2 and 1
        scale = rng.uniform(0.5, 3, (3, 3, 4)).astype(np.float32)
        scale[0, 0] = 1.0
        zp = rng.integers(info.min // 2, info.max // 2, (3, 3, 4)).astype(zp_dtype)
        if mode == "blocked_dynamic":
            shapes = {"x": [3, "n", 4], "q": [3, "n", 4]}
    feeds = {"x": x, "s": scale, "z": zp}
    q_node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], **attrs)
    got, want = run_both(node_model(q_node, feeds, ["q"], 21, input_shapes=shapes), feeds)
    assert_close(got, want)
    assert got[0].dtype == zp_dtype and {info.min, info.max} <= set(got[0].reshape(-1).tolist())
    q = want[0]
    d_node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **attrs)
    feeds = {"q": q, "s": scale, "z": zp}
    got, want = run_both(node_model(d_node, feeds, ["y"], 21, input_shapes=shapes), feeds)
    assert_close(got, want, rtol=1e-6, atol=0)


def test_quantize_without_zero_point_uses_output_dtype_or_uint8(rng):
    x = rng.uniform(-100, 400, (4, 6)).astype(np.float32)
    s = np.array(2.0, np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["a"]),
             helper.make_node("QuantizeLinear", ["x", "s"], ["b"], output_dtype=3)]
    feeds = {"x": x, "s": s}
    got, want = run_both(node_model(nodes, feeds, ["a", "b"], 21), feeds)
    assert_close(got, want)
    assert got[0].dtype == np.uint8 and got[1].dtype == np.int8


def test_dequantize_int32_in_double_precision_and_float64_scale(rng):
    x = np.array([2**30 + 1, -2**31, 2**31 - 1, 7], np.int32)
    z = np.array(-5, np.int32)
    s = np.array(1e-3, np.float64)
    feeds = {"x": x, "s": s, "z": z}
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])
    got, want = run_both(node_model(node, feeds, ["y"], 21), feeds)
    assert got[0].dtype == np.float64
    # exact (x - zero_point) * scale: the reference casts x to float32 first (2**30 + 1 -> 2**30)
    np.testing.assert_array_equal(got[0], (x.astype(np.float64) + 5) * 1e-3)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-8)


def test_a_blocked_scale_with_the_wrong_number_of_blocks_is_refused(rng):
    feeds = {"x": np.zeros((2, 6), np.float32), "s": np.ones((2, 2), np.float32)}
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=2)
    with pytest.raises(OnnxImportError, match="need 3 scales, got 2"):
        run_flowc(node_model(node, feeds, ["q"], 21), feeds)


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 0)])
def test_dynamic_quantize_linear(shape, rng):
    x = rng.uniform(-3, 5, shape).astype(np.float32)
    if x.size:
        x.reshape(-1)[0] = 0.5 * 8 / 255      # a tie after scaling
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    feeds = {"x": x}
    model = node_model(node, feeds, ["y", "s", "z"], 11)
    if not x.size:                   # the reference can't reduce nothing; the range is [0, 0]
        want = [np.zeros(shape, np.uint8), np.float32(1 / 255), np.uint8(0)]
        assert_close(run_flowc(model, feeds), want, rtol=1e-7, atol=0)
        return
    got, want = run_both(model, feeds)
    assert_close(got, want, rtol=1e-7, atol=0)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_matmul_integer_and_qlinear_matmul_with_per_column_b(dtype, rng):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max + 1, (2, 3, 5), dtype=dtype)
    b = rng.integers(info.min, info.max + 1, (5, 4), dtype=dtype)
    feeds = {"a": a, "b": b, "az": np.array(3, dtype), "bz": np.arange(4).astype(dtype),
             "as": np.array(0.02, np.float32), "bs": rng.uniform(0.01, 0.05, 4).astype(np.float32),
             "ys": np.array(0.3, np.float32), "yz": np.array(info.min + 100, dtype)}
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["m"]),
             helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                              ["q"])]
    got, want = run_both(node_model(nodes, feeds, ["m", "q"], 21), feeds)
    assert_close(got, want)
    assert got[0].dtype == np.int32 and got[1].dtype == dtype


@pytest.mark.parametrize("group", [1, 2])
def test_conv_integer_and_qlinear_conv_with_per_channel_weights(group, rng):
    x = rng.integers(0, 256, (2, 4, 6, 5), dtype=np.uint8)
    w = rng.integers(0, 256, (6, 4 // group, 3, 2), dtype=np.uint8)
    attrs = dict(pads=[1, 0, 1, 1], strides=[2, 1], group=group)
    feeds = {"x": x, "w": w, "xz": np.array(128, np.uint8),
             "wz": rng.integers(100, 150, 6, dtype=np.uint8),
             "xs": np.array(0.01, np.float32),
             "ws": rng.uniform(0.001, 0.004, 6).astype(np.float32),
             "ys": np.array(0.5, np.float32), "yz": np.array(120, np.uint8),
             "bias": rng.integers(-3000, 3000, 6).astype(np.int32)}
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["c"], **attrs),
             helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"],
                              ["q"], **attrs)]
    got, want = run_both(node_model(nodes, feeds, ["c", "q"], 21), feeds)
    assert_close(got, want)
    assert 0 < np.count_nonzero(got[1]) and np.count_nonzero(got[1] == 255) < got[1].size
