"""Elementwise math: unary and binary ops with numpy broadcasting, Cast, SelectV2, AddN.

Each op is one registration: signature, shape function, numpy reference kernel and the C
scalar expression rendered into the shared elementwise kernel (``codegen/elementwise.py``).
C expressions read their inputs as ``a0``, ``a1``, ...
"""
from __future__ import annotations

import numpy as np

from compiler.codegen.elementwise import broadcast_output_dims, emit_elementwise
from compiler.ir.types import broadcast_shapes
from compiler.ops.registry import register_op


def _same_shape(ctx):
    return [ctx.input_shape(0)]


def _same_dims(kc):
    return [kc.inputs[0].dims]


def _broadcast_shape(ctx):
    return [broadcast_shapes([t.shape for t in ctx.input_types])]


def unary(name, np_fn, c_expr, types="numeric", out=None, doc=""):
    """Register an elementwise unary op. ``c_expr(kc)`` returns the C expression over ``a0``."""
    outputs = [f"y: {out}"] if out else ["y: T"]
    return register_op(
        name, inputs=["x: T"], outputs=outputs, attrs=[f"T: {{{types}}}"], shape=_same_shape,
        kernel=lambda ctx, x: np_fn(x),
        c_kernel=lambda kc: emit_elementwise(kc, c_expr(kc) if callable(c_expr) else c_expr),
        c_output_dims=_same_dims, group="elementwise", doc=doc)


def binary(name, np_fn, c_expr, types="numeric", out=None, commutative=False, doc=""):
    """Register an elementwise binary op with broadcasting. C expression over ``a0``, ``a1``."""
    outputs = [f"z: {out}"] if out else ["z: T"]
    return register_op(
        name, inputs=["x: T", "y: T"], outputs=outputs, attrs=[f"T: {{{types}}}"],
        shape=_broadcast_shape, kernel=lambda ctx, x, y: np_fn(x, y),
        c_kernel=lambda kc: emit_elementwise(kc, c_expr(kc) if callable(c_expr) else c_expr),
        c_output_dims=broadcast_output_dims, group="elementwise", commutative=commutative, doc=doc)


# --- unary -------------------------------------------------------------------------------
unary("Neg", np.negative, "-a0", types="signed")
unary("Relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), "a0 > 0 ? a0 : 0", types="numeric")
unary("Exp", np.exp, lambda kc: f"{kc.math('exp', kc.out.dtype)}(a0)", types="float")

# --- binary ------------------------------------------------------------------------------
binary("AddV2", np.add, "a0 + a1", commutative=True)
binary("Mul", np.multiply, "a0 * a1", commutative=True)
