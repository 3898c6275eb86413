"""Scans along one axis: Cumsum and Cumprod (TensorFlow's ops; C lowering in
``compiler/codegen/c_ops/scan.py``).

``Cumsum(x, axis)`` gives at each position the sum of ``x`` along ``axis`` up to and including
that position; ``exclusive=true`` leaves the position itself out (the first result is 0, or 1
for Cumprod) and ``reverse=true`` scans from the end. ``axis`` is a 0-D int32/int64 tensor in
``[-rank, rank)``, checked at run time when it is not a constant (TF: a scalar input of rank
0 has no valid axis). Each result is accumulated in order, in the input's type (as TF's CPU
kernel): integers wrap, NaN and inf propagate.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str


def scan_axis(rank: int, axis: int, fail: Callable[[str], Exception]) -> int:
    """``axis`` normalized to ``[0, rank)``; ``fail(message)`` makes the error to raise."""
    if not -rank <= axis < rank:
        raise fail(f"Expected scan axis in the range [{-rank}, {rank}), but got {axis}")
    return axis + rank if axis < 0 else axis


def _scan_shape(ctx):
    x, axis = ctx.input_shape(0), ctx.input_shape(1)
    if axis is not None and len(axis) != 0:
        raise ctx.error(f"axis must be a scalar, got shape {shape_str(axis)}")
    value = ctx.input_value(1)
    if value is not None and x is not None:
        scan_axis(len(x), int(value), ctx.error)
    return [x]


def _scan_kernel(ufunc: np.ufunc, identity: int) -> Callable:
    def kernel(ctx, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        if np.ndim(axis) != 0:
            raise ExecutionError(f"axis must be a scalar, got shape {list(np.shape(axis))}",
                                 ctx.node)
        k = scan_axis(x.ndim, int(axis), lambda m: ExecutionError(m, ctx.node))
        if ctx.attrs["reverse"]:
            x = np.flip(x, k)
        out = ufunc.accumulate(x, axis=k, dtype=x.dtype) if x.size else x.copy()
        if ctx.attrs["exclusive"] and x.shape[k] > 0:
            first = np.full_like(np.take(out, [0], axis=k), identity)
            out = np.concatenate([first, np.take(out, np.arange(x.shape[k] - 1), axis=k)], k)
        if ctx.attrs["reverse"]:
            out = np.flip(out, k)
        return np.ascontiguousarray(out)
    return kernel


for _name, _ufunc, _identity, _what in (("Cumsum", np.add, 0, "sum"),
                                        ("Cumprod", np.multiply, 1, "product")):
    register_op(_name, inputs=["x: T", "axis: Tidx"], outputs=["out: T"],
                attrs=["exclusive: bool = false", "reverse: bool = false", "T: {numeric}",
                       "Tidx: {index}"],
                shape=_scan_shape, kernel=_scan_kernel(_ufunc, _identity), group="other",
                doc=f"The running {_what} of x along axis (exclusive: without the element "
                    f"itself; reverse: from the end); integers wrap.")
