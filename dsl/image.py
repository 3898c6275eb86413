"""``fl.image``: image ops named as in ``tf.image``: ``non_max_suppression``,
``non_max_suppression_with_scores`` and ``non_max_suppression_padded`` (all
NonMaxSuppressionV5); ``resize`` (TF2's, bilinear and nearest: ResizeBilinear and
ResizeNearestNeighbor with half-pixel centers), and TF1's ``resize_bilinear`` and
``resize_nearest_neighbor`` (``align_corners``, ``half_pixel_centers``); TF1's flips, crops,
dtype conversion, brightness and contrast from ``dsl/image_ops.py``; ``random_crop``."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from dsl.image_ops import *  # noqa: F401,F403  (TF1's tf.image functions)
from dsl.image_ops import __all__ as _image_ops_all
from dsl.math_ops import cast
from dsl.ops import apply_op, convert_to_tensor
from dsl.random_ops import random_crop
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["non_max_suppression", "non_max_suppression_with_scores",
           "non_max_suppression_padded", "resize", "resize_bilinear", "resize_nearest_neighbor",
           "ResizeMethod", "random_crop"] + list(_image_ops_all)


class ResizeMethod:
    """The ``method`` names of ``tf.image.resize`` (flowc has the first two)."""
    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


def _resize(op: str, images, size, align_corners: bool, half_pixel_centers: bool, name):
    images = convert_to_tensor(images)
    rank = images.shape.ndims if hasattr(images.shape, "ndims") else len(images.shape)
    if rank not in (3, 4):
        raise ValueError(f"'images' must have 3 or 4 dimensions, got shape {images.shape}")
    batched = images if rank == 4 else apply_op("ExpandDims", [images, np.int32(0)])
    out = apply_op(op, [batched, cast(convert_to_tensor(size), DType.i32)],
                   {"align_corners": align_corners, "half_pixel_centers": half_pixel_centers},
                   name=name or op)
    return out if rank == 4 else apply_op("Squeeze", [out], {"squeeze_dims": [0]})


def resize(images, size, method: str = ResizeMethod.BILINEAR, preserve_aspect_ratio=False,
           antialias=False, name: Optional[str] = None) -> Tensor:
    """``tf.image.resize`` of images [batch, height, width, channels] (or one image, 3-D) to
    ``size`` [new_height, new_width], with half-pixel centers: bilinear (float32 result) or
    nearest (the images' dtype)."""
    if preserve_aspect_ratio or antialias:
        raise NotImplementedError("fl.image.resize: preserve_aspect_ratio and antialias are "
                                  "not supported")
    if method == ResizeMethod.BILINEAR:
        return _resize("ResizeBilinear", images, size, False, True, name)
    if method == ResizeMethod.NEAREST_NEIGHBOR:
        return _resize("ResizeNearestNeighbor", images, size, False, True, name)
    raise NotImplementedError(f"fl.image.resize: method '{method}' is not supported (bilinear "
                              "and nearest are)")


def resize_bilinear(images, size, align_corners=False, name: Optional[str] = None,
                    half_pixel_centers=False) -> Tensor:
    """``tf.compat.v1.image.resize_bilinear`` (the op ResizeBilinear; float32 result)."""
    return _resize("ResizeBilinear", images, size, align_corners, half_pixel_centers, name)


def resize_nearest_neighbor(images, size, align_corners=False, name: Optional[str] = None,
                            half_pixel_centers=False) -> Tensor:
    """``tf.compat.v1.image.resize_nearest_neighbor`` (the op ResizeNearestNeighbor)."""
    return _resize("ResizeNearestNeighbor", images, size, align_corners, half_pixel_centers,
                   name)


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
