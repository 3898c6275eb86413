"""GPU kernels of DepthwiseConv2dNative, its two backprops and the fused
``_FusedDepthwiseConv2dNative`` (bias, residual and activation applied as each output is
written) (NHWC): direct loops, one thread per output element, beside the convolution kernels
of ``cuda_ops/conv.py``. The geometry and
every shape check are the C target's (``compiler/codegen/c_ops/depthwise_conv.py``); a
shape-like input that is not a constant is copied to the host before the launch. NCHW stays
on the CPU."""
from __future__ import annotations

from compiler.codegen.c_ops.depthwise_conv import depthwise_geometry, depthwise_out_dims
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.cuda_ops.conv import epilogue_vars
from compiler.codegen.kernel_context import KernelContext, product
from compiler.ir.graph import Node

_PARTS = {"DepthwiseConv2dNative": ("fwd", {"x": 0, "f": 1}, None),
          "DepthwiseConv2dNativeBackpropInput": ("bwd_input", {"f": 1, "dy": 2}, 0),
          "DepthwiseConv2dNativeBackpropFilter": ("bwd_filter", {"x": 0, "dy": 2}, 1),
          "_FusedDepthwiseConv2dNative": ("fwd", {"x": 0, "f": 1}, None)}


def _depthwise(kc: KernelContext) -> str:
    geo = depthwise_geometry(kc)
    part, inputs, _ = _PARTS[kc.node.op]
    out = kc.out
    launch = CudaLaunch(kc, f"depthwise_{part}")
    v = launch.value
    names = {k: launch.ptr(kc.inputs[i]) for k, i in inputs.items()}
    n_expr, h, w, c = geo.x
    body = kc.render("depthwise_conv.cu.j2", part=part, T=out.ctype,
                     y=launch.ptr(out, writable=True), n=v(out.size), x=names.get("x", ""),
                     f=names.get("f", ""), dy=names.get("dy", ""), N=v(n_expr), H=v(h), W=v(w),
                     C=v(c), KH=v(geo.kh), KW=v(geo.kw), M=v(geo.o), OH=v(geo.out(0)),
                     OW=v(geo.out(1)), sh=geo.g.strides[0], sw=geo.g.strides[1],
                     dh=geo.g.dilations[0], dw=geo.g.dilations[1], pt=v(geo.pad(0)),
                     pl=v(geo.pad(1)),
                     **epilogue_vars(kc, launch, [n_expr, geo.out(0), geo.out(1),
                                                  product([c, geo.o])]))
    return launch.launch(body, out.size)


def _supports(node: Node) -> bool:
    return node.attrs.get("data_format", "NHWC") == "NHWC"


for _op, (_, _, _sizes) in _PARTS.items():
    register_cuda_kernel(_op, _depthwise, supports=_supports, output_dims=depthwise_out_dims,
                         host_inputs=(_sizes,) if _sizes is not None else ())
