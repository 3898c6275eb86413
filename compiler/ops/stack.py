"""Stacks of tensors (TensorFlow's ``StackV2`` family): what a gradient loop uses to read the
values its forward loop saved, one per iteration, in reverse order.

``StackV2`` makes a new, empty stack each time it runs (its handle lives for the step);
``StackPushV2`` copies a tensor onto it and forwards the tensor; ``StackPopV2`` takes the
top element off (an ``OutOfRangeError``-like error if it is empty); ``StackCloseV2`` drops
what is left. Elements may have different shapes (a loop whose batch size is only known at
run time); the C stack keeps them in one buffer that grows by doubling
(``compiler/codegen/c_ops/stack.py``).
"""
from __future__ import annotations

from typing import List

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import TensorType, shape_str
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType


class PyStack:
    """The interpreter's stack: a list of owned copies."""

    def __init__(self, name: str, max_size: int, dtype: DType):
        self.name, self.max_size, self.dtype = name, max_size, dtype
        self.elems: List[np.ndarray] = []

    def __repr__(self) -> str:
        return f"PyStack({self.name!r}, {len(self.elems)} elements)"


# --- shape functions -----------------------------------------------------------------------
def _stack_shape(ctx):
    s = ctx.input_shape(0)
    if s is not None and len(s) != 0:
        raise ctx.error(f"max_size must be a scalar, got shape {list(s)}")
    return [TensorType(DType.resource, ())]


def _push_shape(ctx):
    return [ctx.input_type(1)]


def _pop_shape(ctx):
    return [TensorType(ctx.attr("elem_type"), ctx.attr("elem_shape"))]


# --- reference kernels ---------------------------------------------------------------------
def _stack_of(ctx, handle) -> PyStack:
    h = handle[()] if isinstance(handle, np.ndarray) else handle
    if not isinstance(h, PyStack):
        raise ExecutionError("input 0 is not a stack handle (made by StackV2)", ctx.node)
    return h


def _stack_kernel(ctx, max_size):
    name = ctx.attrs.get("stack_name") or ctx.node.name
    return [np.array(PyStack(name, int(max_size), ctx.attrs["elem_type"]), dtype=object)]


def _push_kernel(ctx, handle, elem):
    s = _stack_of(ctx, handle)
    if s.max_size > 0 and len(s.elems) >= s.max_size:
        raise ExecutionError(f"stack '{s.name}' is full (max_size {s.max_size})", ctx.node)
    s.elems.append(np.array(elem, copy=True))
    return [elem]


def _pop_kernel(ctx, handle):
    s = _stack_of(ctx, handle)
    if not s.elems:
        raise ExecutionError(f"pop from the empty stack '{s.name}'", ctx.node)
    value = s.elems.pop()
    want = ctx.attrs.get("elem_shape")
    if want is not None and (len(want) != value.ndim or any(
            w is not None and w != v for w, v in zip(want, value.shape))):
        raise ExecutionError(f"popped an element of shape {list(value.shape)}; the pop expects "
                             f"{shape_str(want)}", ctx.node)
    return [value.astype(ctx.out_dtype(0), copy=False)]


def _close_kernel(ctx, handle):
    _stack_of(ctx, handle).elems.clear()
    return []


# --- registrations ---------------------------------------------------------------------------
register_op("StackV2", inputs=["max_size: i32"], outputs=["handle: resource"],
            attrs=["elem_type: type", 'stack_name: string = ""'],
            shape=_stack_shape, kernel=_stack_kernel, stateful=True, group="source",
            half_native=True,
            doc="A new, empty stack of elem_type tensors (max_size <= 0: no limit), for this step.")

register_op("StackPushV2", inputs=["handle: resource", "elem: T"], outputs=["output: T"],
            attrs=["T: type", "swap_memory: bool = false"],
            shape=_push_shape, kernel=_push_kernel, c_alias=1, stateful=True,
            doc="Copies elem onto the stack and forwards it.", half_native=True)

register_op("StackPopV2", inputs=["handle: resource"], outputs=["elem: elem_type"],
            attrs=["elem_type: type", "elem_shape: shape = [*]"],
            shape=_pop_shape, kernel=_pop_kernel, stateful=True, half_native=True,
            doc="Takes the top element off the stack (elem_shape: what is known of its shape).")

register_op("StackCloseV2", inputs=["handle: resource"], outputs=[],
            shape=lambda ctx: [], kernel=_close_kernel, stateful=True,
            doc="Drops the stack's elements.")
