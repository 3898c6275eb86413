"""GPU kernels of Conv2D, its two backprops, MaxPool, AvgPool and their gradients,
MaxPoolGradGrad, and the fused ``_FusedConv2D`` (bias, residual and activation applied as
each output is written) and ``_MaxPoolReluGrad`` (the gradient routed only where the ReLU
passed) (NHWC).

The geometry and the shape checks are the C target's (``compiler/codegen/c_ops/conv.py``): sizes,
output sizes and padding are host expressions passed to the kernels. The kernels are direct
loops, one thread per output element (no im2col): honest and simple rather than fast; where
the module is built with cuDNN, the convolutions and their gradients run on it instead for
the shapes it is faster on (``conv_cudnn.py``). Shape-like inputs (``input_sizes``,
``filter_sizes``, ``orig_input_shape``) that are not constants are copied to the host before
the launch; NCHW stays on the CPU.

The three convolutions take TensorFlow's groups (``_conv_geometry``: the C target's window
arithmetic and checks, with its own check of the depths): an input depth C that is a multiple
G > 1 of the filter's in-channels CF (Keras' ``Conv2D(groups=G)``, ResNeXt, RegNet; for the
backprops, ``input_sizes``' or the input's depth against the filter's) is G convolutions in
one kernel, output channel o of group g = o / (O / G) reading input channels
[g * CF, (g + 1) * CF). G is a host value like the other sizes, so channel counts known only
at run time (a fed depth) work too, checked there; nothing is split per group.
"""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.c_ops.conv import (CGeometry, _c_geometry, _helpers, _out_dims, _sizes_c,
                                         base_op, check_output_sizes)
from compiler.codegen.c_ops.nn_grad import max_pool_grad_grad_dims, max_pool_grad_grad_geometry
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.cuda_ops import conv_cudnn
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.graph import Node
from compiler.ops.conv import _geometry as _window_attrs
from compiler.ops.conv_fused import epilogue

_PARTS = {"Conv2D": ("conv2d", {"x": 0, "f": 1}),
          "Conv2DBackpropInput": ("bwd_input", {"f": 1, "dy": 2}),
          "Conv2DBackpropFilter": ("bwd_filter", {"x": 0, "dy": 2}),
          "MaxPool": ("max_pool", {"x": 0}),
          "AvgPool": ("avg_pool", {"x": 0}),
          "MaxPoolGrad": ("max_pool_grad", {"x": 0, "dy": 2}),
          "AvgPoolGrad": ("avg_pool_grad", {"dy": 1}),
          "MaxPoolGradGrad": ("max_pool_grad_grad", {"x": 0, "dy": 2}),
          # the fused forms the fuse-conv pass makes (compiler/ops/conv_fused.py)
          "_FusedConv2D": ("conv2d", {"x": 0, "f": 1}),
          "_MaxPoolReluGrad": ("max_pool_grad", {"x": 0, "dy": 2})}


_CONVS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")


def _geometry(kc: KernelContext) -> Tuple[CGeometry, str, str]:
    """The node's geometry, its filter's in-channels CF and its output channels per group OG
    (C expressions; CF = C and OG = O but for a grouped convolution)."""
    if kc.node.op == "MaxPoolGradGrad":          # its checks, without the C kernel's function
        geo = max_pool_grad_grad_geometry(kc, c_kernel=False)
    elif base_op(kc.node.op) in _CONVS:
        return _conv_geometry(kc)
    else:
        geo = _c_geometry(kc)
    return geo, geo.x[3], geo.o


def _conv_geometry(kc: KernelContext) -> Tuple[CGeometry, str, str]:
    """A convolution's geometry with its groups, the C target's checks otherwise (sizes >= 0,
    output sizes, the incoming gradient's dims); the first call adds the run-time checks."""
    cached = getattr(kc, "_cuda_conv_geometry", None)
    if cached is not None:
        return cached
    op = base_op(kc.node.op)
    g = _window_attrs(kc.attrs, kc.error)
    ins = kc.inputs
    _helpers(kc, kc.out.dtype)
    if op == "Conv2D":
        x, f = ins[0].dims, ins[1].dims
        names = ("input depth", "filter in-channels")
    elif op == "Conv2DBackpropInput":
        x, f = _sizes_c(kc, 0), ins[1].dims
        names = ("input_sizes[3]", "filter in-channels")
    else:
        x, f = ins[0].dims, _sizes_c(kc, 1)
        names = ("input depth", "filter_sizes[2]")
    geo = CGeometry(x, f[0], f[1], f[3], g)
    og = _groups(kc, x[3], f[2], f[3], names)
    check_output_sizes(kc, geo)
    if op != "Conv2D":
        want = geo.out_dims()
        for d in range(4):
            kc.check_dims_equal(ins[2].dim(d), want[d],
                                f"out_backprop dim {d} differs from the window output")
    kc._cuda_conv_geometry = geo, f[2], og
    return kc._cuda_conv_geometry


def _groups(kc: KernelContext, c: str, cf: str, o: str, names: Tuple[str, str]) -> str:
    """The output channels per group (a C expression) of a convolution of input depth ``c``
    by a filter of ``cf`` in-channels and ``o`` outputs: ``o`` but for TensorFlow's grouped
    form (``c`` a multiple G > 1 of ``cf``, ``o`` a multiple of G), ``o / G``. Checked now
    where the depths are known, at run time otherwise; anything else is an error."""
    what = f"{names[0]} is not a multiple of the {names[1]} (grouped convolution)"
    if c.isdigit() and cf.isdigit():
        if c == cf:
            return o
        if int(cf) == 0 or int(c) == 0 or int(c) % int(cf):
            raise kc.error(f"{what}: {c} vs {cf}")
        groups = str(int(c) // int(cf))
    else:
        kc.check(f"({c}) == ({cf}) || (({cf}) > 0 && ({c}) > 0 && ({c}) % ({cf}) == 0)",
                 what + ": %lld vs %lld", f"(long long)({c})", f"(long long)({cf})")
        groups = f"(({c}) == ({cf}) ? (int64_t)1 : (int64_t)({c}) / ({cf}))"
    if o.isdigit() and groups.isdigit():
        if int(o) % int(groups):
            raise kc.error(f"Depth of output ({o}) is not a multiple of the number of groups "
                           f"({groups})")
        return str(int(o) // int(groups))
    kc.check(f"({o}) % {groups} == 0",
             "depth of output (%lld) is not a multiple of the number of groups (%lld)",
             f"(long long)({o})", f"(long long)({groups})")
    return f"({o}) / {groups}"


def _conv(kc: KernelContext) -> str:
    geo, cf, og = _geometry(kc)
    part, inputs = _PARTS[kc.node.op]
    out = kc.out
    launch = CudaLaunch(kc, part)
    v = launch.value
    names = {k: launch.ptr(kc.inputs[i]) for k, i in inputs.items()}
    y = launch.ptr(out, writable=True)
    n_expr, h, w, c = geo.x
    oh, ow = geo.out(0), geo.out(1)
    sizes = dict(N=v(n_expr), H=v(h), W=v(w), C=v(c), KH=v(geo.kh), KW=v(geo.kw), O=v(geo.o),
                 CF=v(cf), OG=v(og),
                 OH=v(oh), OW=v(ow), sh=geo.g.strides[0], sw=geo.g.strides[1],
                 dh=geo.g.dilations[0], dw=geo.g.dilations[1], pt=v(geo.pad(0)),
                 pl=v(geo.pad(1)))
    scatter = part.endswith("pool_grad")
    # Pool grads: one thread per window of the incoming gradient, adding into a zeroed output.
    count = kc.inputs[inputs["dy"]].size if scatter else out.size
    out_dims = [n_expr, oh, ow, geo.o]
    body = kc.render("conv.cu.j2", part=part, T=out.ctype, y=y, n=v(count),
                     x=names.get("x", ""), f=names.get("f", ""), dy=names.get("dy", ""),
                     relu=kc.node.op == "_MaxPoolReluGrad",
                     **epilogue_vars(kc, launch, out_dims), **sizes)
    code = launch.launch(body, count)
    if scatter:
        code = (f"FLOWC_CUDA(cudaMemsetAsync({out.var}.data, 0, (size_t)({out.size}) * "
                f"sizeof({out.ctype}), flowc_stream));\n" + code)
    if conv_cudnn.takes(kc):
        fused = kc.node.op.startswith("_Fused")
        code = conv_cudnn.cudnn_or_generated(
            kc, geo, cf, code,
            (lambda la: epilogue_vars(kc, la, out_dims, check=False)) if fused else None)
    return code


def epilogue_vars(kc: KernelContext, launch: CudaLaunch, out_dims, check: bool = True) -> dict:
    """conv_epilogue.cu.j2's variables for this node (no epilogue unless a fused conv); the
    residual's dims are checked against ``out_dims`` (unless ``check`` is off: made once
    already)."""
    if not kc.node.op.startswith("_Fused"):
        return dict(bias="", addend="", act=None, alpha="0", expm1="")
    add, act = epilogue(kc.attrs, kc.error)
    if check:
        kc.check_dims_equal(kc.inputs[2].dim(0), out_dims[3],
                            "bias size differs from the output's channels")
        for d in range(4 if add else 0):
            kc.check_dims_equal(kc.inputs[3].dim(d), out_dims[d],
                                f"the residual's dim {d} differs from the output's")
    return dict(bias=launch.ptr(kc.inputs[2]), addend=launch.ptr(kc.inputs[3]) if add else "",
                act=act, alpha=kc.literal(float(kc.attrs.get("leakyrelu_alpha", 0.2)),
                                          kc.out.dtype),
                expm1=kc.math("expm1", kc.out.dtype))


# The shape-like input of each op that has one: where it is not a constant (a gradient's
# ``Shape`` of an input whose batch is fed) the host copies its 4 values back from the GPU
# (one stream sync) and computes the geometry from them.
_SIZES = {"Conv2DBackpropInput": 0, "Conv2DBackpropFilter": 1, "AvgPoolGrad": 0}


def _supports(node: Node) -> bool:
    """NHWC (grouped convolutions included)."""
    return node.attrs.get("data_format", "NHWC") == "NHWC"


def _dims(kc: KernelContext) -> List[List[str]]:
    """The output dims: a convolution's from its own geometry (the filter gradient's
    in-channels are the filter's, C / G), the rest as the C target's."""
    if base_op(kc.node.op) not in _CONVS:
        return _out_dims(kc)
    geo, cf, _ = _conv_geometry(kc)
    op = base_op(kc.node.op)
    dims = (geo.out_dims() if op == "Conv2D" else geo.x if op == "Conv2DBackpropInput"
            else [geo.kh, geo.kw, cf, geo.o])
    kc.check(f"flowc_conv_dims_ok({', '.join(dims)}, {kc.out.dtype.itemsize})",
             "the output shape is too large (its byte size overflows int64)")
    return [dims]


def _grad_grad_dims(kc: KernelContext):
    return max_pool_grad_grad_dims(kc, c_kernel=False)


for _op in _PARTS:
    register_cuda_kernel(_op, _conv, supports=_supports,
                         output_dims=_grad_grad_dims if _op == "MaxPoolGradGrad" else _dims,
                         host_inputs=(_SIZES[_op],) if _op in _SIZES else ())
