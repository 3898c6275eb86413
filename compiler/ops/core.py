"""Sources, identities and shape queries: Const, Placeholder, Identity, Shape, ... and the
step-graph markers ``_Retval`` (a fetch) and ``_Sink`` (targets run for their effects)."""
from __future__ import annotations

import numpy as np

from compiler.ir.types import TensorType, merge_shapes
from compiler.ir.op_registry import register_op


def _const_shape(ctx):
    v = ctx.attr("value")
    return [TensorType(ctx.attr("dtype"), v.shape)]


register_op("Const", outputs=["output: dtype"], attrs=["value: tensor", "dtype: type"],
            shape=_const_shape, kernel=lambda ctx: ctx.attrs["value"].copy(), group="source",
            doc="A constant tensor; its value is baked into generated code.", half_native=True)

register_op("Placeholder", outputs=["output: dtype"], attrs=["dtype: type", "shape: shape = [*]"],
            shape=lambda ctx: [ctx.attr("shape")], group="source",
            doc="A value fed at run time.", half_native=True)


def _pwd_shape(ctx):
    declared = ctx.attr("shape")
    have = ctx.input_shape(0)
    if declared is not None and have is not None:
        merge_shapes(declared, have)      # raises if incompatible
    return [declared]


register_op("PlaceholderWithDefault", inputs=["input: dtype"], outputs=["output: dtype"],
            attrs=["dtype: type", "shape: shape"], shape=_pwd_shape,
            kernel=lambda ctx, x: x, c_alias=0, group="movement",
            doc="Its input unless fed.", half_native=True)

for _name in ("Identity", "StopGradient", "Snapshot"):
    register_op(_name, inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
                shape=lambda ctx: [ctx.input_shape(0)], kernel=lambda ctx, x: x,
                c_alias=0, group="movement", half_native=True)

register_op("NoOp", group="other", shape=lambda ctx: [], kernel=lambda ctx: [],
            doc="Does nothing; useful as a target that groups control dependencies.")

register_op("_Retval", inputs=["input: T"], attrs=["T: type", "index: int >= 0"],
            shape=lambda ctx: [], kernel=lambda ctx, x: [], stateful=True, group="other",
            half_native=True,
            doc="Marks a fetched tensor of a compiled step (fetch number ``index``).")

register_op("_Sink", shape=lambda ctx: [], kernel=lambda ctx: [], stateful=True, group="other",
            doc="Its control inputs are a step's targets: run for their effects.")


# --- shape queries -----------------------------------------------------------------------
def _shape_shape(ctx):
    s = ctx.input_shape(0)
    return [(None,) if s is None else (len(s),)]


register_op("Shape", inputs=["input: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: {i32, i64} = i32"], shape=_shape_shape,
            kernel=lambda ctx, x: np.array(x.shape, dtype=ctx.attrs["out_type"].np),
            group="other", half_native=True)

register_op("Size", inputs=["input: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: {i32, i64} = i32"], shape=lambda ctx: [()],
            kernel=lambda ctx, x: np.array(x.size, dtype=ctx.attrs["out_type"].np),
            group="other", half_native=True)

register_op("Rank", inputs=["input: T"], outputs=["output: i32"], attrs=["T: type"],
            shape=lambda ctx: [()], kernel=lambda ctx, x: np.array(x.ndim, dtype=np.int32),
            group="other", half_native=True)
