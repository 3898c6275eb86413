"""Gradients of variable reads: to the handle, dense for ReadVariableOp and sparse
(IndexedSlices of the rows read) for ResourceGather. Updates and handles have none."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import NotDifferentiable, RegisterGradient
from dsl.indexed_slices import IndexedSlices
from dsl.ops import apply_op, constant
from dsl.tensor import Operation, Tensor

for _op_type in ("VarHandleOp", "VarIsInitializedOp", "AssignVariableOp", "AssignAddVariableOp",
                 "AssignSubVariableOp", "ResourceScatterAdd", "ResourceScatterSub",
                 "ResourceScatterUpdate"):
    NotDifferentiable(_op_type)


@RegisterGradient("ReadVariableOp")
def _read_grad(op: Operation, g) -> List[Optional[object]]:
    return [g]


def variable_shape(handle: Tensor, out_type) -> object:
    """The shape of the variable behind ``handle``: a list when declared, else a tensor."""
    from compiler.ops.state import declared_shape, handle_source
    shape = declared_shape(handle.output)
    if shape is not None and all(d is not None for d in shape):
        return constant(np.array(shape, out_type.np))
    source = handle_source(handle.output)
    if source is None:
        raise ValueError(f"cannot tell the dtype of the variable behind {handle.name}")
    read = apply_op("ReadVariableOp", [handle], {"dtype": source.attrs["dtype"]})
    return apply_op("Shape", [read], {"out_type": out_type})


@RegisterGradient("ResourceGather")
def _resource_gather_grad(op: Operation, g: Tensor) -> List[Optional[object]]:
    """The rows read get the gradient: IndexedSlices(g as rows, flat indices)."""
    handle, indices = op.inputs
    index = indices.dtype
    dense_shape = variable_shape(handle, index)
    inner = apply_op("Slice", [dense_shape, np.array([1], index.np), np.array([-1], index.np)], {})
    flat = apply_op("Reshape", [indices, np.array([-1], index.np)], {})
    count = apply_op("Reshape", [apply_op("Size", [indices], {"out_type": index}),
                                 np.array([1], index.np)], {})
    values = apply_op("Reshape", [g, apply_op("ConcatV2", [[count, inner], 0], {})], {})
    return [IndexedSlices(values, flat, dense_shape), None]
