"""Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (class axis 1), composed from
OneHot (to pick each target's entry), reductions and LogSoftmax."""
from __future__ import annotations

import numpy as np

import dsl as fl
from dsl.onnx.ops_nn import log_softmax_along
from dsl.onnx.values import binary, index_const, index_scalar, rank_of, scalar, static_shape, unary
from dsl.ops import apply_op


def _all_axes(x):
    return index_const(list(range(len(static_shape(x)))))


def nll_loss(ctx, log_prob, target, weight):
    """ONNX's NegativeLogLikelihoodLoss of ``log_prob`` [N, C, ...] at ``target`` [N, ...]."""
    classes = static_shape(log_prob)[1]
    if classes is None:
        raise ctx.error("the class dim (1) must be known")
    ignore = ctx.attr("ignore_index", None)
    valid = None
    if ignore is not None:
        valid = binary("NotEqual", target, scalar(ignore, target))
        target = fl.where_v2(valid, target, scalar(0, target))
    one_hot = apply_op("OneHot", [target, fl.constant(np.int32(classes)), scalar(1, log_prob),
                                  scalar(0, log_prob)], {"axis": 1})
    picked = apply_op("Sum", [binary("Mul", log_prob, one_hot), index_const([1])])
    if weight is not None:
        w = apply_op("GatherV2", [weight, target, index_scalar(0)])
    else:
        w = apply_op("Fill", [apply_op("Shape", [target], {"out_type": fl.int64}),
                              scalar(1, log_prob)])
    if valid is not None:
        w = binary("Mul", w, fl.cast(valid, w.dtype))
    loss = unary("Neg", binary("Mul", picked, w))
    reduction = ctx.attr("reduction", "mean")
    if reduction == "none":
        return loss
    total = apply_op("Sum", [loss, _all_axes(loss)])
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise ctx.error(f"unknown reduction '{reduction}'")
    return binary("RealDiv", total, apply_op("Sum", [w, _all_axes(w)]))


def lower_nll_loss(ctx):
    return nll_loss(ctx, ctx.input(0), ctx.input(1), ctx.optional_input(2))


def lower_softmax_cross_entropy_loss(ctx):
    scores = ctx.input(0)
    if rank_of(scores, ctx) < 2:
        raise ctx.error("scores must have rank 2 or more")
    log_prob = log_softmax_along(scores, 1)
    loss = nll_loss(ctx, log_prob, ctx.input(1), ctx.optional_input(2))
    return [loss, log_prob] if ctx.output_wanted(1) else loss


LOWERINGS = {
    "NegativeLogLikelihoodLoss": [(12, None, lower_nll_loss)],
    "SoftmaxCrossEntropyLoss": [(12, None, lower_softmax_cross_entropy_loss)],
}
