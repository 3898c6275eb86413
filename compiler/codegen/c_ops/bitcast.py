"""The C lowering of Bitcast (``compiler/ops/bitcast.py``): a copy of the bytes (a last dim
that must match the size ratio is checked at run time when it is not static)."""
from __future__ import annotations

from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _bitcast_dims(kc: KernelContext) -> List[List[str]]:
    x = kc.inputs[0]
    a, b = kc.attr("T").itemsize, kc.attr("type").itemsize
    if a == b:
        return [x.dims]
    if a > b:
        return [x.dims + [str(a // b)]]
    if x.rank == 0:
        raise kc.error(f"Cannot bitcast from {kc.attr('T')} to {kc.attr('type')}: a scalar "
                       f"has no last dim of {b // a} elements")
    kc.check_dims_equal(x.dim(-1), str(b // a),
                        f"Cannot bitcast from {kc.attr('T')} to {kc.attr('type')}: the last "
                        "dim must be the size ratio")
    return [x.dims[:-1]]


def _bitcast_c(kc: KernelContext) -> str:
    x, out = kc.inputs[0], kc.out
    return (f"if ({x.size} > 0) memcpy({out.var}.data, {x.var}.data, "
            f"(size_t)({x.size}) * sizeof({x.ctype}));")


set_c_kernel("Bitcast", _bitcast_c, _bitcast_dims)
