"""The gradient of BroadcastTo, as TensorFlow's ``array_grad.py`` defines it: the incoming
gradient summed over the broadcast axes (BroadcastGradientArgs of the two shapes), reshaped to
the input's shape; the shape input gets none."""
from __future__ import annotations

from typing import List, Optional

from dsl.grad._util import shape_of
from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor


@RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op: Operation, g: Tensor) -> List[Optional[Tensor]]:
    x = op.inputs[0]
    in_shape = shape_of(x, out_type=op.inputs[1].dtype)
    axes, _ = apply_op("BroadcastGradientArgs", [in_shape, op.inputs[1]])
    summed = apply_op("Sum", [g, axes], {"keep_dims": True})
    return [apply_op("Reshape", [summed, in_shape]), None]
