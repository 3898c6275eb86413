"""``_MatMulAssignSub``: ``var -= scale * op(a) @ op(b)`` as one BLAS gemm into the variable.

Made by the ``fuse-updates`` pass from a dense gradient-descent step on a weight matrix,
``AssignSubVariableOp(var, Mul(MatMul(a, b), scale))``, when the product and the scaled
product have no other use: the gemm accumulates straight into the variable's buffer
(``alpha = -scale``, ``beta = 1``), so neither the gradient nor the scaled gradient is ever
written out (for a 784x256 weight, two 800 KB buffers a step fewer). The numpy reference
computes the two steps as written; results agree to rounding (the gemm adds the products in
another order).
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import shape_str
from compiler.ops.nn import _matmul_ref
from compiler.ir.op_registry import register_op
from compiler.ops.state import _variable, declared_shape, update_value


def _shape(ctx) -> list:
    a, b, scale = ctx.input_shape(1), ctx.input_shape(2), ctx.input_shape(3)
    for i, s in ((1, a), (2, b)):
        if s is not None and len(s) != 2:
            raise ctx.error(f"input {i} must be a matrix (rank 2), got shape {shape_str(s)}")
    if scale is not None and len(scale) != 0:
        raise ctx.error(f"scale must be a scalar, got shape {shape_str(scale)}")
    if a is None or b is None:
        return []
    m, k_a = (a[1], a[0]) if ctx.attr("transpose_a") else (a[0], a[1])
    k_b, n = (b[1], b[0]) if ctx.attr("transpose_b") else (b[0], b[1])
    if k_a is not None and k_b is not None and k_a != k_b:
        raise ctx.error(f"matrix size-incompatible: inner dimensions {k_a} and {k_b} differ")
    declared = declared_shape(ctx.node.inputs[0])
    if declared is not None and any(d is not None and e is not None and d != e
                                    for d, e in zip(declared, (m, n))):
        raise ctx.error(f"the product has shape {shape_str((m, n))}; the variable is declared "
                        f"{shape_str(declared)}")
    return []


def _kernel(ctx, handle, a, b, scale):
    var = _variable(ctx, handle)
    product = _matmul_ref(ctx, a, b)          # outside the variable's lock

    def compute(cur):
        if cur.shape != product.shape:
            raise ExecutionError(f"the update's shape {list(product.shape)} does not match "
                                 f"variable '{var.info.name}' of shape {list(cur.shape)}",
                                 ctx.node)
        return (cur - product * scale).astype(cur.dtype)
    update_value(ctx, var, compute)           # atomic per variable
    return []


register_op("_MatMulAssignSub", inputs=["resource: resource", "a: T", "b: T", "scale: T"],
            attrs=["transpose_a: bool = false", "transpose_b: bool = false", "T: {f32, f64}"],
            shape=_shape, kernel=_kernel, stateful=True,
            doc="variable -= scale * op(a) @ op(b), in place (one gemm with beta = 1).")
