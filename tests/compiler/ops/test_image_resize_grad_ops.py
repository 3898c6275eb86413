"""ResizeBilinearGrad and ResizeNearestNeighborGrad (TensorFlow's raw ops,
compiler/ops/image_resize_grad.py): the reference is the adjoint of the forward op
(<resize(x), g> == <x, resize_grad(g)>) and a few values worked out by hand; compiled C
against the interpreter for every coordinate rule, up- and downsampling, float32 and float64
(and integer and half nearest gradients), a fed batch and a fed size; TensorFlow's errors; the
gradient functions of fl.gradients; and a TensorFlow GraphDef holding both ops loads and runs.
Finite differences of the gradients are in tests/dsl/test_gradients.py."""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
RULES = [(False, False), (True, False), (False, True)]


def _flags(ac, hp):
    return {"align_corners": ac, "half_pixel_centers": hp}


def _run(fetches, feed=None):
    with fl.Session(backend="interpreter") as s:
        return s.run(fetches, feed or {})


@pytest.mark.parametrize("ac,hp", RULES)
def test_the_gradients_are_the_adjoints_of_the_resizes(graph, rng, ac, hp):
    x = rng.standard_normal((2, 5, 4, 3))
    for hw in ([7, 9], [3, 2], [1, 1], [5, 4]):
        g = rng.standard_normal((2, *hw, 3))
        y_b = A("ResizeBilinear", [fl.constant(x), hw], _flags(ac, hp))
        dx_b = A("ResizeBilinearGrad", [fl.constant(g.astype(np.float32)), fl.constant(x)],
                 _flags(ac, hp))
        y_n = A("ResizeNearestNeighbor", [fl.constant(x), hw], _flags(ac, hp))
        dx_n = A("ResizeNearestNeighborGrad", [fl.constant(g), [5, 4]], _flags(ac, hp))
        assert dx_b.dtype == fl.float64 and dx_b.shape == (2, 5, 4, 3)
        assert dx_n.shape == (2, 5, 4, 3)
        yb, db, yn, dn = _run([y_b, dx_b, y_n, dx_n])
        g32 = g.astype(np.float32).astype(np.float64)
        np.testing.assert_allclose(np.sum(yb * g32), np.sum(x * db), rtol=1e-5)
        np.testing.assert_allclose(np.sum(yn * g), np.sum(x * dn), rtol=1e-12)


def test_values_worked_out_by_hand(graph):
    g = fl.constant(np.array([1.0, 2.0, 4.0, 8.0], np.float32).reshape(1, 1, 4, 1))
    x = fl.constant(np.zeros((1, 1, 2, 1), np.float32))
    got = _run({"legacy": A("ResizeBilinearGrad", [g, x], _flags(False, False)),
                "half": A("ResizeBilinearGrad", [g, x], _flags(False, True)),
                "nn_legacy": A("ResizeNearestNeighborGrad", [g, [1, 2]], _flags(False, False)),
                "nn_corners": A("ResizeNearestNeighborGrad", [g, [1, 2]], _flags(True, False))})
    # legacy: resized column o reads 0.5 * o -> 0, .5, 1, 1.5 (clamped to the last pixel)
    np.testing.assert_allclose(got["legacy"].ravel(), [1 + 1, 1 + 4 + 8])
    # half pixel: (o + .5) * .5 - .5 -> -.25 (clamped: 0), .25, .75, 1.25 (clamped: 1)
    np.testing.assert_allclose(got["half"].ravel(), [1 + 1.5 + 1, 0.5 + 3 + 8])
    # nearest, legacy: floor(0.5 * o) -> 0, 0, 1, 1; align_corners: round(o / 3) -> 0, 0, 1, 1
    np.testing.assert_allclose(got["nn_legacy"].ravel(), [3, 12])
    np.testing.assert_allclose(got["nn_corners"].ravel(), [3, 12])


def test_gradients_match_the_interpreter_in_c(graph, rng):
    g = fl.placeholder(fl.float32, [None, None, None, 3], name="g")
    x32 = fl.placeholder(fl.float32, [None, 5, 7, 3], name="x32")
    x64 = fl.placeholder(fl.float64, [None, 4, 3, 3], name="x64")
    size = fl.placeholder(fl.int32, [2], name="size")
    g64 = fl.cast(g, fl.float64)
    fetches = {}
    for ac, hp in RULES:
        fetches[f"b32-{ac}-{hp}"] = A("ResizeBilinearGrad", [g, x32], _flags(ac, hp))
        fetches[f"b64-{ac}-{hp}"] = A("ResizeBilinearGrad", [g, x64], _flags(ac, hp))
        for hw in ([5, 7], [2, 11], [1, 1]):
            fetches[f"n32-{ac}-{hp}-{hw}"] = A("ResizeNearestNeighborGrad", [g, hw],
                                               _flags(ac, hp))
        fetches[f"n64-{ac}-{hp}-fed"] = A("ResizeNearestNeighborGrad", [g64, size],
                                          _flags(ac, hp))
    assert fetches["b32-False-False"].shape == (None, 5, 7, 3)
    for batch, ghw, hw in ((2, (8, 3), [13, 4]), (1, (2, 9), [3, 2]), (0, (3, 3), [2, 2])):
        check_against_interpreter(graph, fetches, {
            g: rng.standard_normal((batch, *ghw, 3)).astype(np.float32),
            x32: rng.standard_normal((batch, 5, 7, 3)).astype(np.float32),
            x64: rng.standard_normal((batch, 4, 3, 3)), size: np.array(hw, np.int32)},
            rtol=1e-5, atol=1e-5)


def test_integer_and_half_nearest_gradients(graph, rng):
    u8 = fl.placeholder(fl.uint8, [1, 6, 5, 2], name="u8")
    i32 = fl.placeholder(fl.int32, [2, 4, 4, 1], name="i32")
    f16 = fl.placeholder(fl.float16, [1, 3, 3, 2], name="f16")
    fetches = {"u8": A("ResizeNearestNeighborGrad", [u8, [2, 2]], _flags(False, True)),
               "i32": A("ResizeNearestNeighborGrad", [i32, [3, 2]], _flags(True, False)),
               "f16": A("ResizeNearestNeighborGrad", [f16, [2, 2]], _flags(False, False)),
               "bilinear_f16": A("ResizeBilinearGrad", [fl.cast(f16, fl.float32),
                                                        fl.zeros([1, 2, 2, 2], fl.float16)],
                                 _flags(False, True))}
    got = check_against_interpreter(graph, fetches, {
        u8: rng.integers(0, 256, (1, 6, 5, 2)).astype(np.uint8),       # sums wrap
        i32: rng.integers(-2**31, 2**31 - 1, (2, 4, 4, 1)).astype(np.int32),
        f16: rng.standard_normal((1, 3, 3, 2)).astype(np.float16)})
    assert got["u8"].dtype == np.uint8 and got["f16"].dtype == np.float16
    assert got["bilinear_f16"].dtype == np.float16


def test_errors(graph):
    g = fl.zeros([1, 2, 2, 1])
    with pytest.raises(FlowcError, match="align_corners must be False"):
        A("ResizeBilinearGrad", [g, fl.zeros([1, 3, 3, 1])], _flags(True, True))
    with pytest.raises(FlowcError, match="original_image must be 4-dimensional"):
        A("ResizeBilinearGrad", [g, fl.zeros([3, 3, 1])], _flags(False, False))
    with pytest.raises(FlowcError, match="original dimensions must be positive"):
        A("ResizeBilinearGrad", [g, fl.zeros([1, 0, 3, 1])], _flags(False, False))
    with pytest.raises(FlowcError, match="depth differs"):
        A("ResizeBilinearGrad", [g, fl.zeros([1, 3, 3, 2])], _flags(False, False))
    with pytest.raises(FlowcError, match="positive"):
        A("ResizeNearestNeighborGrad", [g, [0, 3]], _flags(False, False))
    with pytest.raises(FlowcError, match="two elements"):
        A("ResizeNearestNeighborGrad", [g, [1, 2, 3]], _flags(False, False))
    with pytest.raises(FlowcError, match="must be 4-dimensional"):
        A("ResizeNearestNeighborGrad", [fl.zeros([2, 2, 1]), [1, 2]], _flags(False, False))


def test_fed_sizes_are_checked_in_c(graph, rng):
    g = fl.placeholder(fl.float32, [1, 2, 2, 1], name="g")
    size = fl.placeholder(fl.int32, [2], name="size")
    x = fl.placeholder(fl.float32, [1, None, None, 1], name="x")
    nn = A("ResizeNearestNeighborGrad", [g, size], _flags(False, False))
    bl = A("ResizeBilinearGrad", [g, x], _flags(False, False))
    with fl.Session() as s:
        with pytest.raises(FlowcError, match="positive"):
            s.run(nn, {g: np.ones((1, 2, 2, 1), np.float32), size: np.int32([0, 2])})
        with pytest.raises(FlowcError, match="original dimensions must be positive"):
            s.run(bl, {g: np.ones((1, 2, 2, 1), np.float32),
                       x: np.ones((1, 0, 3, 1), np.float32)})


def test_fl_gradients_use_the_gradient_ops(graph, rng):
    x = fl.placeholder(fl.float32, [None, 4, 5, 2], name="x")
    u8 = fl.placeholder(fl.uint8, [1, 4, 5, 2], name="u8")
    y = fl.image.resize_bilinear(x, [7, 3], align_corners=True) \
        + fl.image.resize_nearest_neighbor(x, [7, 3], half_pixel_centers=True)
    loss = fl.reduce_sum(y * y) + fl.reduce_sum(A("ResizeBilinear", [u8, [2, 2]], {}))
    dx, du8 = fl.gradients(loss, [x, u8])
    assert du8 is None
    ops = {n.op for n in graph}
    assert {"ResizeBilinearGrad", "ResizeNearestNeighborGrad"} <= ops
    grad_nodes = [n for n in graph if n.op.endswith("Grad") and n.op.startswith("Resize")]
    assert {n.attrs["align_corners"] for n in grad_nodes if n.op == "ResizeBilinearGrad"} == {True}
    assert {n.attrs["half_pixel_centers"] for n in grad_nodes
            if n.op == "ResizeNearestNeighborGrad"} == {True}
    check_against_interpreter(graph, {"dx": dx}, {
        x: rng.standard_normal((2, 4, 5, 2)).astype(np.float32),
        u8: np.zeros((1, 4, 5, 2), np.uint8)}, rtol=1e-5, atol=1e-5)


def test_a_graphdef_with_both_gradient_ops_loads_and_runs(tmp_path, rng):
    """A GraphDef as TensorFlow writes one (op names, inputs and attrs T, align_corners,
    half_pixel_centers) maps onto the two ops one to one."""
    pytest.importorskip("google.protobuf", reason="GraphDef import needs protobuf")
    from compiler.interop.graphdef import graph_to_graphdef, graphdef_to_graph
    from dsl.tensor import Tensor
    g = fl.Graph()
    with g.as_default():
        grads = fl.placeholder(fl.float32, [1, 6, 4, 2], name="grads")
        image = fl.placeholder(fl.float32, [1, 3, 3, 2], name="image")
        A("ResizeBilinearGrad", [grads, image], _flags(False, True), name="bilinear_grad")
        A("ResizeNearestNeighborGrad", [grads, [3, 3]], _flags(True, False),
          name="nearest_grad")
    gd = graph_to_graphdef(g)
    nodes = {n.name: n for n in gd.node}
    assert nodes["bilinear_grad"].op == "ResizeBilinearGrad"
    assert set(nodes["bilinear_grad"].attr) >= {"T", "align_corners", "half_pixel_centers"}
    assert nodes["nearest_grad"].op == "ResizeNearestNeighborGrad"
    loaded = graphdef_to_graph(gd)
    feed = {Tensor(loaded.output("grads")): rng.standard_normal((1, 6, 4, 2)).astype(np.float32),
            Tensor(loaded.output("image")): np.zeros((1, 3, 3, 2), np.float32)}
    fetches = {k: Tensor(loaded.output(k)) for k in ("bilinear_grad", "nearest_grad")}
    assert loaded.node("nearest_grad").attrs["align_corners"] is True
    check_against_interpreter(loaded, fetches, feed, rtol=1e-6, atol=1e-6)
