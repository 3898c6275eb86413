"""NonMaxSuppressionV5, as TensorFlow defines it: greedy selection of boxes by score, dropping
those that overlap a selected one too much (hard NMS), or lowering their scores by a
Gaussian of the overlap (soft NMS, ``soft_nms_sigma`` > 0).

- ``boxes`` [N, 4] hold any two opposite corners ``[y1, x1, y2, x2]``; the IOU of two boxes
  is 0 when either has no area.
- Candidates are the boxes whose score is above ``score_threshold`` (strictly), taken highest
  score first, equal scores lower index first. Hard NMS drops a candidate whose IOU with a
  selected box is above ``iou_threshold``; soft NMS multiplies its score by
  ``exp(-0.5 * iou^2 / soft_nms_sigma)`` for each selected box and puts it back while the
  score stays above the threshold. At most ``max_output_size`` boxes are selected.
- Outputs: the selected indices (int32) and their (possibly lowered) scores, in selection
  order, and their count; ``pad_to_max_output_size`` pads both to ``max_output_size`` with 0.
- ``iou_threshold`` outside [0, 1], a negative ``soft_nms_sigma`` or ``max_output_size``
  are errors, as in TensorFlow.

The C kernel (``compiler/codegen/c_ops/non_max_suppression.py``) runs the same selection
with a binary heap of candidates.
"""
from __future__ import annotations

import heapq

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import TensorType


def _nms_shape(ctx) -> list:
    boxes, scores = ctx.input_shape(0), ctx.input_shape(1)
    if boxes is not None and (len(boxes) != 2 or boxes[1] not in (None, 4)):
        raise ctx.error(f"boxes must be [num_boxes, 4], got {list(boxes)}")
    if scores is not None and len(scores) != 1:
        raise ctx.error(f"scores must be [num_boxes], got {list(scores)}")
    if boxes is not None and scores is not None and None not in (boxes[0], scores[0]) \
            and boxes[0] != scores[0]:
        raise ctx.error(f"scores has {scores[0]} entries for {boxes[0]} boxes")
    for i, name in ((2, "max_output_size"), (3, "iou_threshold"), (4, "score_threshold"),
                    (5, "soft_nms_sigma")):
        s = ctx.input_shape(i)
        if s is not None and len(s) != 0:
            raise ctx.error(f"{name} must be a scalar, got shape {list(s)}")
    size = None
    if ctx.attrs["pad_to_max_output_size"] and ctx.input_value(2) is not None:
        size = max(int(np.reshape(ctx.input_value(2), -1)[0]), 0)
    t = ctx.input_dtype(0)
    return [TensorType(ctx.output_dtype(0), (size,)), TensorType(t, (size,)),
            TensorType(ctx.output_dtype(2), ())]


def iou(boxes: np.ndarray, i: int, j: int):
    """TensorFlow's IOU of boxes i and j (0 when either has no area), in the boxes' type."""
    a, b = boxes[i], boxes[j]
    ymin_i, ymax_i = min(a[0], a[2]), max(a[0], a[2])
    xmin_i, xmax_i = min(a[1], a[3]), max(a[1], a[3])
    ymin_j, ymax_j = min(b[0], b[2]), max(b[0], b[2])
    xmin_j, xmax_j = min(b[1], b[3]), max(b[1], b[3])
    area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i)
    area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j)
    zero = boxes.dtype.type(0)
    if area_i <= 0 or area_j <= 0:
        return zero
    inter = (max(min(ymax_i, ymax_j) - max(ymin_i, ymin_j), zero)
             * max(min(xmax_i, xmax_j) - max(xmin_i, xmin_j), zero))
    return inter / (area_i + area_j - inter)


def select_boxes(boxes: np.ndarray, scores: np.ndarray, max_output: int, iou_threshold,
                 score_threshold, sigma):
    """(selected indices, their scores): TensorFlow's selection loop."""
    t = scores.dtype.type
    soft = sigma > 0
    scale = t(-0.5) / t(sigma) if soft else t(0)
    heap = [(-scores[i], i, 0) for i in range(len(scores)) if scores[i] > score_threshold]
    heapq.heapify(heap)
    selected, selected_scores = [], []
    while len(selected) < max_output and heap:
        neg, index, begin = heapq.heappop(heap)
        original = score = -neg
        hard = False
        for j in range(len(selected) - 1, begin - 1, -1):
            sim = iou(boxes, index, selected[j])
            weight = np.exp(scale * sim * sim).astype(t)
            score = score * (weight if soft or sim <= iou_threshold else t(0))
            if not soft and sim > iou_threshold:
                hard = True
                break
            if score <= score_threshold:
                break
        if hard:
            continue
        if score == original:
            selected.append(index)
            selected_scores.append(score)
        elif score > score_threshold:
            heapq.heappush(heap, (-score, index, len(selected)))
    return selected, selected_scores


def _scalar(ctx, x, name):
    if np.ndim(x) != 0:
        raise ExecutionError(f"{name} must be a scalar, got shape {list(np.shape(x))}", ctx.node)
    return x[()]


def _nms_ref(ctx, boxes, scores, max_output_size, iou_threshold, score_threshold, sigma):
    max_output = int(_scalar(ctx, max_output_size, "max_output_size"))
    iou_t = _scalar(ctx, iou_threshold, "iou_threshold")
    score_t = _scalar(ctx, score_threshold, "score_threshold")
    sigma = _scalar(ctx, sigma, "soft_nms_sigma")
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ExecutionError(f"boxes must be [num_boxes, 4], got {list(boxes.shape)}", ctx.node)
    if scores.shape != (boxes.shape[0],):
        raise ExecutionError(f"scores has shape {list(scores.shape)} for {boxes.shape[0]} "
                             "boxes", ctx.node)
    if not 0 <= iou_t <= 1:
        raise ExecutionError("iou_threshold must be in [0, 1]", ctx.node)
    if not sigma >= 0:
        raise ExecutionError("soft_nms_sigma must be non-negative", ctx.node)
    if max_output < 0:
        raise ExecutionError("max_output_size must be non-negative", ctx.node)
    selected, chosen = select_boxes(boxes, scores, max_output, iou_t, score_t, sigma)
    count = len(selected)
    if ctx.attrs["pad_to_max_output_size"]:
        selected = selected + [0] * (max_output - count)
        chosen = chosen + [0] * (max_output - count)
    return (np.asarray(selected, np.int32), np.asarray(chosen, scores.dtype),
            np.int32(count))


register_op("NonMaxSuppressionV5",
            inputs=["boxes: T", "scores: T", "max_output_size: i32", "iou_threshold: T",
                    "score_threshold: T", "soft_nms_sigma: T"],
            outputs=["selected_indices: i32", "selected_scores: T", "valid_outputs: i32"],
            attrs=["T: {float}", "pad_to_max_output_size: bool = false"],
            shape=_nms_shape, kernel=_nms_ref, group="other",
            doc="Greedy non-maximum suppression of boxes [N, 4] by scores [N] (hard, or soft "
                "with soft_nms_sigma > 0): selected indices, their scores, their count.")
