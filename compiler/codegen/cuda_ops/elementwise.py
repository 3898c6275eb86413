"""GPU kernels of the elementwise family: every op with a scalar C expression
(``op.extra["c_expr"]``: unary and binary math, comparisons, Cast, SelectV2, AddN, the
activation gradients), ``Fused`` chains of them, and ``BiasAdd``.

The scalar expressions are the C backend's own, so both targets compute the same thing; the
CUDA side only changes the loop around them (a grid-stride loop, coordinates recovered from the
flat index where an input is broadcast) and how a data error is reported (a device flag).
"""
from __future__ import annotations

from typing import List, Optional

from compiler.codegen.c_ops.fused import _c_expr as fused_c_expr
from compiler.codegen.c_ops.nn import _add_expr
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.elementwise import input_strides, is_scalar, same_dims
from compiler.codegen.kernel_context import KernelContext
from compiler.ops.fused import parse_expr
from compiler.ops.nn import _channel_axis
from compiler.ir.op_registry import all_ops


def emit_cuda_elementwise(kc: KernelContext, expr: str, fail_if: Optional[str] = None,
                          fail_message: str = "") -> str:
    """Host code launching ``out[i] = expr`` over the output, inputs read as ``a0``, ``a1``..."""
    out = kc.out
    launch = CudaLaunch(kc)
    o = launch.ptr(out, writable=True)
    ptrs = [launch.ptr(x) for x in kc.inputs]
    modes: List[str] = []
    for x in kc.inputs:
        modes.append("flat" if same_dims(x, out) else "scalar" if is_scalar(x) else "strided")
    strides = [[launch.value(s) for s in input_strides(out, x)] if m == "strided" else []
               for x, m in zip(kc.inputs, modes)]
    dims = [launch.value(d) for d in out.dims] if "strided" in modes else []
    n = launch.value(out.size)
    report = launch.report(fail_message) if fail_if else ""
    body = kc.render("elementwise.cu.j2", expr=expr, o=o, ptrs=ptrs, modes=modes,
                     strides=strides, dims=dims, n=n, fail_if=fail_if, report=report)
    return launch.launch(body, out.size)


def _from_c_expr(kc: KernelContext) -> str:
    op = kc.node.op
    from compiler.ir.op_registry import get_op
    extra = get_op(op).extra
    c_expr = extra["c_expr"]
    expr = c_expr(kc) if callable(c_expr) else c_expr
    error = extra.get("data_error")
    c_cond = extra.get("c_data_error")
    cond = c_cond(kc) if c_cond is not None else None
    if cond is None:
        return emit_cuda_elementwise(kc, expr)
    return emit_cuda_elementwise(kc, expr, fail_if=cond, fail_message=error.message)


def _fused(kc: KernelContext) -> str:
    return emit_cuda_elementwise(kc, fused_c_expr(kc, parse_expr(kc.attr("expr"))))


def _bias_add(kc: KernelContext) -> str:
    value, bias = kc.inputs
    axis = _channel_axis(kc.attr("data_format"), value.rank)
    channels = value.dim(axis)
    kc.check_dims_equal(channels, bias.dim(0), "bias size differs from the channel dimension")
    launch = CudaLaunch(kc)
    o, x, b = launch.ptr(kc.out, writable=True), launch.ptr(value), launch.ptr(bias)
    inner = launch.value(value.dim_product(axis + 1))
    c = launch.value(channels)
    n = launch.value(kc.out.size)
    add = _add_expr(kc, "v", "c")
    body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
            f"    const {value.ctype} v = {x}[i], c = {b}[(i / {inner}) % {c}];\n"
            f"    {o}[i] = {add};\n}}")
    return launch.launch(body, kc.out.size)


def _strict_shapes(node) -> bool:
    """Equal/NotEqual with ``incompatible_shape_error=False`` answer a scalar for shapes that
    do not broadcast: that case stays on the CPU."""
    return node.attrs.get("incompatible_shape_error", True) is not False


for _name, _op in sorted(all_ops().items()):
    if _op.extra.get("c_expr") is not None and _op.c_kernel is not None:
        register_cuda_kernel(_name, _from_c_expr,
                             supports=_strict_shapes if _name in ("Equal", "NotEqual") else None)
register_cuda_kernel("Fused", _fused)
register_cuda_kernel("BiasAdd", _bias_add)
