"""The C lowering of Transpose: a strided copy (the perm must be a constant)."""
from __future__ import annotations

from typing import List

import numpy as np

from compiler.codegen.c_ops.array.common import _contiguous_strides, _dim, _emit_copy, _values
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import set_c_kernel


def _constant_perm(kc: KernelContext) -> List[int]:
    v = constant_value(kc.node.inputs[1])
    if v is None:
        raise kc.static_error("the C backend needs a constant perm for Transpose")
    return [int(p) for p in np.reshape(v, -1)]


def _transpose_c_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    return [[x.dim(p) for p in _constant_perm(kc)]]


def _transpose_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    perm = _constant_perm(kc)
    dims = [_dim(x, p) for p in perm]
    x_strides = _contiguous_strides(_values(x))
    return _emit_copy(kc, dims, x, 0, [x_strides[p] for p in perm],
                      out, 0, _contiguous_strides(dims))


set_c_kernel("Transpose", _transpose_c, _transpose_c_dims)
