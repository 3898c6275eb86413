"""InplaceUpdate, InplaceAdd, InplaceSub: TensorFlow's row updates ``y = x; y[i] op= v``.

``x`` has rank 1 or more, ``i`` is an int32 vector of row indices into ``x``'s first dim and
``v`` holds one row per index (``v.shape == [len(i)] + x.shape[1:]``). As in TensorFlow's
kernels (``inplace_ops.cc``), an index out of ``[0, x.shape[0])`` is an error naming it, rows
are processed in order (a repeated index: the last update wins; adds and subtracts all
apply), and the result is functional: ``x`` itself is never changed where anyone else can see
it. The C kernel (``compiler/codegen/c_ops/inplace.py``) writes the rows into ``x``'s buffer
when nothing else reads it (a while loop's accumulator: one row written per iteration, not
the whole tensor copied) and into a copy otherwise.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str

OPS = {"InplaceUpdate": "update", "InplaceAdd": "add", "InplaceSub": "sub"}


def _shape(ctx) -> list:
    x, i, v = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
    if i is not None and len(i) != 1:
        raise ctx.error(f"i must be a vector, got shape {shape_str(i)}")
    if x is not None and len(x) == 0:
        raise ctx.error("x must have rank 1 or more (its rows are updated)")
    if x is not None and v is not None:
        if len(x) != len(v):
            raise ctx.error(f"x {shape_str(x)} and v {shape_str(v)} differ in rank")
        for k in range(1, len(x)):
            if x[k] is not None and v[k] is not None and x[k] != v[k]:
                raise ctx.error(f"x {shape_str(x)} and v {shape_str(v)} differ at dim {k}")
    if i is not None and v is not None and None not in (i[0], v[0]) and i[0] != v[0]:
        raise ctx.error(f"i has {i[0]} indices but v has {v[0]} rows")
    return [x]


def _kernel_for(mode: str):
    def kernel(ctx, x, i, v):
        if i.ndim != 1:
            raise ExecutionError(f"i must be a vector, got shape {list(i.shape)}", ctx.node)
        if x.ndim == 0 or x.ndim != v.ndim or x.shape[1:] != v.shape[1:]:
            raise ExecutionError(f"x {list(x.shape)} and v {list(v.shape)} shapes don't match",
                                 ctx.node)
        if v.shape[0] != i.shape[0]:
            raise ExecutionError(f"i has {i.shape[0]} indices but v has {v.shape[0]} rows",
                                 ctx.node)
        rows = x.shape[0]
        bad = np.nonzero((i < 0) | (i >= rows))[0]
        if bad.size:
            k = int(bad[0])
            raise ExecutionError(f"i[{k}] = {int(i[k])} is not in [0, {rows})", ctx.node)
        y = np.array(x, copy=True)
        for k, r in enumerate(i.astype(np.int64)):
            if mode == "update":
                y[r] = v[k]
            elif mode == "add":
                y[r] = y[r] + v[k]
            else:
                y[r] = y[r] - v[k]
        return y
    kernel.__name__ = f"_{mode}_kernel"
    return kernel


_DOCS = {"update": "``y = x; y[i] = v``: rows of x replaced by those of v.",
         "add": "``y = x; y[i] += v``: rows of v added to rows of x.",
         "sub": "``y = x; y[i] -= v``: rows of v subtracted from rows of x."}

for _name, _mode in OPS.items():
    register_op(_name, inputs=["x: T", "i: i32", "v: T"], outputs=["y: T"],
                attrs=["T: {all}" if _mode == "update" else "T: {numeric}"], shape=_shape,
                kernel=_kernel_for(_mode), c_alias=0, group="movement", doc=_DOCS[_mode] + " An index out of range is an error.")
