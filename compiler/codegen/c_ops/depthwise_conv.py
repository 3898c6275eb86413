"""The C lowering of depthwise convolution (``compiler/ops/depthwise_conv.py``):
``DepthwiseConv2dNative`` and its two backprops, each one call of a module helper
(``codegen_templates/c/depthwise_conv.c.j2``): direct NHWC loops whose innermost loop runs over
a pixel's channels and vectorizes, one helper per dtype and channel multiplier (a literal when
the filter is static), not a Conv2D per channel. NCHW operands go through transposed copies.
A large forward one in NHWC runs on oneDNN where it is installed (``conv_engine.py``).

The geometry (``depthwise_geometry``) is shared with the CUDA lowering
(``compiler/codegen/cuda_ops/depthwise_conv.py``).
"""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops import conv_engine
from compiler.codegen.c_ops.conv import (CGeometry, _sizes_c, add_epilogue, check_output_sizes,
                                         epilogue_args)
from compiler.codegen.c_ops.nn import GEMM_PARALLEL_MIN_WORK
from compiler.codegen.c_ops.reduction import module_helper
from compiler.codegen.kernel_context import KernelContext as CKernelContext, product
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.conv import _geometry, _nhwc_attrs

_KINDS = {"DepthwiseConv2dNative": "fwd", "DepthwiseConv2dNativeBackpropInput": "bwd_input",
          "DepthwiseConv2dNativeBackpropFilter": "bwd_filter",
          "_FusedDepthwiseConv2dNative": "fwd"}       # with its epilogue (c_ops/conv_fused.py)
# (data inputs of the helper call, in order), per kind
_ARGS = {"fwd": (0, 1), "bwd_input": (2, 1), "bwd_filter": (0, 2)}


def is_nchw(kc: CKernelContext) -> bool:
    return kc.attrs.get("data_format", "NHWC") == "NCHW"


def _to_nhwc(dims: List[str], nchw: bool) -> List[str]:
    return [dims[0], dims[2], dims[3], dims[1]] if nchw else list(dims)


def _from_nhwc(dims: List[str], nchw: bool) -> List[str]:
    return [dims[0], dims[3], dims[1], dims[2]] if nchw else list(dims)


def depthwise_geometry(kc: CKernelContext) -> CGeometry:
    """The NHWC geometry of the node (``o`` is the channel multiplier M); the first call adds
    the run-time checks of all the shapes."""
    cached = getattr(kc, "_depthwise_geometry", None)
    if cached is None:
        kc._depthwise_geometry = cached = _new_geometry(kc)
    return cached


def _new_geometry(kc: CKernelContext) -> CGeometry:
    kind = _KINDS[kc.node.op]
    nchw = is_nchw(kc)
    g = _geometry(_nhwc_attrs(kc.attrs), kc.error)
    ins = kc.inputs
    module_helper(kc, "flowc_conv_window", kc.render("conv.c.j2", part="window"))
    if kind == "fwd":
        x, f = _to_nhwc(ins[0].dims, nchw), ins[1].dims
    elif kind == "bwd_input":
        x, f = _to_nhwc(_sizes_c(kc, 0), nchw), ins[1].dims
    else:
        x, f = _to_nhwc(ins[0].dims, nchw), _sizes_c(kc, 1)
    kc.check_dims_equal(x[3], f[2], "input depth differs from filter in-channels")
    geo = CGeometry(x, f[0], f[1], f[3], g)
    check_output_sizes(kc, geo)
    if kind != "fwd":
        want = _from_nhwc([x[0], geo.out(0), geo.out(1), product([x[3], f[3]])], nchw)
        for d in range(4):
            kc.check_dims_equal(ins[2].dim(d), want[d],
                                f"out_backprop dim {d} differs from the window output")
    return geo


def depthwise_out_dims(kc: CKernelContext) -> List[List[str]]:
    geo = depthwise_geometry(kc)
    kind = _KINDS[kc.node.op]
    if kind == "fwd":
        dims = _from_nhwc([geo.x[0], geo.out(0), geo.out(1), product([geo.x[3], geo.o])],
                          is_nchw(kc))
    elif kind == "bwd_input":
        dims = _from_nhwc(geo.x, is_nchw(kc))
    else:
        dims = [geo.kh, geo.kw, geo.x[3], geo.o]
    kc.check(f"flowc_conv_dims_ok({', '.join(dims)}, {kc.out.dtype.itemsize})",
             "the output shape is too large (its byte size overflows int64)")
    return [dims]


def _helper(kc: CKernelContext, geo: CGeometry) -> str:
    """Add the module helpers of this node's dtype and multiplier; returns the one to call."""
    dtype = kc.out.dtype
    sfx = dtype.ir_name
    m = int(geo.o) if geo.o.isdigit() else None
    ident = f"{sfx}_m{m}" if m is not None else f"{sfx}_m"
    T = kc.target.c_type(dtype)
    add_epilogue(kc, dtype)
    module_helper(kc, "flowc_depthwise_common",
                  kc.render("depthwise_conv.c.j2", part="common", min_work=GEMM_PARALLEL_MIN_WORK))
    module_helper(kc, f"flowc_depthwise_{ident}",
                  kc.render("depthwise_conv.c.j2", part="kernels", id=ident, sfx=sfx, T=T, M=m))
    name = f"flowc_depthwise_{_KINDS[kc.node.op]}_{ident}"
    if is_nchw(kc):
        module_helper(kc, f"flowc_depthwise_nchw_{sfx}",
                      kc.render("depthwise_conv.c.j2", part="nchw", sfx=sfx, T=T))
        module_helper(kc, f"flowc_depthwise_nchw_{ident}",
                      kc.render("depthwise_conv.c.j2", part="nchw_kernels", id=ident, sfx=sfx,
                                T=T, M=m))
        name = f"flowc_depthwise_{_KINDS[kc.node.op]}_nchw_{ident}"
    return name


def emit_depthwise(kc: CKernelContext) -> str:
    geo = depthwise_geometry(kc)
    fn = _helper(kc, geo)
    kind = _KINDS[kc.node.op]
    extra = [] if kind != "fwd" or is_nchw(kc) else \
        epilogue_args(kc, [geo.x[0], geo.out(0), geo.out(1), product([geo.x[3], geo.o])])
    ptrs = ", ".join([kc.inputs[i].data for i in _ARGS[kind]] + extra + [kc.out.data])
    rc = kc.tmp("rc")
    oom = kc.fail("out of memory for a depthwise convolution's buffers",
                  code="FLOWC_RESOURCE_EXHAUSTED")
    call = f"{fn}({ptrs}, {geo.call_args()})"
    if conv_engine.uses_onednn(kc, geo, kc.node.op):   # large, f32, NHWC (or run-time dims)
        start = conv_engine.emit_onednn(kc, geo, rc, call, depthwise=True)
    else:
        start = f"int {rc} = {call};\n"
    return start + f"if ({rc} != 0) {oom}\n"


for _name in ("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
              "DepthwiseConv2dNativeBackpropFilter"):
    set_c_kernel(_name, emit_depthwise, depthwise_out_dims)
