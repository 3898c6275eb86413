"""Gradients of the print ops (``compiler/ops/logging.py``): ``Print`` passes its input's
gradient through (its data inputs get none), as TensorFlow's ``_PrintGrad``; ``_PrintV2`` has
no outputs."""
from __future__ import annotations

from dsl.gradients import NotDifferentiable, RegisterGradient


@RegisterGradient("Print")
def _print_grad(op, g):
    return [g] + [None] * (len(op.inputs) - 1)


NotDifferentiable("_PrintV2")
