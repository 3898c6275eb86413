"""Detection ops: NonMaxSuppression as TensorFlow's NonMaxSuppressionV5 (hard NMS) per batch
entry and class, its selections stacked into ONNX's [selected, 3] rows of (batch, class,
box); RoiAlign as flowc's ``_RoiAlign``."""
from __future__ import annotations

import numpy as np

import dsl as fl
from dsl.onnx.values import binary, index_const, index_scalar, rank_of, static_shape
from dsl.ops import apply_op


def _scalar_input(ctx, i, default, dtype):
    """Optional scalar input i (a scalar or one element) as a scalar of ``dtype``."""
    t = ctx.optional_input(i)
    if t is None:
        return fl.constant(np.asarray(default, dtype.np), dtype=dtype)
    return fl.cast(apply_op("Reshape", [t, index_const([])]), dtype)


def _corners(boxes):
    """[..., 4] boxes [x_centre, y_centre, width, height] as [y1, x1, y2, x2]."""
    xc, yc, w, h = apply_op("Unpack", [boxes], {"num": 4, "axis": -1})
    half_w = binary("RealDiv", w, fl.constant(np.asarray(2, boxes.dtype.np)))
    half_h = binary("RealDiv", h, fl.constant(np.asarray(2, boxes.dtype.np)))
    return apply_op("Pack", [[binary("Sub", yc, half_h), binary("Sub", xc, half_w),
                              binary("AddV2", yc, half_h), binary("AddV2", xc, half_w)]],
                    {"axis": -1})


def lower_non_max_suppression(ctx):
    boxes, scores = ctx.input(0), ctx.input(1)
    if rank_of(boxes, ctx) != 3 or rank_of(scores, ctx) != 3:
        raise ctx.error("boxes must be [batch, boxes, 4] and scores [batch, classes, boxes]")
    batches, classes = static_shape(boxes)[0], static_shape(scores)[1]
    if batches is None:
        batches = static_shape(scores)[0]
    if batches is None or classes is None:
        raise ctx.error("needs the batch size and the number of classes known at compile time "
                        "(one NonMaxSuppressionV5 per batch entry and class)")
    if ctx.attr("center_point_box", 0):
        boxes = _corners(boxes)
    t = boxes.dtype
    # ONNX: a negative count is 0; int64 counts saturate to TensorFlow's int32
    count = binary("Maximum", _scalar_input(ctx, 2, 0, fl.int64), index_scalar(0))
    count = fl.cast(count, fl.int32)
    iou = _scalar_input(ctx, 3, 0.0, t)
    # without a score threshold every box is a candidate (but one scored NaN, as in TF)
    score_t = _scalar_input(ctx, 4, -np.inf, t)
    sigma = fl.constant(np.asarray(0, t.np), dtype=t)
    rows = []
    for b in range(batches):
        box_b = apply_op("GatherV2", [boxes, index_scalar(b), index_scalar(0)])
        for c in range(classes):
            score = apply_op("GatherV2", [apply_op("GatherV2", [scores, index_scalar(b),
                                                                index_scalar(0)]),
                                          index_scalar(c), index_scalar(0)])
            selected = apply_op("NonMaxSuppressionV5", [box_b, score, count, iou, score_t,
                                                        sigma])[0]
            picked = fl.cast(selected, fl.int64)
            zeros = binary("Mul", picked, index_scalar(0))
            rows.append(apply_op("Pack", [[binary("AddV2", zeros, index_scalar(b)),
                                           binary("AddV2", zeros, index_scalar(c)), picked]],
                                 {"axis": 1}))
    if not rows:
        return fl.constant(np.zeros((0, 3), np.int64))
    if len(rows) == 1:
        return rows[0]
    return apply_op("ConcatV2", [rows, index_scalar(0)])


def lower_roi_align(ctx):
    x, rois, batch_indices = ctx.input(0), ctx.input(1), ctx.input(2)
    if ctx.opset >= 16:
        transform = ctx.attr("coordinate_transformation_mode", "half_pixel")
    else:                                # opset 10: no attribute, the output_half_pixel rule
        transform = "output_half_pixel"
    if transform not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(f"unknown coordinate_transformation_mode '{transform}'")
    if batch_indices.dtype not in (fl.int32, fl.int64):
        batch_indices = fl.cast(batch_indices, fl.int64)
    return apply_op("_RoiAlign", [x, fl.cast(rois, x.dtype), batch_indices],
                    {"mode": ctx.attr("mode", "avg"),
                     "output_height": int(ctx.attr("output_height", 1)),
                     "output_width": int(ctx.attr("output_width", 1)),
                     "sampling_ratio": int(ctx.attr("sampling_ratio", 0)),
                     "spatial_scale": float(ctx.attr("spatial_scale", 1.0)),
                     "half_pixel": transform == "half_pixel"})


LOWERINGS = {
    "RoiAlign": [(10, None, lower_roi_align)],
    "NonMaxSuppression": [(10, None, lower_non_max_suppression)],
}
