"""ONNX's image and detection ops through flowc (compiled C) against onnx's reference
evaluator on random inputs: GridSample (every mode, padding and align_corners; 2-D and 3-D),
AffineGrid, Col2Im (2-D and 3-D, strides, dilations, pads), MaxUnpool of MaxPool's indices
(overlapping windows, several images and channels), RoiAlign, DeformConv (groups, offset
groups, strides, dilations, pads, mask, bias) and NonMaxSuppression (batches, classes, box
formats)."""
import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from onnx_compare import assert_close, node_model, run_both  # noqa: E402


@pytest.mark.parametrize("spatial", [(4, 5), (3, 4, 2)], ids=["2d", "3d"])
def test_grid_sample_matches_the_reference(spatial, rng):
    r = len(spatial)
    x = rng.standard_normal((2, 2, *spatial)).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (2,) + (3,) * r + (r,)).astype(np.float32)
    modes = ["nearest", "linear"] + (["cubic"] if r == 2 else [])      # cubic: 4-D only
    nodes, outs = [], []
    for k, (mode, padding, align) in enumerate(itertools.product(
            modes, ["zeros", "border", "reflection"], [0, 1])):
        nodes.append(helper.make_node("GridSample", ["x", "g"], [f"y{k}"], mode=mode,
                                      padding_mode=padding, align_corners=align))
        outs.append(f"y{k}")
    feeds = {"x": x, "g": grid}
    got, want = run_both(node_model(nodes, feeds, outs, 22), feeds)
    assert_close(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 2, 3, 2, 4]])
def test_affine_grid_matches_the_reference(size, rng):
    r = len(size) - 2
    theta = rng.standard_normal((size[0], r, r + 1)).astype(np.float32)
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], [f"g{a}"], align_corners=a)
             for a in (0, 1)]
    feeds = {"theta": theta}
    got, want = run_both(node_model(nodes, feeds, ["g0", "g1"], 20,
                                    initializers={"size": np.array(size, np.int64)}), feeds)
    assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [
    dict(image=[5, 6], block=[2, 3], attrs={}),
    dict(image=[7, 6], block=[3, 2], attrs=dict(strides=[2, 1], dilations=[1, 2],
                                                  pads=[1, 0, 2, 1])),
    dict(image=[4, 3, 5], block=[2, 1, 3], attrs=dict(strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 2])),
])
def test_col2im_matches_the_reference(case, rng):
    n = len(case["image"])
    a = case["attrs"]
    strides, dil = a.get("strides", [1] * n), a.get("dilations", [1] * n)
    pads = a.get("pads", [0] * 2 * n)
    blocks = [(i + pads[d] + pads[n + d] - (dil[d] * (b - 1) + 1)) // strides[d] + 1
              for d, (i, b) in enumerate(zip(case["image"], case["block"]))]
    x = rng.standard_normal((2, 3 * int(np.prod(case["block"])),
                             int(np.prod(blocks)))).astype(np.float32)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **a)
    feeds = {"x": x}
    inits = {"image": np.array(case["image"], np.int64), "block": np.array(case["block"],
                                                                           np.int64)}
    got, want = run_both(node_model(node, feeds, ["y"], 18, initializers=inits), feeds)
    assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("output_shape", [None, [2, 3, 8, 10]])
def test_max_unpool_of_max_pool_indices_matches_the_reference(output_shape, rng):
    # overlapping 3x3 windows whose unpooled shape is the input's (the indices' space)
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    pool = dict(kernel_shape=[3, 3], strides=[2, 2])
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], **pool),
             helper.make_node("MaxUnpool", ["p", "i"] + (["s"] if output_shape else []), ["y"],
                              **pool)]
    inits = {"s": np.array(output_shape, np.int64)} if output_shape else {}
    feeds = {"x": x}
    got, want = run_both(node_model(nodes, feeds, ["y"], 22, initializers=inits), feeds)
    assert_close(got, want)
    assert np.count_nonzero(got[0]) > 0


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
def test_roi_align_matches_the_reference(mode, transform, rng):
    x = rng.standard_normal((2, 3, 9, 7)).astype(np.float32)
    corner = rng.uniform(-2, 8, (6, 2))
    rois = np.concatenate([corner, corner + rng.uniform(0.2, 6, (6, 2))], 1).astype(np.float32)
    idx = rng.integers(0, 2, 6).astype(np.int64)
    nodes = [helper.make_node("RoiAlign", ["x", "rois", "idx"], [f"y{k}"], mode=mode,
                              coordinate_transformation_mode=transform, output_height=3,
                              output_width=2, sampling_ratio=ratio, spatial_scale=0.8)
             for k, ratio in enumerate([0, 2])]
    feeds = {"x": x, "rois": rois, "idx": idx}
    got, want = run_both(node_model(nodes, feeds, ["y0", "y1"], 22), feeds)
    assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [
    dict(c=4, oc=6, group=2, og=2, k=(2, 3), attrs=dict(strides=[2, 1], pads=[1, 1, 0, 1]),
         mask=True, bias=True),
    dict(c=2, oc=3, group=1, og=1, k=(3, 3), attrs=dict(dilations=[2, 1], pads=[2, 1, 2, 1]),
         mask=False, bias=False),
])
def test_deform_conv_matches_the_reference(case, rng):
    x = rng.standard_normal((2, case["c"], 6, 5)).astype(np.float32)
    kh, kw = case["k"]
    w = rng.standard_normal((case["oc"], case["c"] // case["group"], kh, kw)).astype(np.float32)
    a = case["attrs"]
    s, d, p = a.get("strides", [1, 1]), a.get("dilations", [1, 1]), a.get("pads", [0] * 4)
    oh = (6 + p[0] + p[2] - (d[0] * (kh - 1) + 1)) // s[0] + 1
    ow = (5 + p[1] + p[3] - (d[1] * (kw - 1) + 1)) // s[1] + 1
    offset = rng.uniform(-1.5, 1.5, (2, case["og"] * kh * kw * 2, oh, ow)).astype(np.float32)
    feeds = {"x": x, "w": w, "offset": offset}
    inputs = ["x", "w", "offset"]
    if case["bias"]:
        feeds["b"] = rng.standard_normal(case["oc"]).astype(np.float32)
    inputs.append("b" if case["bias"] else "")
    if case["mask"]:
        feeds["m"] = rng.uniform(0, 1, (2, case["og"] * kh * kw, oh, ow)).astype(np.float32)
        inputs.append("m")
    node = helper.make_node("DeformConv", inputs, ["y"], group=case["group"],
                            offset_group=case["og"], kernel_shape=[kh, kw], **a)
    got, want = run_both(node_model(node, feeds, ["y"], 22), feeds)
    assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("with_threshold", [True, False])
def test_non_max_suppression_matches_the_reference(center, with_threshold, rng):
    corner = rng.uniform(0, 10, (2, 30, 2))
    size = rng.uniform(0.5, 4, (2, 30, 2))
    boxes = (np.concatenate([corner + size / 2, size], -1) if center else
             np.concatenate([corner, corner + size], -1)).astype(np.float32)
    scores = (rng.integers(0, 10, (2, 3, 30)) / 10).astype(np.float32)
    feeds = {"boxes": boxes, "scores": scores}
    inits = {"k": np.array([5], np.int64), "iou": np.array([0.3], np.float32)}
    inputs = ["boxes", "scores", "k", "iou"]
    if with_threshold:
        inits["thr"] = np.array([0.35], np.float32)
        inputs.append("thr")
    node = helper.make_node("NonMaxSuppression", inputs, ["sel"], center_point_box=center)
    got, want = run_both(node_model(node, feeds, ["sel"], 11, initializers=inits), feeds)
    assert_close(got, want)
    assert len(got[0]) > 6
