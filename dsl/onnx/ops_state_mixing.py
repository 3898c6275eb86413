"""The recurrent sequence mixers of Gated DeltaNet / Mamba-style models (opset 27):
LinearAttention (linear, gated, delta and gated-delta state updates, with grouped query heads)
and CausalConvWithState (a causal depthwise 1-D convolution carrying its last k - 1 inputs).

LinearAttention is the token-by-token recurrence of its definition, unrolled over the
sequence (its length must be known at import time), computed in float32 as ONNX's reference
does; each step is a few batched matrix products on the [batch, kv_heads, d_k, d_v] state.
"""
from __future__ import annotations

from typing import List

import numpy as np

import dsl as fl
from dsl.onnx.ops_attention import dim_of, dim_tensor, reshape
from dsl.onnx.values import binary, index_const, index_scalar, rank_of, scalar, static_shape, unary
from dsl.ops import apply_op
from dsl.tensor import Tensor


def _heads(x: Tensor, heads: int) -> Tensor:
    """[B, T, H * D] -> [B, H, T, D]."""
    y = reshape(x, [dim_of(x, 0), dim_of(x, 1), heads, -1])
    return apply_op("Transpose", [y, index_const([0, 2, 1, 3])])


def _step(x: Tensor, t: int) -> Tensor:
    """[B, H, T, D] -> [B, H, 1, D] at position t."""
    return apply_op("GatherV2", [x, index_const([t]), index_scalar(2)])


def lower_linear_attention(ctx):
    query, key, value = ctx.input(0), ctx.input(1), ctx.input(2)
    q_heads, kv_heads = ctx.attr("q_num_heads", None), ctx.attr("kv_num_heads", None)
    if not q_heads or not kv_heads or q_heads % kv_heads:
        raise ctx.error("q_num_heads must be a positive multiple of kv_num_heads (both needed)")
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.error(f"unknown update_rule '{rule}'")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    decay, beta = ctx.optional_input(4), ctx.optional_input(5)
    if gating != (decay is not None) or delta != (beta is not None):
        raise ctx.error(f"update_rule '{rule}' takes decay: {gating}, beta: {delta}")
    for x in (query, key, value):
        if rank_of(x, ctx) != 3:
            raise ctx.error("query, key and value must be 3-D [batch, time, heads * size]")
    steps = static_shape(query)[1]
    if steps is None:
        raise ctx.error("the sequence length must be known (the recurrence is unrolled)")
    dk_total, dv_total = static_shape(query)[2], static_shape(value)[2]
    if dk_total is None or dv_total is None:
        raise ctx.error("needs the feature dims of query and value known")
    d_k, d_v = dk_total // q_heads, dv_total // kv_heads
    group = q_heads // kv_heads
    f32 = fl.float32

    def heads32(x, h):
        return _heads(fl.cast(x, f32) if x.dtype != f32 else x, h)
    q, k, v = heads32(query, q_heads), heads32(key, kv_heads), heads32(value, kv_heads)
    batch = dim_of(query, 0)
    if gating:
        gates = unary("Exp", heads32(decay, kv_heads))             # [B, H, T, d_k or 1]
    if delta:
        width = static_shape(beta)[-1]
        b4 = heads32(beta, width)                                  # [B, H or 1, T, 1]
    past = ctx.optional_input(3)
    if past is not None:
        state = fl.cast(past, f32) if past.dtype != f32 else past
    else:
        state = apply_op("Fill", [apply_op("Pack", [[dim_tensor(batch), index_scalar(kv_heads),
                                                     index_scalar(d_k), index_scalar(d_v)]],
                                           {"axis": 0}), fl.constant(np.float32(0))])
    scale = ctx.attr("scale", 0.0) or 1.0 / np.sqrt(d_k)
    outs: List[Tensor] = []
    for t in range(steps):
        k_t, v_t = _step(k, t), _step(v, t)                        # [B, H, 1, d]
        if gating:
            gate = _step(gates, t)                                 # [B, H, 1, d_k or 1]
            gate = apply_op("Transpose", [gate, index_const([0, 1, 3, 2])])
            state = binary("Mul", state, gate)                     # decays rows (d_k)
        if delta:
            retrieved = apply_op("BatchMatMulV2", [k_t, state])    # [B, H, 1, d_v]
            v_t = binary("Mul", _step(b4, t), binary("Sub", v_t, retrieved))
        state = binary("AddV2", state, apply_op("BatchMatMulV2", [k_t, v_t], {"adj_x": True}))
        q_t = _step(q, t)                                          # [B, Hq, 1, d_k]
        if group > 1:
            q_t = reshape(q_t, [batch, kv_heads, group, d_k])
        read = apply_op("BatchMatMulV2", [q_t, state])             # [B, Hkv, g or 1, d_v]
        outs.append(reshape(read, [batch, 1, q_heads * d_v]))
    out = outs[0] if steps == 1 else apply_op("ConcatV2", [outs, index_scalar(1)])
    out = binary("Mul", out, scalar(scale, out))
    if out.dtype != query.dtype:
        out = fl.cast(out, query.dtype)
    present_dtype = past.dtype if past is not None else query.dtype
    return [out, fl.cast(state, present_dtype) if present_dtype != f32 else state]


def lower_causal_conv_with_state(ctx):
    """out[b, c, t] = bias[c] + sum_j w[c, 0, j] * [past, x][b, c, t + j]; present = the last
    k - 1 entries of [past, x]; optionally SiLU."""
    x, w = ctx.input(0), ctx.input(1)
    if rank_of(x, ctx) != 3 or rank_of(w, ctx) != 3:
        raise ctx.error("input and weight must be 3-D")
    k = static_shape(w)[2]
    if k is None:
        raise ctx.error("needs the kernel size known")
    past = ctx.optional_input(3)
    channels, length = dim_of(x, 1), dim_of(x, 2)
    if past is None:
        pads = np.zeros([3, 2], np.int64)
        pads[2, 0] = k - 1
        full = apply_op("Pad", [x, fl.constant(pads, dtype=fl.int64)])
    else:
        full = apply_op("ConcatV2", [[past, x], index_scalar(2)])
    taps = reshape(w, [channels, k])
    terms = []
    for j in range(k):
        window = apply_op("Slice", [full, index_const([0, 0, j]),
                                    apply_op("Pack", [[index_scalar(-1), index_scalar(-1),
                                                       dim_tensor(length)]], {"axis": 0})])
        tap = reshape(apply_op("GatherV2", [taps, index_scalar(j), index_scalar(1)]),
                      [channels, 1])
        terms.append(binary("Mul", window, tap))
    y = terms[0] if k == 1 else apply_op("AddN", [terms])
    if ctx.has_input(2):
        y = binary("AddV2", y, reshape(ctx.input(2), [channels, 1]))
    activation = ctx.attr("activation", "none")
    if activation in ("silu", "swish"):
        y = binary("Mul", y, unary("Sigmoid", y))
    elif activation != "none":
        raise ctx.error(f"unknown activation '{activation}'")
    total = dim_of(full, 2)
    start = total - (k - 1) if isinstance(total, int) else binary("Sub", total, index_scalar(k - 1))
    present = apply_op("Slice", [full, apply_op("Pack", [[index_scalar(0), index_scalar(0),
                                                          dim_tensor(start)]], {"axis": 0}),
                                 index_const([-1, -1, -1])])
    return [y, present]


LOWERINGS = {
    "LinearAttention": [(27, None, lower_linear_attention)],
    "CausalConvWithState": [(27, None, lower_causal_conv_with_state)],
}
