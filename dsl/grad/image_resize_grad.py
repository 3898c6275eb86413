"""Gradients of ResizeBilinear and ResizeNearestNeighbor, as TensorFlow's ``image_grad.py``:
ResizeBilinearGrad(grad, images) and ResizeNearestNeighborGrad(grad, images' height and
width), with the forward op's align_corners and half_pixel_centers; none for the size. An
integer image has no gradient (TensorFlow's gradient ops take float images only)."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

_FLAGS = ("align_corners", "half_pixel_centers")


def _flags(op: Operation) -> dict:
    return {name: op.get_attr(name) for name in _FLAGS}


@RegisterGradient("ResizeBilinear")
def _resize_bilinear_grad(op: Operation, grad: Tensor) -> List[Optional[Tensor]]:
    images = op.inputs[0]
    if not images.dtype.is_floating:
        return [None, None]
    return [apply_op("ResizeBilinearGrad", [grad, images], _flags(op)), None]


@RegisterGradient("ResizeNearestNeighbor")
def _resize_nearest_neighbor_grad(op: Operation, grad: Tensor) -> List[Optional[Tensor]]:
    images = op.inputs[0]
    if not images.dtype.is_floating:
        return [None, None]
    hw = images.shape.as_list()[1:3] if images.shape.rank == 4 else [None]
    if None not in hw:                  # the static height and width, else Shape(images)[1:3]
        size = apply_op("Const", [], {"value": np.array(hw, np.int32), "dtype": "i32"})
    else:
        shape = apply_op("Shape", [images], {"out_type": "i32"})
        bounds = [apply_op("Const", [], {"value": np.array([v], np.int32), "dtype": "i32"})
                  for v in (1, 3, 1)]
        size = apply_op("StridedSlice", [shape] + bounds, {})
    return [apply_op("ResizeNearestNeighborGrad", [grad, size], _flags(op)), None]
