"""GPU kernels of Conv2D, its two backprops, MaxPool, AvgPool and their gradients,
MaxPoolGradGrad, and the fused ``_FusedConv2D`` (bias, residual and activation applied as
each output is written) and ``_MaxPoolReluGrad`` (the gradient routed only where the ReLU
passed) (NHWC).

The geometry and every shape check are the C target's (``compiler/codegen/c_ops/conv.py``): sizes,
output sizes and padding are host expressions passed to the kernels. The kernels are direct
loops, one thread per output element (no im2col, no cuDNN): honest and simple rather than
fast. Shape-like inputs (``input_sizes``, ``filter_sizes``, ``orig_input_shape``) that are
not constants are copied to the host before the launch; NCHW stays on the CPU.
"""
from __future__ import annotations

from compiler.codegen.c_ops.conv import _c_geometry, _out_dims
from compiler.codegen.c_ops.nn_grad import max_pool_grad_grad_dims, max_pool_grad_grad_geometry
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.graph import Node
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


def _geometry(kc: KernelContext):
    if kc.node.op == "MaxPoolGradGrad":          # its checks, without the C kernel's function
        return max_pool_grad_grad_geometry(kc, c_kernel=False)
    return _c_geometry(kc)


def _conv(kc: KernelContext) -> str:
    geo = _geometry(kc)
    part, inputs = _PARTS[kc.node.op]
    out = kc.out
    launch = CudaLaunch(kc, part)
    v = launch.value
    names = {k: launch.ptr(kc.inputs[i]) for k, i in inputs.items()}
    y = launch.ptr(out, writable=True)
    n_expr, h, w, c = geo.x
    oh, ow = geo.out(0), geo.out(1)
    sizes = dict(N=v(n_expr), H=v(h), W=v(w), C=v(c), KH=v(geo.kh), KW=v(geo.kw), O=v(geo.o),
                 OH=v(oh), OW=v(ow), sh=geo.g.strides[0], sw=geo.g.strides[1],
                 dh=geo.g.dilations[0], dw=geo.g.dilations[1], pt=v(geo.pad(0)),
                 pl=v(geo.pad(1)))
    scatter = part.endswith("pool_grad")
    # Pool grads: one thread per window of the incoming gradient, adding into a zeroed output.
    count = kc.inputs[inputs["dy"]].size if scatter else out.size
    body = kc.render("conv.cu.j2", part=part, T=out.ctype, y=y, n=v(count),
                     x=names.get("x", ""), f=names.get("f", ""), dy=names.get("dy", ""),
                     relu=kc.node.op == "_MaxPoolReluGrad",
                     **epilogue_vars(kc, launch, [n_expr, oh, ow, geo.o]), **sizes)
    code = launch.launch(body, count)
    if scatter:
        code = (f"FLOWC_CUDA(cudaMemsetAsync({out.var}.data, 0, (size_t)({out.size}) * "
                f"sizeof({out.ctype}), flowc_stream));\n" + code)
    return code


def epilogue_vars(kc: KernelContext, launch: CudaLaunch, out_dims) -> dict:
    """conv_epilogue.cu.j2's variables for this node (no epilogue unless a fused conv); the
    residual's dims are checked against ``out_dims``."""
    if not kc.node.op.startswith("_Fused"):
        return dict(bias="", addend="", act=None, alpha="0", expm1="")
    add, act = epilogue(kc.attrs, kc.error)
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


# Where each convolution finds its input (x) and its filter (f): an input's shape, or the
# output's for the one a backprop computes.
_CONV_OPERANDS = {"Conv2D": ("in", 0, "in", 1), "_FusedConv2D": ("in", 0, "in", 1),
                  "Conv2DBackpropInput": ("out", 0, "in", 1),
                  "Conv2DBackpropFilter": ("in", 0, "out", 0)}


def _supports(node: Node) -> bool:
    """NHWC, and no grouped convolution or gradient of one (input depth a multiple > 1 of the
    filter's in-channels): these kernels have no groups (simplify splits a grouped Conv2D or
    backprop meant for a GPU; one whose depths are known only at run time fails its check
    that they are equal)."""
    if node.attrs.get("data_format", "NHWC") != "NHWC":
        return False
    where = _CONV_OPERANDS.get(node.op)
    if where is not None:
        x, f = ((node.inputs[i] if side == "in" else node.output(i)).type.shape
                for side, i in (where[:2], where[2:]))
        if x is not None and f is not None and len(x) == 4 and len(f) == 4 \
                and None not in (x[3], f[2]) and x[3] != f[2]:
            return False
    return True


def _grad_grad_dims(kc: KernelContext):
    return max_pool_grad_grad_dims(kc, c_kernel=False)


for _op in _PARTS:
    register_cuda_kernel(_op, _conv, supports=_supports,
                         output_dims=_grad_grad_dims if _op == "MaxPoolGradGrad" else _out_dims,
                         host_inputs=(_SIZES[_op],) if _op in _SIZES else ())
