"""Gradients of the dense TensorList ops (``compiler/ops/tensor_list.py``). A list is the tensor
``[n, *element_shape]``, so each gradient moves rows back the way the op moved them forward:
an item read from a list sends its gradient into that row of a zero list, an item set into a
list takes that row's gradient, a gather's rows are summed back by index."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import NotDifferentiable, RegisterGradient, fill_zeros
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor

Grads = List[Optional[Tensor]]
_ANY_SHAPE = np.int32(-1)          # an element_shape input that accepts any shape


def _op(name: str, *inputs, **attrs):
    return apply_op(name, list(inputs), attrs)


def _length(lst: Tensor) -> Tensor:
    return _op("TensorListLength", lst)


@RegisterGradient("TensorListFromTensor")
def _from_tensor_grad(op: Operation, g: Tensor) -> Grads:
    return [g, None]


@RegisterGradient("TensorListStack")
def _stack_grad(op: Operation, g: Tensor) -> Grads:
    return [g, None]


@RegisterGradient("TensorListGetItem")
def _get_item_grad(op: Operation, g: Tensor) -> Grads:
    lst, index = op.inputs[0], op.inputs[1]
    zeros = _op("ZerosLike", lst)
    return [_op("TensorListSetItem", zeros, index, g), None, None]


@RegisterGradient("TensorListSetItem")
def _set_item_grad(op: Operation, g: Tensor) -> Grads:
    lst, index, item = op.inputs
    rest = _op("TensorListSetItem", g, index, _op("ZerosLike", item))
    if op.get_attr("resize_if_index_out_of_bounds"):
        rest = _op("TensorListResize", rest, _length(lst))
    got = _op("TensorListGetItem", g, index, _ANY_SHAPE, element_dtype=g.dtype)
    return [rest, None, got]


@RegisterGradient("TensorListPushBack")
def _push_back_grad(op: Operation, g: Tensor) -> Grads:
    rest, last = _op("TensorListPopBack", g, _ANY_SHAPE, element_dtype=g.dtype)
    return [rest, last]


@RegisterGradient("TensorListPopBack")
def _pop_back_grad(op: Operation, *grads: Tensor) -> Grads:
    g_rest, g_last = fill_zeros(op, grads)
    return [_op("TensorListPushBack", g_rest, g_last), None]


@RegisterGradient("TensorListGather")
def _gather_grad(op: Operation, g: Tensor) -> Grads:
    lst, indices = op.inputs[0], op.inputs[1]
    return [_op("UnsortedSegmentSum", g, indices, _length(lst)), None, None]


@RegisterGradient("TensorListResize")
def _resize_grad(op: Operation, g: Tensor) -> Grads:
    return [_op("TensorListResize", g, _length(op.inputs[0])), None]


def _scatter_grad(op: Operation, g: Tensor) -> Grads:
    """The rows scattered get the list's gradient at their index (TensorFlow's gradient: a
    repeated index gives each of its rows the gradient)."""
    got = _op("TensorListGather", g, op.inputs[1], _ANY_SHAPE, element_dtype=g.dtype)
    return [got] + [None] * (len(op.inputs) - 1)


for _name in ("TensorListScatter", "TensorListScatterV2"):
    RegisterGradient(_name)(_scatter_grad)


@RegisterGradient("TensorListScatterIntoExistingList")
def _scatter_existing_grad(op: Operation, g: Tensor) -> Grads:
    lst, tensor, indices = op.inputs
    rows = _op("TensorListGather", g, indices, _ANY_SHAPE, element_dtype=g.dtype)
    rest = _op("TensorListScatterIntoExistingList", g, _op("ZerosLike", tensor), indices)
    return [_op("TensorListResize", rest, _length(lst)), rows, None]


for _name in ("TensorListReserve", "EmptyTensorList", "TensorListLength",
              "TensorListElementShape"):
    NotDifferentiable(_name)
