"""The C lowering of fused batch normalization (``compiler/ops/batch_norm.py``): the
FusedBatchNorm{,V2,V3} forward ops and their gradients, each one pass of per-channel sums (two
for the training statistics) and one elementwise pass, in double
(``codegen_templates/c/batch_norm.c.j2``). The layout is shared with the CUDA lowering.
"""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.batch_norm import FORMATS, channel_axis
from runtime.dtypes import DType

FORWARD = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
GRAD = ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")

_CHANNELS_MSG = "{} must have the same number of elements as the channels of x, got %lld and %lld"


def layout(kc: KernelContext, x_index: int) -> Tuple[str, str, str]:
    """(outer, channels, inner) C expressions of input ``x_index`` around its channel axis,
    after a compile-time check of its rank."""
    fmt = kc.attr("data_format")
    x = kc.inputs[x_index]
    rank = FORMATS[fmt][0] if fmt in FORMATS else None
    if rank is None or x.rank != rank:
        raise kc.error(f"input must be {rank}-dimensional for data_format {fmt}, got rank "
                       f"{x.rank}")
    axis = channel_axis(fmt)
    return x.dim_product(0, axis), x.dim(axis), x.dim_product(axis + 1)


def _check_channels(kc: KernelContext, i: int, name: str, channels: str,
                    may_be_empty: bool = False) -> None:
    n = kc.inputs[i].dim(0)
    if may_be_empty and not (n.isdigit() and channels.isdigit() and n == channels):
        if n == "0":
            return
        kc.check(f"{n} == {channels} || {n} == 0", _CHANNELS_MSG.format(name),
                 f"(long long)({n})", f"(long long)({channels})")
        return
    kc.check_dims_equal(n, channels, name + " must have the same number of elements as the "
                                            "channels of x")


def check_forward(kc: KernelContext) -> Tuple[str, str, str]:
    """The run-time checks of a forward node; its layout."""
    outer, channels, inner = layout(kc, 0)
    _check_channels(kc, 1, "scale", channels)
    _check_channels(kc, 2, "offset", channels)
    empty_ok = bool(kc.attr("is_training")) and float(kc.attr("exponential_avg_factor")) == 1.0
    _check_channels(kc, 3, "mean", channels, empty_ok)
    _check_channels(kc, 4, "variance", channels, empty_ok)
    return outer, channels, inner


def check_grad(kc: KernelContext) -> Tuple[str, str, str]:
    """The run-time checks of a gradient node; its layout."""
    outer, channels, inner = layout(kc, 1)
    dy, x = kc.inputs[0], kc.inputs[1]
    if dy.rank != x.rank:
        raise kc.error(f"x and y_backprop must have the same rank, got {x.rank} and {dy.rank}")
    for d in range(x.rank):
        kc.check_dims_equal(dy.dim(d), x.dim(d), f"x and y_backprop differ in dim {d}")
    for i, name in ((2, "scale"), (3, "reserve_space_1"), (4, "reserve_space_2")):
        _check_channels(kc, i, name, channels)
    return outer, channels, inner


def forward_dims(kc: KernelContext) -> List[List[str]]:
    _, channels, _ = layout(kc, 0)
    dims = [kc.inputs[0].dims] + [[channels]] * 4
    return dims + ([[]] if kc.node.op == "FusedBatchNormV3" else [])


def grad_dims(kc: KernelContext) -> List[List[str]]:
    _, channels, _ = layout(kc, 1)
    return [kc.inputs[1].dims, [channels], [channels], ["0"], ["0"]]


def _emit_forward(kc: KernelContext) -> str:
    outer, channels, inner = check_forward(kc)
    factor = float(kc.attr("exponential_avg_factor"))
    return kc.render("batch_norm.c.j2", part="forward", outer=outer, channels=channels,
                     inner=inner, training=bool(kc.attr("is_training")), factor=factor,
                     rate=kc.literal(factor, DType.f64), keep=kc.literal(1.0 - factor, DType.f64),
                     epsilon=kc.literal(float(kc.attr("epsilon")), DType.f64),
                     reserve_3=kc.node.op == "FusedBatchNormV3")


def _emit_grad(kc: KernelContext) -> str:
    outer, channels, inner = check_grad(kc)
    return kc.render("batch_norm.c.j2", part="grad", outer=outer, channels=channels,
                     inner=inner, training=bool(kc.attr("is_training")),
                     epsilon=kc.literal(float(kc.attr("epsilon")), DType.f64))


for _name in FORWARD:
    set_c_kernel(_name, _emit_forward, forward_dims)
for _name in GRAD:
    set_c_kernel(_name, _emit_grad, grad_dims)
