"""The gradient of ``_RoiAlign`` (``compiler/ops/roi_align.py``) with respect to its input,
``_RoiAlignGrad``; the boxes and batch indices get none (as in torchvision)."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

_ATTRS = ("mode", "output_height", "output_width", "sampling_ratio", "spatial_scale",
          "half_pixel")


@RegisterGradient("_RoiAlign")
def _roi_align_grad(op: Operation, g: Tensor) -> List[Optional[Tensor]]:
    x, rois, batch_indices = op.inputs
    dx = apply_op("_RoiAlignGrad", [g, x, rois, batch_indices],
                  {name: op.get_attr(name) for name in _ATTRS})
    return [dx, None, None]


NotDifferentiable("_RoiAlignGrad")
