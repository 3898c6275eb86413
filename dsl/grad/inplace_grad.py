"""Gradients of the row updates InplaceUpdate, InplaceAdd and InplaceSub (``y = x; y[i] op= v``).

x's gradient is y's, except that the rows InplaceUpdate replaced get none; v's is y's rows at
``i`` (negated for InplaceSub). With a repeated index InplaceUpdate keeps the last row written,
and every one of the repeated rows of v gets that row's gradient (TensorFlow leaves repeated
indices of InplaceUpdate unspecified).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op, constant
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]


def _rows(g: Tensor, i: Tensor) -> Tensor:
    return apply_op("GatherV2", [g, i, constant(np.int32(0))])


@RegisterGradient("InplaceUpdate")
def _inplace_update_grad(op: Operation, g: Tensor) -> Grads:
    _, i, v = op.inputs
    return [apply_op("InplaceUpdate", [g, i, apply_op("ZerosLike", [v])]), None, _rows(g, i)]


@RegisterGradient("InplaceAdd")
def _inplace_add_grad(op: Operation, g: Tensor) -> Grads:
    return [g, None, _rows(g, op.inputs[1])]


@RegisterGradient("InplaceSub")
def _inplace_sub_grad(op: Operation, g: Tensor) -> Grads:
    return [g, None, apply_op("Neg", [_rows(g, op.inputs[1])])]
