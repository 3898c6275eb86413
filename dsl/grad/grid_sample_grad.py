"""The gradient of ``_GridSample`` (``compiler/ops/grid_sample.py``): ``_GridSampleGrad`` gives
both the input's and the grid's."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

_ATTRS = ("mode", "padding_mode", "align_corners")


@RegisterGradient("_GridSample")
def _grid_sample_grad(op: Operation, g: Tensor) -> List[Optional[Tensor]]:
    x, grid = op.inputs
    dx, dgrid = apply_op("_GridSampleGrad", [g, x, grid],
                         {name: op.get_attr(name) for name in _ATTRS})
    return [dx, dgrid]


NotDifferentiable("_GridSampleGrad")
