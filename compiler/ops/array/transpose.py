"""Transpose: permutes the dims of a tensor."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from compiler.ir.op_registry import register_op
from compiler.ops.array.common import _contiguous, _reference, _vector_length, _vector_value


def _check_perm(perm: Sequence[int], rank: int) -> None:
    if len(perm) != rank:
        raise ValueError(f"transpose expects a vector of size {rank}. But input(1) is a vector "
                         f"of size {len(perm)}")
    seen = set()
    for d in perm:
        if not 0 <= d < rank:
            raise ValueError(f"{d} is out of range [0 .. {rank})")
        if d in seen:
            raise ValueError(f"{d} is duplicated in the input.")
        seen.add(d)


def _transpose_shape(ctx):
    s = ctx.input_shape(0)
    n = _vector_length(ctx, 1)
    perm = _vector_value(ctx, 1)
    rank = len(s) if s is not None else n
    if rank is None:
        return [None]
    if perm is None:
        if n is not None and n != rank:
            raise ctx.error(f"transpose expects a vector of size {rank}. But input(1) is a "
                            f"vector of size {n}")
        return [(None,) * rank]
    _check_perm(perm, rank)
    return [tuple(None if s is None else s[p] for p in perm)]


@_reference
def _transpose_kernel(ctx, x, perm):
    perm = [int(p) for p in perm.reshape(-1)]
    _check_perm(perm, x.ndim)
    return _contiguous(np.transpose(x, perm))


register_op("Transpose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
            attrs=["T: {all}", "Tperm: {i32, i64} = i32"], shape=_transpose_shape,
            kernel=_transpose_kernel,
            group="movement", half_native=True,
            doc="Permutes the dims: output dim k is input dim perm[k].")
