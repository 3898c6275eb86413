"""ResizeBilinear and ResizeNearestNeighbor (TensorFlow's raw ops, compiler/ops/image_resize.py):
compiled C against the numpy interpreter for every coordinate rule (legacy, align_corners,
half_pixel_centers), up- and downsampling, a fed batch and a fed size, integer images, and the
errors TensorFlow gives; a few values worked out by hand pin the reference itself. (The
reference was checked against TensorFlow 2.21's kernels to 1e-6 on the same cases.)"""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
RULES = [(False, False), (True, False), (False, True)]


def _resize(op, x, size, ac, hp):
    return A(op, [x, size], {"align_corners": ac, "half_pixel_centers": hp})


def test_resizes_match_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [None, 5, 7, 3], name="x")
    size = fl.placeholder(fl.int32, [2], name="size")
    fetches = {}
    for ac, hp in RULES:
        for op in ("ResizeBilinear", "ResizeNearestNeighbor"):
            for hw in ([3, 11], [10, 14], [1, 1], [5, 7]):
                fetches[f"{op}-{ac}-{hp}-{hw}"] = _resize(op, x, hw, ac, hp)
            fetches[f"{op}-{ac}-{hp}-fed"] = _resize(op, x, size, ac, hp)
    assert fetches["ResizeBilinear-False-False-[3, 11]"].shape == (None, 3, 11, 3)
    assert fetches["ResizeBilinear-False-False-fed"].shape == (None, None, None, 3)
    for batch, hw in ((2, [8, 3]), (1, [13, 29]), (0, [2, 2])):
        xv = rng.standard_normal((batch, 5, 7, 3)).astype(np.float32)
        check_against_interpreter(graph, fetches, {x: xv, size: np.array(hw, np.int32)})


def test_integer_and_double_images(graph, rng):
    u8 = fl.placeholder(fl.uint8, [1, 4, 3, 2], name="u8")
    f64 = fl.placeholder(fl.float64, [2, 3, 3, 1], name="f64")
    fetches = {"bilinear_u8": _resize("ResizeBilinear", u8, [7, 5], False, True),
               "nearest_u8": _resize("ResizeNearestNeighbor", u8, [7, 5], True, False),
               "bilinear_f64": _resize("ResizeBilinear", f64, [2, 5], True, False),
               "nearest_f64": _resize("ResizeNearestNeighbor", f64, [6, 2], False, True)}
    assert fetches["bilinear_u8"].dtype == fl.float32
    assert fetches["nearest_u8"].dtype == fl.uint8
    got = check_against_interpreter(graph, fetches, {
        u8: rng.integers(0, 256, (1, 4, 3, 2)).astype(np.uint8),
        f64: rng.standard_normal((2, 3, 3, 1))})
    assert got["bilinear_u8"].dtype == np.float32 and got["bilinear_f64"].dtype == np.float32


def test_values_worked_out_by_hand(graph):
    x = fl.constant(np.array([0.0, 10.0], np.float32).reshape(1, 1, 2, 1))
    fetches = {"legacy": _resize("ResizeBilinear", x, [1, 4], False, False),
               "corners": _resize("ResizeBilinear", x, [1, 3], True, False),
               "half": _resize("ResizeBilinear", x, [1, 4], False, True),
               "nn_legacy": _resize("ResizeNearestNeighbor", x, [1, 3], False, False),
               "nn_half": _resize("ResizeNearestNeighbor", x, [1, 3], False, True)}
    got = check_against_interpreter(graph, fetches, {})
    # legacy: in = o * 2/4 -> 0, .5, 1, 1.5 (clamped to the last pixel)
    np.testing.assert_allclose(got["legacy"].ravel(), [0, 5, 10, 10])
    np.testing.assert_allclose(got["corners"].ravel(), [0, 5, 10])
    # half pixel: in = (o + .5) / 2 - .5 -> -.25 (the first pixel), .25, .75, 1.25
    np.testing.assert_allclose(got["half"].ravel(), [0, 2.5, 7.5, 10])
    # nearest, legacy: floor(o * 2/3) -> 0, 0, 1; half pixel: floor((o + .5) * 2/3) -> 0, 1, 1
    np.testing.assert_array_equal(got["nn_legacy"].ravel(), [0, 0, 10])
    np.testing.assert_array_equal(got["nn_half"].ravel(), [0, 10, 10])


def test_errors():
    g = fl.Graph()
    with g.as_default():
        x = fl.placeholder(fl.float32, [1, 2, 2, 1])
        with pytest.raises(FlowcError, match="align_corners must be False"):
            _resize("ResizeBilinear", x, [3, 3], True, True)
        with pytest.raises(FlowcError, match="must be positive"):
            _resize("ResizeNearestNeighbor", x, [0, 3], False, False)
        with pytest.raises(FlowcError, match="4-dimensional"):
            _resize("ResizeBilinear", fl.placeholder(fl.float32, [2, 2, 1]), [3, 3], False, False)


def test_fed_size_must_be_positive_in_c(graph):
    x = fl.placeholder(fl.float32, [1, 2, 2, 1], name="x")
    size = fl.placeholder(fl.int32, [2], name="size")
    y = _resize("ResizeBilinear", x, size, False, False)
    with fl.Session() as sess:
        with pytest.raises(FlowcError, match="must be positive"):
            sess.run(y, {x: np.ones((1, 2, 2, 1), np.float32), size: np.array([0, 2], np.int32)})


def test_the_python_api(graph, rng):
    """fl.image.resize is TF2's (half-pixel centers; 3-D images too); resize_bilinear and
    resize_nearest_neighbor are TF1's."""
    x = fl.placeholder(fl.uint8, [None, 4, 6, 2], name="x")
    fetches = {"resize": fl.image.resize(x, [7, 3]),
               "nearest": fl.image.resize(x, [3, 9], method="nearest"),
               "one": fl.image.resize(x[0], [5, 5]),
               "batched": fl.image.resize(x, [5, 5]),
               "v1": fl.image.resize_bilinear(x, [7, 11], align_corners=True),
               "v1_nearest": fl.image.resize_nearest_neighbor(x, [2, 2])}
    assert fetches["resize"].dtype == fl.float32 and fetches["nearest"].dtype == fl.uint8
    assert fetches["one"].shape == (5, 5, 2)
    xv = rng.integers(0, 256, (2, 4, 6, 2)).astype(np.uint8)
    got = check_against_interpreter(graph, fetches, {x: xv})
    np.testing.assert_array_equal(got["one"], got["batched"][0])
    flags = {(n.op, n.attrs["align_corners"], n.attrs["half_pixel_centers"])
             for n in graph.nodes if n.op.startswith("Resize")}
    assert flags == {("ResizeBilinear", False, True), ("ResizeNearestNeighbor", False, True),
                     ("ResizeBilinear", True, False), ("ResizeNearestNeighbor", False, False)}
    with pytest.raises(NotImplementedError, match="bicubic"):
        fl.image.resize(x, [2, 2], method="bicubic")
