"""Transformer ops: Attention (opsets 23-25: multi-head, grouped-query and multi-query, 3-D and
4-D inputs, boolean and additive masks, causal and sliding-window masks aligned to a KV cache,
past/present key and value, ``nonpad_kv_seqlen``, softcap, softmax precision and the four
``qk_matmul_output`` modes) and RotaryEmbedding.

Both are composed from flowc ops (BatchMatMulV2, Softmax, SelectV2, ...), as ONNX's own
function bodies compose them. Grouped-query attention reuses each KV head for ``q_num_heads /
kv_num_heads`` query heads by viewing Q as [batch, kv_heads, reps * q_len, head] (a reshape,
no copy), so K and V are never repeated.
"""
from __future__ import annotations

from typing import List, Optional, Union

import numpy as np

import dsl as fl
from dsl.onnx.dtypes import flowc_dtype, onnx_type_name
from dsl.onnx.values import (binary, index_const, index_scalar, rank_of, scalar, shape_i64,
                             static_shape, unary)
from dsl.ops import apply_op
from dsl.tensor import Tensor

Dim = Union[int, Tensor]


def dim_of(x: Tensor, k: int) -> Dim:
    """Dim ``k`` of ``x``: an int when known at import time, else an i64 scalar tensor."""
    shape = static_shape(x)
    k = k + len(shape) if k < 0 else k
    d = shape[k]
    if d is not None:
        return int(d)
    return apply_op("GatherV2", [shape_i64(x), index_scalar(k), index_scalar(0)])


def dim_tensor(d: Dim) -> Tensor:
    return index_scalar(d) if isinstance(d, int) else d


def shape_vector(dims: List[Dim]) -> Tensor:
    """A 1-D i64 shape from ints and i64 scalar tensors (a constant when all are ints)."""
    if all(isinstance(d, int) for d in dims):
        return index_const(dims)
    return apply_op("Pack", [[dim_tensor(d) for d in dims]], {"axis": 0})


def reshape(x: Tensor, dims: List[Dim]) -> Tensor:
    return apply_op("Reshape", [x, shape_vector(dims)])


def _transpose(x: Tensor, perm: List[int]) -> Tensor:
    return apply_op("Transpose", [x, index_const(perm)])


def _positions(n: Dim) -> Tensor:
    """0, 1, ..., n - 1 as i64."""
    return apply_op("Range", [index_scalar(0), dim_tensor(n), index_scalar(1)])


def _split_heads(x: Tensor, heads: int) -> Tensor:
    """[batch, seq, heads * size] -> [batch, heads, seq, size]."""
    y = reshape(x, [dim_of(x, 0), dim_of(x, 1), heads, -1])
    return _transpose(y, [0, 2, 1, 3])


def _pad_last(x: Tensor, amount: Dim) -> Tensor:
    """``x`` with ``amount`` zeros (False) appended along its last dim."""
    rank = len(static_shape(x))
    if isinstance(amount, int):
        pads = np.zeros([rank, 2], np.int64)
        pads[-1, 1] = amount
        return apply_op("Pad", [x, fl.constant(pads, dtype=fl.int64)])
    zeros = [index_scalar(0)] * (2 * rank - 1)
    pads = apply_op("Pack", [zeros + [amount]], {"axis": 0})
    return apply_op("Pad", [x, reshape(pads, [rank, 2])])


def _sub(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return binary("Sub", dim_tensor(a), dim_tensor(b))


def _all_of(conds: List[Tensor]) -> Optional[Tensor]:
    out = None
    for c in conds:
        out = c if out is None else binary("LogicalAnd", out, c)
    return out


class _Masks:
    """The allowed-key conditions (booleans, broadcast to [batch, heads, q_len, kv_len]) and
    the additive float mask of one Attention node."""

    def __init__(self):
        self.allowed: List[Tensor] = []
        self.additive: Optional[Tensor] = None

    def bias(self, like: Tensor) -> Optional[Tensor]:
        """0 where a key is attended and -inf where not, plus the float mask; None if neither."""
        allowed = _all_of(self.allowed)
        bias = None
        if allowed is not None:
            bias = fl.where_v2(allowed, scalar(0, like), scalar(-np.inf, like))
        if self.additive is not None:
            bias = self.additive if bias is None else binary("AddV2", self.additive, bias)
        return bias


def _mask_input(ctx, masks: _Masks, mask: Tensor, kv_len: Dim, q) -> None:
    """attn_mask: boolean (True attends) or additive; a last dim shorter than the keys is
    padded with False / -inf."""
    length = dim_of(mask, -1)
    short = _sub(kv_len, length)
    if mask.dtype == fl.bool_:
        if not (isinstance(short, int) and short == 0):
            mask = _pad_last(mask, short)
        masks.allowed.append(mask)
        return
    if mask.dtype != q.dtype:
        raise ctx.error(f"a float attn_mask must have Q's type ({q.dtype}), got {mask.dtype}")
    if isinstance(short, int) and short == 0:
        masks.additive = mask
        return
    padded = _pad_last(mask, short)
    inside = binary("Less", _positions(kv_len), dim_tensor(length))
    masks.additive = binary("AddV2", padded,
                            fl.where_v2(inside, scalar(0, q), scalar(-np.inf, q)))


def lower_attention(ctx):
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    rank = rank_of(q, ctx)
    if rank not in (3, 4) or rank_of(k, ctx) != rank or rank_of(v, ctx) != rank:
        raise ctx.error("Q, K and V must all be 3-D or all be 4-D")
    if ctx.has_input(4) != ctx.has_input(5):
        raise ctx.error("past_key and past_value must be given together")
    nonpad = ctx.optional_input(6)
    if nonpad is not None and ctx.has_input(4):
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key / past_value")
    if rank == 3:
        q_heads, kv_heads = ctx.attr("q_num_heads", None), ctx.attr("kv_num_heads", None)
        if not q_heads or not kv_heads:
            raise ctx.error("3-D inputs need the q_num_heads and kv_num_heads attributes")
        q, k, v = _split_heads(q, q_heads), _split_heads(k, kv_heads), _split_heads(v, kv_heads)
    else:
        q_heads, kv_heads = static_shape(q)[1], static_shape(k)[1]
    if ctx.has_input(4):
        k = apply_op("ConcatV2", [[ctx.input(4), k], index_scalar(2)])
        v = apply_op("ConcatV2", [[ctx.input(5), v], index_scalar(2)])
    present_k, present_v = k, v

    # scale Q and K by sqrt(scale) each (ONNX's guard against overflow in the product)
    head = static_shape(q)[3]
    scale = ctx.attr("scale", None)
    if scale is not None or head is not None:
        root = np.sqrt(scale if scale is not None else 1.0 / np.sqrt(head))
        root = scalar(root, q)
    else:
        root = unary("Sqrt", unary("Rsqrt", fl.cast(dim_of(q, 3), q.dtype)))
    qs, ks = binary("Mul", q, root), binary("Mul", k, root)

    batch, q_len, kv_len = dim_of(q, 0), dim_of(q, 2), dim_of(k, 2)
    grouped = (q_heads is not None and kv_heads is not None and q_heads != kv_heads)
    if grouped:
        if q_heads % kv_heads:
            raise ctx.error(f"q_num_heads ({q_heads}) must be a multiple of kv_num_heads "
                            f"({kv_heads})")
        reps = q_heads // kv_heads
        qs = reshape(qs, [batch, kv_heads, _times(reps, q_len), -1])
    scores = apply_op("BatchMatMulV2", [qs, ks], {"adj_y": True})
    if grouped:
        scores = reshape(scores, [batch, q_heads, q_len, kv_len])
    raw = scores

    softcap = float(ctx.attr("softcap", 0.0))
    if softcap > 0:
        scores = binary("Mul", unary("Tanh", binary("RealDiv", scores, scalar(softcap, q))),
                        scalar(softcap, q))
    capped = scores

    masks = _Masks()
    if ctx.has_input(3):
        _mask_input(ctx, masks, ctx.input(3), kv_len, q)
    # keys before the query block: the past (internal cache), or per batch the valid keys
    # less the queries (external cache), else none
    if ctx.has_input(4):
        offset: Union[Dim, Tensor] = dim_of(ctx.input(4), 2)
    elif nonpad is not None:
        offset = reshape(binary("Sub", fl.cast(nonpad, fl.int64), dim_tensor(q_len)),
                         [-1, 1, 1, 1])
    else:
        offset = 0
    rows = reshape(_positions(q_len), [-1, 1])
    cols = reshape(_positions(kv_len), [1, -1])
    left = ctx.attr("left_window_size", -1) if ctx.opset >= 25 else -1
    right = ctx.attr("right_window_size", -1) if ctx.opset >= 25 else -1
    if ctx.attr("is_causal", 0) or left >= 0 or right >= 0:
        at = rows if isinstance(offset, int) and offset == 0 else \
            binary("AddV2", rows, dim_tensor(offset))            # the query's absolute position
        if ctx.attr("is_causal", 0):
            masks.allowed.append(binary("LessEqual", cols, at))
        if left >= 0:
            masks.allowed.append(binary("LessEqual", binary("Sub", at, cols), index_scalar(left)))
        if right >= 0:
            masks.allowed.append(binary("LessEqual", binary("Sub", cols, at), index_scalar(right)))
    if nonpad is not None:
        valid = reshape(fl.cast(nonpad, fl.int64), [-1, 1, 1, 1])
        masks.allowed.append(binary("Less", cols, valid))
    bias = masks.bias(q)
    if bias is not None:
        scores = binary("AddV2", scores, bias)
    with_bias = scores

    precision = ctx.attr("softmax_precision", None)
    if precision is not None:
        dtype = flowc_dtype(precision)
        if dtype is None:
            raise ctx.error(f"softmax_precision {onnx_type_name(precision)} is not a flowc dtype")
        scores = fl.cast(scores, dtype)
    probs = apply_op("Softmax", [scores])
    if bias is not None:
        # a query that may attend no key gets a zero row (not the NaN of exp(-inf + inf))
        no_key = binary("Equal", apply_op("Max", [bias, index_const([-1])], {"keep_dims": True}),
                        scalar(-np.inf, bias))
        probs = fl.where_v2(no_key, scalar(0, probs), probs)
    probs = fl.cast(probs, q.dtype) if probs.dtype != q.dtype else probs

    if grouped:
        y = apply_op("BatchMatMulV2",
                     [reshape(probs, [batch, kv_heads, _times(reps, q_len), kv_len]), v])
        y = reshape(y, [batch, q_heads, q_len, -1])
    else:
        y = apply_op("BatchMatMulV2", [probs, v])
    if rank == 3:
        y = reshape(_transpose(y, [0, 2, 1, 3]), [batch, q_len, -1])

    outputs = [y, present_k, present_v]
    if ctx.output_wanted(3):
        mode = ctx.attr("qk_matmul_output_mode", 0)
        if mode not in (0, 1, 2, 3):
            raise ctx.error(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {mode}")
        outputs.append([raw, capped, with_bias, probs][mode])
    return outputs[:max(ctx.num_outputs, 1)]


def _times(n: int, d: Dim) -> Dim:
    return n * d if isinstance(d, int) else binary("Mul", d, index_scalar(n))


def _last_axis_slice(x: Tensor, begin: int, end: Optional[int], stride: int = 1) -> Tensor:
    """x[..., begin:end:stride]."""
    rank = len(static_shape(x))
    whole = (1 << (rank - 1)) - 1
    end_mask = whole | (1 << (rank - 1) if end is None else 0)
    return apply_op("StridedSlice", [x, index_const([0] * (rank - 1) + [begin]),
                                     index_const([0] * (rank - 1) + [end or 0]),
                                     index_const([1] * (rank - 1) + [stride])],
                    {"begin_mask": whole, "end_mask": end_mask})


def lower_rotary_embedding(ctx):
    """Rotates pairs of features by position-dependent angles (the cos and sin caches, indexed
    by ``position_ids`` when given): halves of the rotated part, or even/odd features when
    ``interleaved``; features past ``rotary_embedding_dim`` pass through."""
    x, cos, sin = ctx.input(0), ctx.input(1), ctx.input(2)
    rank = rank_of(x, ctx)
    if rank not in (3, 4):
        raise ctx.error(f"input must be 3-D or 4-D, got rank {rank}")
    positions = ctx.optional_input(3)
    if positions is not None:
        cos = apply_op("GatherV2", [cos, positions, index_scalar(0)])
        sin = apply_op("GatherV2", [sin, positions, index_scalar(0)])
    if rank == 3:
        heads = ctx.attr("num_heads", 0)
        if not heads:
            raise ctx.error("a 3-D input needs the num_heads attribute")
        xh = reshape(x, [dim_of(x, 0), dim_of(x, 1), heads, -1])       # [b, s, h, d]
        axis = 2
    else:
        xh, axis = x, 1                                                # [b, h, s, d]
    cos = apply_op("ExpandDims", [cos, index_scalar(axis)])
    sin = apply_op("ExpandDims", [sin, index_scalar(axis)])
    head = static_shape(xh)[3]
    dim = ctx.attr("rotary_embedding_dim", 0) or head
    if dim is None:
        raise ctx.error("needs the head size known (or rotary_embedding_dim)")
    if dim % 2:
        raise ctx.error(f"rotary_embedding_dim must be even, got {dim}")
    rotated = xh if dim == head else _last_axis_slice(xh, 0, dim)
    interleaved = ctx.attr("interleaved", 0)
    if interleaved:
        x1, x2 = _last_axis_slice(rotated, 0, None, 2), _last_axis_slice(rotated, 1, None, 2)
    else:
        x1, x2 = _last_axis_slice(rotated, 0, dim // 2), _last_axis_slice(rotated, dim // 2, dim)
    real = binary("Sub", binary("Mul", cos, x1), binary("Mul", sin, x2))
    imag = binary("AddV2", binary("Mul", sin, x1), binary("Mul", cos, x2))
    if interleaved:
        out = apply_op("Reshape", [apply_op("Pack", [[real, imag]], {"axis": -1}),
                                   shape_i64(rotated)])
    else:
        out = apply_op("ConcatV2", [[real, imag], index_scalar(-1)])
    if dim != head:
        out = apply_op("ConcatV2", [[out, _last_axis_slice(xh, dim, None)], index_scalar(-1)])
    return apply_op("Reshape", [out, shape_i64(x)]) if rank == 3 else out


LOWERINGS = {
    "Attention": [(23, None, lower_attention)],
    "RotaryEmbedding": [(23, None, lower_rotary_embedding)],
}
