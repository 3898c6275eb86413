"""NonMaxSuppressionV5 (TensorFlow's): compiled C against the numpy interpreter, hard NMS
against a brute-force oracle, soft NMS, padding, thresholds, ties and flipped corners, and
the run-time errors of out-of-range thresholds."""
import numpy as np
import pytest

import dsl as fl
from oracle import check_against_interpreter
from runtime.errors import FlowcError

A = fl.apply_op


def _brute_force_nms(boxes, scores, k, iou_t, score_t):
    def iou(a, b):
        ya, xa = sorted(a[::2]), sorted(a[1::2])
        yb, xb = sorted(b[::2]), sorted(b[1::2])
        area_a, area_b = (ya[1] - ya[0]) * (xa[1] - xa[0]), (yb[1] - yb[0]) * (xb[1] - xb[0])
        if area_a <= 0 or area_b <= 0:
            return 0.0
        inter = max(min(ya[1], yb[1]) - max(ya[0], yb[0]), 0) * \
            max(min(xa[1], xb[1]) - max(xa[0], xb[0]), 0)
        return inter / (area_a + area_b - inter)
    order = sorted((i for i in range(len(scores)) if scores[i] > score_t),
                   key=lambda i: (-scores[i], i))
    chosen = []
    for i in order:
        if len(chosen) < k and all(iou(boxes[i], boxes[j]) <= iou_t for j in chosen):
            chosen.append(i)
    return chosen


def _nms(boxes, scores, k, iou, score, sigma, pad=False):
    return A("NonMaxSuppressionV5", [boxes, scores, k, iou, score, sigma],
             {"pad_to_max_output_size": pad})


def test_nms_hard_soft_and_padded_match_the_interpreter(graph, rng):
    boxes = fl.placeholder(fl.float32, [None, 4], name="boxes")
    scores = fl.placeholder(fl.float32, [None], name="scores")
    k = fl.placeholder(fl.int32, [], name="k")
    iou = fl.placeholder(fl.float32, [], name="iou")
    thr = fl.placeholder(fl.float32, [], name="thr")
    f = fl.constant
    hard = _nms(boxes, scores, k, iou, thr, f(np.float32(0)))
    soft = _nms(boxes, scores, k, iou, thr, f(np.float32(0.3)))
    padded = _nms(boxes, scores, k, iou, thr, f(np.float32(0)), pad=True)
    fetches = {"hi": hard[0], "hs": hard[1], "hn": hard[2], "si": soft[0], "ss": soft[1],
               "sn": soft[2], "pi": padded[0], "ps": padded[1], "pn": padded[2]}
    for n, kv, iou_v, thr_v in ((40, 12, 0.4, 0.1), (25, 100, 0.0, -np.inf), (0, 5, 0.5, 0.0),
                                (30, 0, 0.6, 0.0), (30, 30, 1.0, 0.2)):
        corner = rng.uniform(0, 10, (n, 2))
        size = rng.uniform(0, 4, (n, 2))
        bv = np.concatenate([corner, corner + size], axis=1).astype(np.float32)
        bv[::3] = bv[::3][:, [2, 3, 0, 1]]                 # flipped corners
        sv = rng.integers(0, 8, n).astype(np.float32) / 8      # many ties
        feed = {boxes: bv, scores: sv, k: np.int32(kv), iou: np.float32(iou_v),
                thr: np.float32(thr_v)}
        got = check_against_interpreter(graph, fetches, feed)
        want = _brute_force_nms(bv, sv, kv, iou_v, thr_v)
        np.testing.assert_array_equal(got["hi"], want)
        assert got["hn"] == len(want) and got["pi"].shape == (kv,)
        np.testing.assert_array_equal(got["pi"][:len(want)], want)
        assert not got["pi"][len(want):].any()
        np.testing.assert_array_equal(got["hs"], sv[want])
        assert got["sn"] >= got["hn"]                   # soft NMS drops fewer boxes


def test_nms_refuses_bad_thresholds_and_counts(graph):
    boxes = fl.constant(np.array([[0, 0, 1, 1]], np.float32))
    scores = fl.constant(np.array([0.5], np.float32))
    k = fl.placeholder(fl.int32, [], name="k")
    iou = fl.placeholder(fl.float32, [], name="iou")
    sigma = fl.placeholder(fl.float32, [], name="sigma")
    y = _nms(boxes, scores, k, iou, fl.constant(np.float32(0)), sigma)[0]
    ok = {k: np.int32(1), iou: np.float32(0.5), sigma: np.float32(0)}
    for backend in ("interpreter", "c"):
        with fl.Session(graph=graph, backend=backend) as sess:
            assert sess.run(y, ok).tolist() == [0]
            for feed, message in (({iou: np.float32(1.5)}, "iou_threshold must be in"),
                                  ({sigma: np.float32(-1)}, "soft_nms_sigma must be"),
                                  ({k: np.int32(-1)}, "max_output_size must be")):
                with pytest.raises(FlowcError, match=message):
                    sess.run(y, {**ok, **feed})


def test_tf_image_api(graph):
    boxes = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11]],
                     np.float32)
    scores = np.array([0.9, 0.95, 0.8, 0.3], np.float32)
    picked = fl.image.non_max_suppression(boxes, scores, 3, iou_threshold=0.5)
    soft_i, soft_s = fl.image.non_max_suppression_with_scores(boxes, scores, 4,
                                                              soft_nms_sigma=0.5)
    padded, valid = fl.image.non_max_suppression_padded(boxes, scores, 5, score_threshold=0.5)
    got = check_against_interpreter(graph, {"p": picked, "si": soft_i, "ss": soft_s,
                                            "pad": padded, "v": valid})
    assert got["p"].tolist() == [1, 3]
    assert got["pad"].tolist() == [1, 0, 0, 0, 0] and got["v"] == 1
    assert got["si"][0] == 1 and got["ss"][0] == np.float32(0.95) and len(got["si"]) == 4
    assert (np.diff(got["ss"]) <= 0).all()
