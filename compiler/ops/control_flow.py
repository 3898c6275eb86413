"""Dynamic control flow as graph primitives (TensorFlow 1.x, OSDI'16 §3.4): ``Switch``,
``Merge``, ``Enter``, ``Exit``, ``NextIteration`` and ``LoopCond``.

Their meaning is not a function of their inputs alone: a ``Switch`` forwards its data to one
output and sends a *dead* value down the other, a ``Merge`` forwards whichever input is live,
and ``Enter``/``Exit``/``NextIteration`` move values into, out of and around a loop frame.
The interpreter (``compiler.interpreter``) gives them their semantics; the C emitter recovers
``if``/``while`` from them. Their reference kernels below only cover the all-live case, for
tools that run one node on its own.
"""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType
from compiler.ir.op_registry import register_op


def _same(ctx):
    return [ctx.input_type(0)]


def _switch_shape(ctx):
    p = ctx.input_shape(1)
    if p is not None and len(p) != 0:
        raise ctx.error(f"the predicate of a Switch must be a scalar, got shape {list(p)}")
    return [ctx.input_type(0), ctx.input_type(0)]


def _merge_shape(ctx):
    types = ctx.input_types
    shape = types[0].shape
    for t in types[1:]:
        if shape is None or t.shape is None or len(shape) != len(t.shape):
            shape = None
            break
        shape = tuple(a if a == b else None for a, b in zip(shape, t.shape))
    return [TensorType(types[0].dtype, shape), ()]


def _loop_cond_shape(ctx):
    p = ctx.input_shape(0)
    if p is not None and len(p) != 0:
        raise ctx.error(f"the condition of a loop must be a scalar, got shape {list(p)}")
    return [()]


def _switch_kernel(ctx, data, pred):
    return (data, data)                     # live in both only when run out of context


def _merge_kernel(ctx, *values):
    return (values[0], np.array(0, dtype=np.int32))


register_op("Switch", inputs=["data: T", "pred: bool"], outputs=["output_false: T", "output_true: T"],
            attrs=["T: type"], shape=_switch_shape, kernel=_switch_kernel, is_control_flow=True,
            half_native=True,
            doc="Forwards data to output_true if pred else output_false; the other output is dead.")

register_op("Merge", inputs=["inputs: N * T"], outputs=["output: T", "value_index: i32"],
            attrs=["T: type", "N: int >= 1"], shape=_merge_shape, kernel=_merge_kernel,
            is_control_flow=True, half_native=True,
            doc="Forwards its one live input and that input's index; dead if all inputs are.")

register_op("Enter", inputs=["data: T"], outputs=["output: T"],
            attrs=["T: type", "frame_name: string", "is_constant: bool = false",
                   "parallel_iterations: int >= 1 = 10"],
            shape=_same, kernel=lambda ctx, x: x, is_control_flow=True,
            doc="Makes data available in the child frame frame_name (every iteration if "
                "is_constant, else iteration 0).", half_native=True)

register_op("Exit", inputs=["data: T"], outputs=["output: T"], attrs=["T: type"],
            shape=_same, kernel=lambda ctx, x: x, is_control_flow=True,
            doc="Makes a value of a loop frame available in its parent frame.", half_native=True)

register_op("NextIteration", inputs=["data: T"], outputs=["output: T"], attrs=["T: type"],
            shape=_same, kernel=lambda ctx, x: x, is_control_flow=True, half_native=True,
            doc="Makes a value available to the next iteration of its frame (the loop's back edge).")

register_op("LoopCond", inputs=["input: bool"], outputs=["output: bool"],
            shape=_loop_cond_shape, kernel=lambda ctx, x: x, is_control_flow=True,
            doc="The condition of a loop: its Switches forward into the body while it is true.")
