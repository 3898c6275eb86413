"""Gradients of the indexing, selection and Einsum ops (``compiler/ops/indexing.py``,
``selection.py``, ``einsum.py``), as TensorFlow's ``array_grad.py``/``nn_grad.py``/
``special_math_ops`` define them. Where and the Unique ops have none (integer outputs)."""
from __future__ import annotations

import string
from typing import Dict, List, Optional

import numpy as np

from compiler.ops.einsum import parse_equation
from dsl.grad._util import need_rank, shape_of
from dsl.gradients import GradientShapeError, NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape
from runtime.dtypes import DType

Grads = List[Optional[Tensor]]


def _op(name: str, *inputs, **attrs) -> Tensor:
    return apply_op(name, list(inputs), attrs)


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


_I64 = DType.i64


# --- GatherNd / ScatterNd / TensorScatter* -----------------------------------------------------
@RegisterGradient("GatherNd")
def _gather_nd_grad(op: Operation, g: Tensor) -> Grads:
    params, indices = op.inputs
    return [_op("ScatterNd", indices, g, shape_of(params, indices.dtype)), None]


@RegisterGradient("ScatterNd")
def _scatter_nd_grad(op: Operation, g: Tensor) -> Grads:
    return [None, _op("GatherNd", g, op.inputs[0]), None]


@RegisterGradient("TensorScatterUpdate")
def _tensor_scatter_update_grad(op: Operation, g: Tensor) -> Grads:
    _, indices, updates = op.inputs
    cleared = _op("TensorScatterUpdate", g, indices, _op("ZerosLike", updates))
    return [cleared, None, _op("GatherNd", g, indices)]


@RegisterGradient("TensorScatterAdd")
def _tensor_scatter_add_grad(op: Operation, g: Tensor) -> Grads:
    return [g, None, _op("GatherNd", g, op.inputs[1])]


@RegisterGradient("TensorScatterSub")
def _tensor_scatter_sub_grad(op: Operation, g: Tensor) -> Grads:
    return [g, None, _op("Neg", _op("GatherNd", g, op.inputs[1]))]


def _tensor_scatter_extreme_grad(op: Operation, g: Tensor) -> Grads:
    """Split between the entries that reached the extreme: the tensor's own element and each
    update equal to the output there share its gradient equally."""
    x, indices, y = op.inputs
    out = op.outputs[0]
    x_hit = _op("Cast", _op("Equal", x, out), DstT=g.dtype)
    y_hit = _op("Cast", _op("Equal", y, _op("GatherNd", out, indices)), DstT=g.dtype)
    hits = _op("AddV2", x_hit, _op("ScatterNd", indices, y_hit, shape_of(x, indices.dtype)))
    share = _op("RealDiv", g, hits)
    return [_op("Mul", share, x_hit), None, _op("Mul", _op("GatherNd", share, indices), y_hit)]


for _name in ("TensorScatterMax", "TensorScatterMin"):
    RegisterGradient(_name)(_tensor_scatter_extreme_grad)


# --- ReverseSequence ---------------------------------------------------------------------------
@RegisterGradient("ReverseSequence")
def _reverse_sequence_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("ReverseSequence", g, op.inputs[1], seq_dim=op.get_attr("seq_dim"),
                batch_dim=op.get_attr("batch_dim")), None]


# --- TopKV2 ------------------------------------------------------------------------------------
@RegisterGradient("TopKV2")
def _top_k_grad(op: Operation, g_values: Tensor, g_indices: Optional[Tensor] = None) -> Grads:
    """Each value's gradient goes back to the entry it came from (the index output has none)."""
    x, indices = op.inputs[0], op.outputs[1]
    rank = need_rank(op, x)
    if g_values is None:
        return [None, None]
    shape = shape_of(x, _I64)
    n = _op("GatherV2", shape, _i64(rank - 1), _i64(0))
    rows = _op("Prod", _op("Slice", shape, _i64([0]), _i64([rank - 1])), _i64([0]))
    k = _op("GatherV2", shape_of(indices, _I64), _i64(rank - 1), _i64(0))
    starts = _op("Mul", _op("Range", _i64(0), rows, _i64(1)), n)
    flat = _op("AddV2", _op("Reshape", _op("Cast", indices, DstT=_I64), _op("Pack", [rows, k])),
               _op("ExpandDims", starts, _i64(1)))
    summed = _op("UnsortedSegmentSum", _op("Reshape", g_values, _i64([-1])),
                 _op("Reshape", flat, _i64([-1])), _op("Mul", rows, n))
    return [_op("Reshape", summed, shape), None]


# --- Einsum ------------------------------------------------------------------------------------
@RegisterGradient("Einsum")
def _einsum_grad(op: Operation, g: Tensor) -> Grads:
    """Operand i's gradient is the einsum of the output's gradient with the other operands
    into operand i's labels; labels summed inside operand i alone come back by broadcasting,
    and its broadcast '...' dims of size 1 by summing."""
    from dsl.indexing_ops import einsum
    xs = list(op.inputs)
    ranks = [need_rank(op, x) for x in xs]
    eq = parse_equation(op.get_attr("equation"), ranks)
    letters = _einsum_letters(eq.labels)
    spare = iter(c for c in string.ascii_letters if c not in letters.values())
    grads: Grads = []
    for i, (x, labels) in enumerate(zip(xs, eq.inputs)):
        if len(set(labels)) != len(labels):
            raise GradientShapeError(f"the gradient of Einsum '{op.name}' is not supported for "
                                     f"an operand with a repeated label (a diagonal): "
                                     f"'{op.get_attr('equation')}'")
        others = [(k, xs[k], eq.inputs[k]) for k in range(len(xs)) if k != i]
        seen_elsewhere = set(eq.output) | {c for _, _, ls in others for c in ls}
        terms = ["".join(letters[c] for c in eq.output)]
        for _, xk, ls in others:
            terms.append("".join(_own_letter(xk, j, c, eq, letters, spare)
                                 for j, c in enumerate(ls)))
        kept, expand_at, broadcast_back = [], [], False
        for j, c in enumerate(labels):
            stretched_one = c in eq.broadcast and static_shape(x)[j] == 1
            if stretched_one or c not in seen_elsewhere:
                expand_at.append(j)
                broadcast_back |= not stretched_one
            else:
                kept.append(c)
        step = ",".join(terms) + "->" + "".join(letters[c] for c in kept)
        gx = einsum(step, g, *[xk for _, xk, _ in others])
        for j in expand_at:
            gx = _op("ExpandDims", gx, _i64(j))
        if broadcast_back:
            gx = _op("AddV2", gx, _op("ZerosLike", x))
        grads.append(gx)
    return grads


def _einsum_letters(labels) -> Dict[str, str]:
    used = {c for c in labels if c in string.ascii_letters}
    spare = iter(c for c in string.ascii_letters if c not in used)
    return {c: c if c in used else next(spare) for c in labels}


def _own_letter(x: Tensor, j: int, c: str, eq, letters: Dict[str, str], spare) -> str:
    """The letter of dim j of a co-operand: a fresh one (summed away) where it is a
    broadcast '...' dim of size 1 that the others stretch."""
    if c in eq.broadcast and static_shape(x)[j] == 1:
        try:
            return next(spare)
        except StopIteration:
            raise GradientShapeError("the gradient of Einsum needs more labels than letters") \
                from None
    return letters[c]

for _name in ("Where", "Unique", "UniqueV2", "UniqueWithCounts", "UniqueWithCountsV2"):
    NotDifferentiable(_name)
