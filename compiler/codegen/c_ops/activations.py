"""The C lowering of ``compiler/ops/activations.py``: Softsign, Selu, LeakyRelu and their
gradient ops, each a scalar C expression over ``a0``, ``a1`` (kept as ``c_expr`` for fused
kernels and the CUDA backend)."""
from __future__ import annotations

from compiler.codegen.c_ops.math import lower_unary
from compiler.codegen.c_ops.nn_grad import _grad_op, _same_dims2
from compiler.codegen.elementwise import emit_elementwise
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.activations import SELU_SCALE, SELU_SCALE_ALPHA


def _lit(kc: KernelContext, value: float) -> str:
    return kc.literal(value, kc.out.dtype)


def _c_softsign(kc: KernelContext) -> str:
    return f"a0 / ({kc.math('fabs', kc.out.dtype)}(a0) + {_lit(kc, 1)})"


def _c_selu(kc: KernelContext) -> str:
    expm1 = kc.math("expm1", kc.out.dtype)
    return (f"a0 < 0 ? {_lit(kc, SELU_SCALE_ALPHA)} * {expm1}(a0) : "
            f"{_lit(kc, SELU_SCALE)} * a0")


def _c_leaky_relu(kc: KernelContext) -> str:
    return f"a0 > 0 ? a0 : a0 * {_lit(kc, kc.attr('alpha'))}"


def _c_leaky_relu_grad(kc: KernelContext) -> str:
    return f"a1 > 0 ? a0 : a0 * {_lit(kc, kc.attr('alpha'))}"


def _c_softsign_grad(kc: KernelContext) -> str:
    d = f"({kc.math('fabs', kc.out.dtype)}(a1) + {_lit(kc, 1)})"
    return f"a0 / ({d} * {d})"


def _c_selu_grad(kc: KernelContext) -> str:
    return f"a1 < 0 ? a0 * (a1 + {_lit(kc, SELU_SCALE_ALPHA)}) : a0 * {_lit(kc, SELU_SCALE)}"


lower_unary("Softsign", _c_softsign)
lower_unary("Selu", _c_selu)
lower_unary("LeakyRelu", _c_leaky_relu)
_grad_op("SoftsignGrad", _c_softsign_grad)
_grad_op("SeluGrad", _c_selu_grad)
set_c_kernel("LeakyReluGrad", lambda kc: emit_elementwise(kc, _c_leaky_relu_grad(kc)),
             _same_dims2, c_expr=_c_leaky_relu_grad)
