"""``fl.image``: image ops named as in ``tf.image``: ``non_max_suppression``,
``non_max_suppression_with_scores`` and ``non_max_suppression_padded`` (all
NonMaxSuppressionV5)."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from dsl.math_ops import cast
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["non_max_suppression", "non_max_suppression_with_scores",
           "non_max_suppression_padded"]


def _nms(boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma,
         pad, name):
    boxes = convert_to_tensor(boxes)
    t = boxes.dtype

    def as_t(v):
        return cast(convert_to_tensor(v if not isinstance(v, float) else np.asarray(v, t.np)), t)
    return apply_op("NonMaxSuppressionV5",
                    [boxes, cast(convert_to_tensor(scores), t),
                     cast(convert_to_tensor(max_output_size), DType.i32), as_t(iou_threshold),
                     as_t(score_threshold), as_t(soft_nms_sigma)],
                    {"pad_to_max_output_size": pad}, name=name or "NonMaxSuppressionV5")


def non_max_suppression(boxes, scores, max_output_size, iou_threshold=0.5,
                        score_threshold=float("-inf"), name: Optional[str] = None) -> Tensor:
    """Indices (int32) of up to ``max_output_size`` boxes [N, 4] selected greedily by score,
    each overlapping no selected one by more than ``iou_threshold`` (IOU)."""
    return _nms(boxes, scores, max_output_size, iou_threshold, score_threshold, 0.0, False,
                name)[0]


def non_max_suppression_with_scores(boxes, scores, max_output_size, iou_threshold=0.5,
                                    score_threshold=float("-inf"), soft_nms_sigma=0.0,
                                    name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """(selected indices, their scores); ``soft_nms_sigma`` > 0 lowers the scores of
    overlapping boxes (Soft-NMS) instead of dropping them."""
    out = _nms(boxes, scores, max_output_size, iou_threshold, score_threshold, soft_nms_sigma,
               False, name)
    return out[0], out[1]


def non_max_suppression_padded(boxes, scores, max_output_size, iou_threshold=0.5,
                               score_threshold=float("-inf"), pad_to_max_output_size=True,
                               name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """(selected indices padded with 0 to ``max_output_size``, how many are valid)."""
    out = _nms(boxes, scores, max_output_size, iou_threshold, score_threshold, 0.0,
               pad_to_max_output_size, name)
    return out[0], out[2]
