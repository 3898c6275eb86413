"""Gradients of SpaceToBatchND and BatchToSpaceND: each is the other's inverse, so the gradient
of one is the other applied to the output gradient with the same block shape and paddings
(the crops of the inverse), as TensorFlow's are."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor


@RegisterGradient("SpaceToBatchND")
def _space_to_batch_grad(op: Operation, g: Tensor) -> List[Optional[Tensor]]:
    return [apply_op("BatchToSpaceND", [g, op.inputs[1], op.inputs[2]]), None, None]


@RegisterGradient("BatchToSpaceND")
def _batch_to_space_grad(op: Operation, g: Tensor) -> List[Optional[Tensor]]:
    return [apply_op("SpaceToBatchND", [g, op.inputs[1], op.inputs[2]]), None, None]
