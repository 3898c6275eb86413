"""GPU kernels of fused batch normalization (FusedBatchNorm, V2, V3 and their gradients), every
data format: one block per channel, its statistics as block reductions in double, then the
block normalizes (or differentiates) the channel's elements
(``codegen_templates/cuda/batch_norm.cu.j2``). The layout, output dims and run-time shape
checks are the C lowering's (``compiler/codegen/c_ops/batch_norm.py``)."""
from __future__ import annotations

from compiler.codegen.c_ops.batch_norm import (FORWARD, GRAD, check_forward, check_grad,
                                               forward_dims, grad_dims)
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.cuda_ops.nn import _blocks, _helper
from compiler.codegen.kernel_context import KernelContext
from runtime.dtypes import DType


def _forward(kc: KernelContext) -> str:
    outer, channels, inner = check_forward(kc)
    _helper(kc)
    launch = CudaLaunch(kc, "batch_norm")
    v = launch.value
    x, scale, offset, mean, var = kc.inputs
    outs = kc.outputs
    factor = float(kc.attr("exponential_avg_factor"))
    body = kc.render(
        "batch_norm.cu.j2", part="forward", T=x.ctype, U=scale.ctype,
        outer=v(outer), channels=v(channels), inner=v(inner),
        training=bool(kc.attr("is_training")), factor=factor,
        rate=kc.literal(factor, DType.f64), keep=kc.literal(1.0 - factor, DType.f64),
        epsilon=kc.literal(float(kc.attr("epsilon")), DType.f64),
        x=launch.ptr(x), scale=launch.ptr(scale), offset=launch.ptr(offset),
        mean_in=launch.ptr(mean), var_in=launch.ptr(var),
        y=launch.ptr(outs[0], writable=True), batch_mean=launch.ptr(outs[1], writable=True),
        batch_var=launch.ptr(outs[2], writable=True),
        saved_mean=launch.ptr(outs[3], writable=True),
        saved_var=launch.ptr(outs[4], writable=True),
        reserve_3=launch.ptr(outs[5], writable=True) if len(outs) == 6 else "")
    return launch.launch(body, channels, threads=_blocks(channels))


def _grad(kc: KernelContext) -> str:
    outer, channels, inner = check_grad(kc)
    _helper(kc)
    launch = CudaLaunch(kc, "batch_norm_grad")
    v = launch.value
    dy, x, scale, mean, var = kc.inputs[:5]
    outs = kc.outputs
    body = kc.render(
        "batch_norm.cu.j2", part="grad", T=x.ctype, U=outs[1].ctype,
        outer=v(outer), channels=v(channels), inner=v(inner),
        training=bool(kc.attr("is_training")),
        epsilon=kc.literal(float(kc.attr("epsilon")), DType.f64),
        dy=launch.ptr(dy), x=launch.ptr(x), scale=launch.ptr(scale), mean=launch.ptr(mean),
        var=launch.ptr(var), dx=launch.ptr(outs[0], writable=True),
        d_scale=launch.ptr(outs[1], writable=True), d_offset=launch.ptr(outs[2], writable=True))
    return launch.launch(body, channels, threads=_blocks(channels))


for _op in FORWARD:
    register_cuda_kernel(_op, _forward, output_dims=forward_dims)
for _op in GRAD:
    register_cuda_kernel(_op, _grad, output_dims=grad_dims)
