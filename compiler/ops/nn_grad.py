"""Training ops: the losses (softmax cross-entropy, sparse and dense; L2Loss), the elementwise
gradient ops of the activations and unary math, BiasAddGrad, UnsortedSegmentSum,
BroadcastGradientArgs and MaxPoolGradGrad. Their C lowering is
``compiler/codegen/c_ops/nn_grad.py``.

Semantics follow TensorFlow's CPU kernels:
- The elementwise gradient ops take two tensors of one shape (no broadcasting), with TF's
  formulas: ReluGrad ``g * (f > 0)``, Relu6Grad ``g * (0 < f < 6)``, EluGrad
  ``y < 0 ? g * (y + 1) : g``, SoftplusGrad ``g / (1 + exp(-f))``, SigmoidGrad
  ``dy * y * (1 - y)``, TanhGrad ``dy * (1 - y * y)``, RsqrtGrad ``-0.5 * dy * y^3``,
  SqrtGrad ``0.5 * dy / y``, ReciprocalGrad ``-dy * y * y``.
- (Sparse)SoftmaxCrossEntropyWithLogits work on rank-2 ``[batch, classes]`` features (the
  sparse labels are ``[batch]``); loss = sum(labels * (log(sum(exp(shifted))) - shifted)),
  backprop = softmax - labels. A sparse label outside ``[0, classes)`` is an error, as on
  TF's CPU. Dense features and labels broadcast (numpy rules) to a 2-D shape, as in TF.
- L2Loss is ``sum(t * t) / 2``; float sums accumulate in double.
- UnsortedSegmentSum drops negative segment ids and fails on ids ``>= num_segments``.
- BroadcastGradientArgs gives, per input, the output axes along which its (left-padded)
  shape has a 1, i.e. the axes to sum its gradient over (TF's BCast grad_reduce_idx).
- MaxPoolGradGrad (the gradient of MaxPoolGrad w.r.t. its grad input) gives, per MaxPool
  output element, ``grad`` at the element of ``orig_input`` that MaxPool chose: the first
  maximum of the window, the element MaxPoolGrad routes to, so the two ops are exact adjoints.
  (TF's CPU kernel picks the first element equal to ``orig_output``, the same element whenever
  orig_output is MaxPool(orig_input).)
"""
from __future__ import annotations

from typing import Callable, List

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import broadcast_shapes, merge_shapes, shape_str
from compiler.ops import conv
from compiler.ir.op_registry import register_op


# --- elementwise gradient ops ----------------------------------------------------------------
def _same_shape2(ctx) -> list:
    try:
        return [merge_shapes(ctx.input_shape(0), ctx.input_shape(1))]
    except ValueError:
        raise ctx.error(f"inputs must have the same shape, got {shape_str(ctx.input_shape(0))} "
                        f"and {shape_str(ctx.input_shape(1))}") from None


def _grad_ref(np_fn: Callable) -> Callable:
    def kernel(ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.shape != b.shape:
            raise ExecutionError(f"inputs must have the same shape, got {list(a.shape)} and "
                                 f"{list(b.shape)}", ctx.node)
        return np.asarray(np_fn(a, b)).astype(a.dtype)
    return kernel


def _grad_op(name: str, args: List[str], np_fn: Callable, types: str = "float",
             doc: str = "") -> None:
    """Register an elementwise two-input gradient op (inputs of one shape)."""
    register_op(name, inputs=[f"{a}: T" for a in args], outputs=[
                    "backprops: T" if args[0] == "gradients" else "z: T"],
                attrs=[f"T: {{{types}}}"], shape=_same_shape2, kernel=_grad_ref(np_fn),
                group="elementwise", doc=doc, data_error=None)


def _np_softplus_grad(g, f):
    one = f.dtype.type(1)
    return g / (np.exp(-f) + one)


_grad_op("ReluGrad", ["gradients", "features"], lambda g, f: np.where(f > 0, g, 0),
         types="numeric", doc="gradients where features > 0, else 0.")
_grad_op("Relu6Grad", ["gradients", "features"], lambda g, f: np.where((f > 0) & (f < 6), g, 0),
         types="numeric", doc="gradients where 0 < features < 6, else 0.")
_grad_op("EluGrad", ["gradients", "outputs"],
         lambda g, y: np.where(y < 0, g * (y + y.dtype.type(1)), g),
         doc="gradients * (outputs + 1) where outputs < 0, else gradients.")
_grad_op("SoftplusGrad", ["gradients", "features"], _np_softplus_grad,
         doc="gradients / (1 + exp(-features)).")
_grad_op("SigmoidGrad", ["y", "dy"], lambda y, dy: dy * y * (y.dtype.type(1) - y),
         doc="dy * y * (1 - y).")
_grad_op("TanhGrad", ["y", "dy"], lambda y, dy: dy * (y.dtype.type(1) - y * y),
         doc="dy * (1 - y * y).")
_grad_op("RsqrtGrad", ["y", "dy"], lambda y, dy: y.dtype.type(-0.5) * (dy * y) * (y * y),
         doc="-0.5 * dy * y ** 3.")
_grad_op("SqrtGrad", ["y", "dy"], lambda y, dy: y.dtype.type(0.5) * dy / y,
         doc="0.5 * dy / y.")
_grad_op("ReciprocalGrad", ["y", "dy"], lambda y, dy: -dy * y * y,
         doc="-dy * y * y.")


# --- L2Loss ----------------------------------------------------------------------------------
def _l2_loss_ref(ctx, t: np.ndarray) -> np.ndarray:
    return np.asarray(np.sum(np.square(t.astype(np.float64))) * 0.5).astype(t.dtype)


register_op("L2Loss", inputs=["t: T"], outputs=["output: T"], attrs=["T: {float}"],
            shape=lambda ctx: [()], kernel=_l2_loss_ref, group="reduce",
            doc="sum(t * t) / 2, accumulated in double.")


# --- softmax cross-entropy -------------------------------------------------------------------
def _xent_shape(ctx, sparse: bool) -> list:
    f, lab = ctx.input_shape(0), ctx.input_shape(1)
    if sparse:
        if f is not None and len(f) != 2:
            raise ctx.error(f"features must be 2-D [batch, classes], got shape {shape_str(f)}")
        if lab is not None and len(lab) != 1:
            raise ctx.error(f"labels must be 1-D [batch], got shape {shape_str(lab)}")
        f, lab = f or (None, None), lab or (None,)
        try:
            batch = merge_shapes((f[0],), (lab[0],))[0]
        except ValueError:
            raise ctx.error(f"features {shape_str(f)} and labels {shape_str(lab)} must have "
                            "the same batch size") from None
        return [(batch,), (batch, f[1])]
    try:
        out = broadcast_shapes([f, lab])
    except ValueError:
        raise ctx.error(f"logits and labels must be broadcastable: logits {shape_str(f)}, "
                        f"labels {shape_str(lab)}") from None
    if out is None:
        if any(s is not None and len(s) > 2 for s in (f, lab)):
            raise ctx.error(_NOT_2D)
        return [(None,), (None, None)]
    if len(out) != 2:
        raise ctx.error(_NOT_2D)
    return [(out[0],), out]


_NOT_2D = "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional"


def _log_softmax_rows(x: np.ndarray):
    """(log-softmax, softmax) over rows of ``x``; exp-sums in float64 as in the C kernel."""
    m = np.max(x, axis=1, keepdims=True, initial=-np.inf).astype(x.dtype)
    shifted = x - m
    e = np.exp(shifted)
    s = np.sum(e, axis=1, keepdims=True, dtype=np.float64)
    return shifted, np.log(s).astype(x.dtype), e / s.astype(x.dtype)


def _xent_ref(ctx, features: np.ndarray, labels: np.ndarray):
    try:
        shape = np.broadcast_shapes(features.shape, labels.shape)
    except ValueError:
        raise ExecutionError(f"logits and labels must be broadcastable: logits "
                             f"{list(features.shape)}, labels {list(labels.shape)}",
                             ctx.node) from None
    if len(shape) != 2:
        raise ExecutionError(_NOT_2D, ctx.node)
    features, labels = np.broadcast_to(features, shape), np.broadcast_to(labels, shape)
    shifted, logs, sm = _log_softmax_rows(features)
    loss = np.sum(labels.astype(np.float64) * (logs - shifted), axis=1)
    return loss.astype(features.dtype), (sm - labels).astype(features.dtype)


def _sparse_xent_ref(ctx, features: np.ndarray, labels: np.ndarray):
    batch, classes = features.shape
    if labels.shape != (batch,):
        raise ExecutionError(f"labels {list(labels.shape)} must be [batch] for features "
                             f"{list(features.shape)}", ctx.node)
    bad = (labels < 0) | (labels >= classes)
    if np.any(bad):
        v = labels[np.argmax(bad)]
        raise ExecutionError(f"Received a label value of {v} which is outside the valid range "
                             f"of [0, {classes})", ctx.node)
    shifted, logs, sm = _log_softmax_rows(features)
    rows = np.arange(batch)
    loss = logs[:, 0] - shifted[rows, labels]
    back = sm.copy()
    back[rows, labels] -= features.dtype.type(1)
    return loss.astype(features.dtype), back


register_op("SoftmaxCrossEntropyWithLogits", inputs=["features: T", "labels: T"],
            outputs=["loss: T", "backprop: T"], attrs=["T: {float}"],
            shape=lambda ctx: _xent_shape(ctx, False), kernel=_xent_ref, group="other",
            doc="Per-row cross-entropy of softmax(features) against label distributions.")
register_op("SparseSoftmaxCrossEntropyWithLogits", inputs=["features: T", "labels: Tlabels"],
            outputs=["loss: T", "backprop: T"],
            attrs=["T: {float}", "Tlabels: {i32, i64} = i64"],
            shape=lambda ctx: _xent_shape(ctx, True), kernel=_sparse_xent_ref, group="other",
            doc="Per-row cross-entropy of softmax(features) against class indices.")


# --- BiasAddGrad -----------------------------------------------------------------------------
def _channel_axis(fmt: str, rank: int) -> int:
    return 1 if fmt == "NCHW" else rank - 1


def _bias_add_grad_shape(ctx) -> list:
    fmt = ctx.attr("data_format")
    if fmt not in ("NHWC", "NCHW"):
        raise ctx.error(f"data_format must be 'NHWC' or 'NCHW', got {fmt!r}")
    s = ctx.input_shape(0)
    if s is None:
        return [(None,)]
    least = 3 if fmt == "NCHW" else 2
    if len(s) < least:
        raise ctx.error(f"out_backprop must have rank >= {least} for data_format {fmt}, "
                        f"got shape {shape_str(s)}")
    return [(s[_channel_axis(fmt, len(s))],)]


def _bias_add_grad_ref(ctx, g: np.ndarray) -> np.ndarray:
    axis = _channel_axis(ctx.attrs["data_format"], g.ndim)
    axes = tuple(k for k in range(g.ndim) if k != axis)
    acc = np.float64 if g.dtype.kind == "f" else g.dtype
    return np.sum(g, axis=axes, dtype=acc).astype(g.dtype)


register_op("BiasAddGrad", inputs=["out_backprop: T"], outputs=["output: T"],
            attrs=["T: {float, i32, i64}", 'data_format: string = "NHWC"'],
            shape=_bias_add_grad_shape, kernel=_bias_add_grad_ref,
            group="reduce", doc="Sum of out_backprop over every dim but the channel dim.")


# --- UnsortedSegmentSum ----------------------------------------------------------------------
def _segment_shape(ctx) -> list:
    data, ids = ctx.input_shape(0), ctx.input_shape(1)
    ns = ctx.input_shape(2)
    if ns is not None and len(ns) != 0:
        raise ctx.error(f"num_segments must be a scalar, got shape {shape_str(ns)}")
    v = ctx.input_value(2)
    n = None if v is None else int(v)
    if n is not None and n < 0:
        raise ctx.error(f"num_segments must be >= 0, got {n}")
    if data is None or ids is None:
        return [None]
    if len(ids) > len(data):
        raise ctx.error(f"segment_ids {shape_str(ids)} must be a prefix of data's shape "
                        f"{shape_str(data)}")
    try:
        merge_shapes(tuple(ids), tuple(data[:len(ids)]))
    except ValueError:
        raise ctx.error(f"segment_ids {shape_str(ids)} must be a prefix of data's shape "
                        f"{shape_str(data)}") from None
    return [(n,) + tuple(data[len(ids):])]


def _segment_ref(ctx, data: np.ndarray, ids: np.ndarray, num) -> np.ndarray:
    n = int(num)
    if n < 0:
        raise ExecutionError(f"num_segments must be >= 0, got {n}", ctx.node)
    if data.shape[:ids.ndim] != ids.shape:
        raise ExecutionError(f"segment_ids {list(ids.shape)} must be a prefix of data's shape "
                             f"{list(data.shape)}", ctx.node)
    flat = ids.reshape(-1)
    big = flat >= n
    if np.any(big):
        raise ExecutionError(f"segment_ids[{int(np.argmax(big))}] = {flat[np.argmax(big)]} is "
                             f"out of range [0, {n})", ctx.node)
    inner = data.shape[ids.ndim:]
    rows = data.reshape((flat.size,) + inner)
    keep = flat >= 0
    acc = np.float64 if data.dtype == np.float32 else data.dtype
    out = np.zeros((n,) + inner, acc)
    np.add.at(out, flat[keep], rows[keep].astype(acc))
    return out.astype(data.dtype)


register_op("UnsortedSegmentSum", inputs=["data: T", "segment_ids: Tindices",
                                          "num_segments: Tnumsegments"],
            outputs=["output: T"],
            attrs=["T: {float, i32, i64}", "Tindices: {i32, i64}",
                   "Tnumsegments: {i32, i64} = i32"],
            shape=_segment_shape, kernel=_segment_ref, group="other",
            doc="Sums of data rows per segment id; negative ids are dropped, ids >= "
                "num_segments are an error.")


# --- BroadcastGradientArgs -------------------------------------------------------------------
def _reduce_axes(s0: List[int], s1: List[int]):
    """TF's BCast grad_reduce_idx: per input, the output axes where its padded dim is 1."""
    rank = max(len(s0), len(s1))
    p0 = [1] * (rank - len(s0)) + list(s0)
    p1 = [1] * (rank - len(s1)) + list(s1)
    for a, b in zip(p0, p1):
        if a != b and a != 1 and b != 1:
            raise ValueError(f"Incompatible shapes: {list(s0)} vs. {list(s1)}")
    return [k for k in range(rank) if p0[k] == 1], [k for k in range(rank) if p1[k] == 1]


def _bga_shape(ctx) -> list:
    for i in (0, 1):
        s = ctx.input_shape(i)
        if s is not None and len(s) != 1:
            raise ctx.error(f"input {i} must be a vector, got shape {shape_str(s)}")
    v0, v1 = ctx.input_value(0), ctx.input_value(1)
    if v0 is None or v1 is None:
        return [(None,), (None,)]
    try:
        r0, r1 = _reduce_axes(np.asarray(v0).tolist(), np.asarray(v1).tolist())
    except ValueError as e:
        raise ctx.error(str(e)) from None
    return [(len(r0),), (len(r1),)]


def _bga_ref(ctx, s0: np.ndarray, s1: np.ndarray):
    try:
        r0, r1 = _reduce_axes(s0.tolist(), s1.tolist())
    except ValueError as e:
        raise ExecutionError(str(e), ctx.node) from None
    return np.array(r0, s0.dtype), np.array(r1, s0.dtype)


register_op("BroadcastGradientArgs", inputs=["s0: T", "s1: T"], outputs=["r0: T", "r1: T"],
            attrs=["T: {i32, i64} = i32"], shape=_bga_shape, kernel=_bga_ref, group="other",
            doc="The axes to sum each input's gradient over for a broadcast of shapes s0, s1.")


# --- MaxPoolGradGrad -------------------------------------------------------------------------
def _max_pool_grad_grad_shape(ctx) -> list:
    g = conv._geometry(ctx.attrs, ctx.error, ksize=True)
    names = ("orig_input", "orig_output", "grad")
    x, y, gx = (conv._rank4(ctx, i, name) for i, name in enumerate(names))
    conv._expect(ctx, "grad", gx, x)
    x = tuple(conv._merge(a, b) for a, b in zip(x, gx))
    k = ctx.attr("ksize")
    n, oh, ow = conv._check_out(ctx, g, x, k[1], k[2])
    out = (n, oh, ow, x[3])
    conv._expect(ctx, "orig_output", y, out)
    return [tuple(conv._merge(a, b) for a, b in zip(out, y))]


def _max_pool_grad_grad_ref(ctx, x: np.ndarray, y: np.ndarray, gx: np.ndarray) -> np.ndarray:
    best, idx = conv.max_pool_argmax(ctx, x)
    conv._check_grad(ctx, y.shape, best.shape, "orig_output")
    conv._check_grad(ctx, gx.shape, x.shape, "grad")
    n, h, w, c = x.shape
    if best.size == 0:
        return np.zeros(best.shape, gx.dtype)
    picked = np.take_along_axis(gx.reshape(n, h * w, c), idx.reshape(n, -1, c), axis=1)
    return picked.reshape(best.shape)


conv._register("MaxPoolGradGrad", ["orig_input: T", "orig_output: T", "grad: T"],
               _max_pool_grad_grad_shape, _max_pool_grad_grad_ref, outputs=["output: T"],
               attrs=conv._POOL_ATTRS, group="other",
               doc="Per MaxPool output element, grad at the first maximum of its window in "
                   "orig_input (the gradient of MaxPoolGrad w.r.t. grad).")
