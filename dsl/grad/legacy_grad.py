"""Gradients of TensorFlow's legacy ``Select`` and ``Gather`` (``compiler/ops/legacy.py``), as
TensorFlow defines them: Select sends the gradient to the branch each element (or row) came
from; Gather's gradient is sparse, g's rows at the rows of params they came from."""
from __future__ import annotations

from typing import List, Optional

from dsl.grad.array_grad import gather_rows_grad
from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]


@RegisterGradient("Select")
def _select_grad(op: Operation, g: Tensor) -> Grads:
    c = op.inputs[0]
    zeros = apply_op("ZerosLike", [op.inputs[1]])
    return [None, apply_op("Select", [c, g, zeros]), apply_op("Select", [c, zeros, g])]


@RegisterGradient("Gather")
def _gather_grad(op: Operation, g: Tensor) -> Grads:
    return [gather_rows_grad(op.inputs[0], op.inputs[1], g), None]
