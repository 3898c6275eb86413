"""Gradients of the TensorArray ops (TensorFlow 1.x's tensor_array_grad): the gradient of an
array's elements lives in its gradient array (``TensorArrayGradV3``, one per array, made on
first use), written where the forward pass read and read where it wrote; the gradient of a
flow is a flow of the gradient array, which orders those reads after those writes.

- a read of element i: its gradient is written into element i of the gradient array (two
  reads of one element add up there);
- a write of element i: the value's gradient is element i of the gradient array (zeros if
  nothing reached it and the element shape is known);
- a gather / a scatter: a scatter / a gather of the gradient array.
"""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor, static_shape

SOURCE = "gradients"

for _op in ("TensorArrayV3", "TensorArrayGradV3", "TensorArraySizeV3", "TensorArrayCloseV3"):
    NotDifferentiable(_op)


def _grad_array(op: Operation, flow: Tensor):
    """(handle, flow) of the gradient array of ``op``'s array, ordered after ``flow``."""
    handle, grad_flow = apply_op("TensorArrayGradV3", [op.inputs[0], flow], {"source": SOURCE},
                                 name="TensorArrayGrad")
    return handle, grad_flow


@RegisterGradient("TensorArrayReadV3")
def _read_grad(op: Operation, grad: Optional[Tensor]) -> List[Optional[Tensor]]:
    if grad is None:
        return [None, None, None]
    _, index, flow = op.inputs
    handle, grad_flow = _grad_array(op, flow)
    written = apply_op("TensorArrayWriteV3", [handle, index, grad, grad_flow])
    return [None, None, written]


@RegisterGradient("TensorArrayWriteV3")
def _write_grad(op: Operation, flow_grad: Optional[Tensor]) -> List[Optional[Tensor]]:
    if flow_grad is None:
        return [None, None, None, None]
    _, index, value, _ = op.inputs
    handle, grad_flow = _grad_array(op, flow_grad)
    value_grad = apply_op("TensorArrayReadV3", [handle, index, grad_flow],
                          {"dtype": value.dtype})
    return [None, None, value_grad, flow_grad]


@RegisterGradient("TensorArrayGatherV3")
def _gather_grad(op: Operation, grad: Optional[Tensor]) -> List[Optional[Tensor]]:
    if grad is None:
        return [None, None, None]
    _, indices, flow = op.inputs
    handle, grad_flow = _grad_array(op, flow)
    scattered = apply_op("TensorArrayScatterV3", [handle, indices, grad, grad_flow])
    return [None, None, scattered]


@RegisterGradient("TensorArrayScatterV3")
def _scatter_grad(op: Operation, flow_grad: Optional[Tensor]) -> List[Optional[Tensor]]:
    if flow_grad is None:
        return [None, None, None, None]
    _, indices, value, _ = op.inputs
    handle, grad_flow = _grad_array(op, flow_grad)
    element = None if static_shape(value) is None else tuple(static_shape(value)[1:])
    value_grad = apply_op("TensorArrayGatherV3", [handle, indices, grad_flow],
                          {"dtype": value.dtype, "element_shape": element})
    return [None, None, value_grad, flow_grad]
