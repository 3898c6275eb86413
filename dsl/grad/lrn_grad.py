"""The gradient of ``LRN`` (``compiler/ops/lrn.py``): ``LRNGrad`` of the incoming gradient,
the input and the output, with the op's attrs, as TensorFlow's ``_LRNGrad``."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

_ATTRS = ("depth_radius", "bias", "alpha", "beta")


@RegisterGradient("LRN")
def _lrn_grad(op: Operation, grad: Tensor) -> List[Optional[Tensor]]:
    attrs = {a: op.get_attr(a) for a in _ATTRS}
    return [apply_op("LRNGrad", [grad, op.inputs[0], op.outputs[0]], attrs)]
