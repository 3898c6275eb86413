"""_GridSample (ONNX's GridSample): compiled C against the numpy interpreter for every mode,
padding mode and align_corners, on 1-, 2- and 3-D images, float32 and float64, with grid
points far outside, NaN and infinite coordinates, dims fed at run time, and the batch
mismatch error. (The interpreter's agreement with onnx's reference:
tests/dsl/test_onnx_image.py.)"""
import itertools

import numpy as np
import pytest

import dsl as fl
from compiler.errors import ShapeError
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op
COMBOS = list(itertools.product(["nearest", "linear", "cubic"], ["zeros", "border", "reflection"],
                                [False, True]))


def _grid(rng, shape, dtype):
    g = rng.uniform(-1.6, 1.6, shape).astype(dtype)
    flat = g.reshape(-1)
    flat[:6] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.5]
    flat[6:12] = [-1, 1, 0, -0.5, 0.25, -0.75]            # corners, centres, ties
    return g


@pytest.mark.parametrize("spatial", [(5, 4), (3, 4, 2), (6,)], ids=["2d", "3d", "1d"])
def test_grid_sample_every_mode_matches_the_interpreter(graph, rng, spatial):
    r = len(spatial)
    pts = 12 if r == 1 else 4
    x = fl.placeholder(fl.float32, [None, 3, *spatial], name="x")
    g = fl.placeholder(fl.float32, [None] + [None] * r + [r], name="g")
    xd = fl.placeholder(fl.float64, [2, 2, *spatial], name="xd")
    gd = fl.placeholder(fl.float64, [2] + [pts - 1] * r + [r], name="gd")
    fetches = {}
    for mode, padding, align in COMBOS:
        attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
        fetches[f"{mode}_{padding}_{align}"] = A("_GridSample", [x, g], attrs)
        fetches[f"d_{mode}_{padding}_{align}"] = A("_GridSample", [xd, gd], attrs)
    feed = {x: rng.standard_normal((2, 3, *spatial)).astype(np.float32),
            g: _grid(rng, (2,) + (pts,) * r + (r,), np.float32),
            xd: rng.standard_normal((2, 2, *spatial)),
            gd: _grid(rng, (2,) + (pts - 1,) * r + (r,), np.float64)}
    got = check_against_interpreter(graph, fetches, feed, rtol=1e-4, atol=1e-5)
    y = got["linear_zeros_False"]
    assert y.shape == (2, 3) + (pts,) * r and np.isfinite(y).all()
    # a NaN coordinate samples 0; the corner -1 with align_corners is the first pixel exactly
    assert (got["cubic_border_True"].reshape(2, 3, -1)[0, :, 0] == 0).all()
    empty = {**feed, x: np.zeros((0, 3, *spatial), np.float32),
             g: np.zeros((0,) + (pts,) * r + (r,), np.float32)}
    got = check_against_interpreter(graph, {"y": fetches["cubic_reflection_True"]}, empty)
    assert got["y"].shape == (0, 3) + (pts,) * r


def test_grid_sample_reads_pixel_centres_and_corners(graph):
    x = fl.constant(np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4))
    corners = np.array([[[[-1, -1], [1, -1], [-1, 1], [1, 1]]]], np.float32)
    aligned = A("_GridSample", [x, fl.constant(corners)], {"align_corners": True})
    edges = A("_GridSample", [x, fl.constant(corners)], {"padding_mode": "border"})
    got = check_against_interpreter(graph, {"a": aligned, "e": edges})
    np.testing.assert_array_equal(got["a"].reshape(-1), [0, 3, 8, 11])
    np.testing.assert_array_equal(got["e"].reshape(-1), [0, 3, 8, 11])


def test_grid_sample_batch_mismatch_and_bad_attrs_are_errors(graph):
    x = fl.placeholder(fl.float32, [None, 1, 2, 2], name="x")
    g = fl.placeholder(fl.float32, [None, 1, 1, 2], name="g")
    y = A("_GridSample", [x, g])
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as sess:
            with pytest.raises(FlowcError, match="batch|does not fit"):
                sess.run(y, {x: np.zeros((2, 1, 2, 2), np.float32),
                             g: np.zeros((3, 1, 1, 2), np.float32)})
    with pytest.raises(ShapeError, match="mode must be one of"):
        A("_GridSample", [x, g], {"mode": "bilinear"})
    with pytest.raises(ShapeError, match="grid's last dim must be 2"):
        A("_GridSample", [x, fl.placeholder(fl.float32, [None, 1, 1, 3])])


@pytest.mark.parametrize("spatial", [(5, 4), (3, 4, 2)], ids=["2d", "3d"])
def test_grid_sample_grad_matches_the_interpreter(graph, rng, spatial):
    r = len(spatial)
    x = fl.placeholder(fl.float32, [None, 2, *spatial], name="x")
    g = fl.placeholder(fl.float32, [None] + [3] * r + [r], name="g")
    dy = fl.placeholder(fl.float32, [None, 2] + [3] * r, name="dy")
    fetches = {}
    for mode, padding, align in COMBOS:
        attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
        dx, dg = A("_GridSampleGrad", [dy, x, g], attrs)
        fetches[f"x_{mode}_{padding}_{align}"] = dx
        fetches[f"g_{mode}_{padding}_{align}"] = dg
    feed = {x: rng.standard_normal((2, 2, *spatial)).astype(np.float32),
            g: _grid(rng, (2,) + (3,) * r + (r,), np.float32),
            dy: rng.standard_normal((2, 2) + (3,) * r).astype(np.float32)}
    got = check_against_interpreter(graph, fetches, feed, rtol=1e-4, atol=1e-5)
    assert got["g_linear_zeros_False"].any() and not got["g_nearest_zeros_True"].any()
    # with border padding every output's gradient lands on the input (but at NaN points)
    nan_point = np.isnan(feed[g]).any(axis=-1)
    total = np.where(nan_point[:, None], 0, feed[dy]).sum()
    np.testing.assert_allclose(got["x_linear_border_True"].sum(), total, rtol=1e-4)
