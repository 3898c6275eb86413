"""_RoiAlign (ONNX's RoiAlign): compiled C against the numpy interpreter for avg and max,
fixed and adaptive sampling, both coordinate rules, boxes partly or wholly outside the image
and smaller than a pixel, float64, and the error of a batch index out of range. (The
interpreter against onnx's reference: tests/dsl/test_onnx_image.py.)"""
import itertools

import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op


def _rois(rng, n, size):
    a = rng.uniform(-3, size + 2, (n, 2))
    b = a + rng.uniform(0, size / 2, (n, 2))
    rois = np.concatenate([a, b], axis=1)
    rois[0] = [0, 0, size - 1, size - 1]
    rois[1] = [2.2, 3.1, 2.3, 3.15]                    # smaller than a pixel
    rois[2] = [size + 5, size + 5, size + 9, size + 9]   # outside
    return rois


def test_roi_align_matches_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3, None, None], name="x")
    rois = fl.placeholder(fl.float32, [None, 4], name="rois")
    idx = fl.placeholder(fl.int64, [None], name="idx")
    xd = fl.placeholder(fl.float64, [2, 2, 7, 5], name="xd")
    fetches = {}
    for mode, ratio, half, scale in itertools.product(["avg", "max"], [0, 2], [True, False],
                                                      [1.0, 0.5]):
        attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": ratio,
                 "spatial_scale": scale, "half_pixel": half}
        key = f"{mode}_{ratio}_{half}_{scale}"
        fetches[key] = A("_RoiAlign", [x, rois, idx], attrs)
        fetches["d" + key] = A("_RoiAlign", [xd, fl.cast(rois, fl.float64), idx], attrs)
    n = 9
    feed = {x: rng.standard_normal((2, 3, 8, 6)).astype(np.float32),
            rois: _rois(rng, n, 7).astype(np.float32), idx: rng.integers(0, 2, n),
            xd: rng.standard_normal((2, 2, 7, 5))}
    got = check_against_interpreter(graph, fetches, feed, rtol=1e-5, atol=1e-6)
    assert got["avg_2_True_1.0"].shape == (n, 3, 3, 4)
    assert not got["avg_2_True_1.0"][2].any()          # a box outside the image reads 0
    empty = {**feed, rois: np.zeros((0, 4), np.float32), idx: np.zeros(0, np.int64)}
    assert check_against_interpreter(graph, {"y": fetches["max_0_False_1.0"]},
                                     empty)["y"].shape == (0, 3, 3, 4)


def test_roi_align_batch_index_out_of_range_is_an_error(graph):
    x = fl.placeholder(fl.float32, [2, 1, 4, 4], name="x")
    idx = fl.placeholder(fl.int32, [2], name="idx")
    y = A("_RoiAlign", [x, fl.constant(np.ones((2, 4), np.float32)), idx])
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as sess:
            with pytest.raises(FlowcError, match=r"batch_indices\[1\] = 2 is not in \[0, 2\)"):
                sess.run(y, {x: np.zeros((2, 1, 4, 4), np.float32),
                             idx: np.array([1, 2], np.int32)})


def test_roi_align_grad_matches_the_interpreter(graph, rng):
    x = fl.placeholder(fl.float32, [None, 3, None, None], name="x")
    rois = fl.placeholder(fl.float32, [None, 4], name="rois")
    idx = fl.placeholder(fl.int32, [None], name="idx")
    dy = fl.placeholder(fl.float32, [None, 3, 3, 4], name="dy")
    fetches = {}
    for mode, ratio, half in itertools.product(["avg", "max"], [0, 2], [True, False]):
        attrs = {"mode": mode, "output_height": 3, "output_width": 4, "sampling_ratio": ratio,
                 "spatial_scale": 0.7, "half_pixel": half}
        fetches[f"{mode}_{ratio}_{half}"] = A("_RoiAlignGrad", [dy, x, rois, idx], attrs)
    n = 7
    feed = {x: rng.standard_normal((2, 3, 8, 6)).astype(np.float32),
            rois: _rois(rng, n, 7).astype(np.float32), idx: rng.integers(0, 2, n).astype(np.int32),
            dy: rng.standard_normal((n, 3, 3, 4)).astype(np.float32)}
    got = check_against_interpreter(graph, fetches, feed, rtol=1e-5, atol=1e-5)
    assert got["avg_2_True"].shape == (2, 3, 8, 6) and got["max_2_True"].any()
