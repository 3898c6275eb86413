"""The C lowering of the gradient accumulator ops (``compiler/ops/accumulator.py``): host calls
into the runtime's accumulator.

The C kernels reach the accumulator the reference kernels use through the runtime's host-call
hook (``codegen_templates/c/accumulator.c.j2``), as the checkpoint ops do, so the interpreter
and compiled steps share one accumulator per store. A handle's data is NULL: the accumulator
lives in the runtime, found by the attrs (a JSON literal) each call passes.
"""
from __future__ import annotations

import json
from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.accumulator import _declared_shape, _is_sparse, _source_of, accumulator_key
from compiler.codegen.c_ops.io import c_bytes_literal
from runtime.dtypes import DType


def _attrs_literal(kc: KernelContext) -> str:
    src = _source_of(kc.node)
    shape = _declared_shape(src)
    attrs = {"name": accumulator_key(src), "dtype": src.attrs["dtype"].ir_name,
             "shape": None if shape is None else [d for d in shape],
             "max_accumulated": int(src.attrs.get("max_accumulated", 0)),
             "sparse": _is_sparse(src)}
    return c_bytes_literal(json.dumps(attrs, separators=(",", ":")))


def _host_c(op: str, with_timeout: bool = False):
    def emit(kc: KernelContext) -> str:
        return kc.render("accumulator.c.j2", op=op, attrs_json=_attrs_literal(kc),
                         host_inputs=kc.inputs[1:], with_timeout=with_timeout,
                         i64_code=DType.i64.code)
    return emit


def _accumulator_c(kc: KernelContext) -> str:
    return f"{kc.out.var}.data = NULL;   /* the accumulator lives in the runtime */"


def _take_c_dims(kc: KernelContext) -> List[List[str]]:
    """Static dims as literals; a dim the gradients decide is 0 here (the runtime allocates
    the output and sets its dims)."""
    return [[str(d) if d is not None else "0" for d in o.shape] for o in kc.outputs]


# --- registrations ---------------------------------------------------------------------------
set_c_kernel("ConditionalAccumulator", _accumulator_c)
set_c_kernel("SparseConditionalAccumulator", _accumulator_c)
set_c_kernel("SparseAccumulatorApplyGradient", _host_c("SparseAccumulatorApplyGradient"))
set_c_kernel("SparseAccumulatorTakeGradient",
             _host_c("SparseAccumulatorTakeGradient", with_timeout=True), _take_c_dims)
set_c_kernel("AccumulatorApplyGradient", _host_c("AccumulatorApplyGradient"))
set_c_kernel("AccumulatorTakeGradient", _host_c("AccumulatorTakeGradient", with_timeout=True),
             _take_c_dims)
set_c_kernel("AccumulatorNumAccumulated", _host_c("AccumulatorNumAccumulated"))
set_c_kernel("AccumulatorSetGlobalStep", _host_c("AccumulatorSetGlobalStep"))
set_c_kernel("AccumulatorDropCounts", _host_c("AccumulatorDropCounts"))
set_c_kernel("AccumulatorClose", _host_c("AccumulatorClose"))
