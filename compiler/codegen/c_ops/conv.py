"""The C lowering of convolution and pooling (``compiler/ops/conv.py``): Conv2D and its two
backprops, MaxPool, AvgPool and their gradients, each one call of a module helper; also the C
geometry (``CGeometry``, ``_c_geometry``) that the fused forms (``c_ops/conv_fused.py``),
MaxPoolGradGrad (``c_ops/nn_grad.py``) and the CUDA kernels (``cuda_ops/conv.py``) share.

Convolutions are im2col (col2im for the input gradient) plus OpenBLAS gemm, over chunks of rows
of the column matrix sized to stay in a core's L2 cache; a grouped Conv2D (input depth G > 1
times the filter's in-channels, known at compile time: ResNeXt, RegNet) is one kernel too,
``flowc_conv2d_grouped`` (one im2col of a chunk for all groups, then a gemm per group into
its block of output channels, the fused epilogue after; with thin groups, and static
filter dims, ``conv_grouped_direct.c.j2``'s direct kernel instead: see
``_grouped_direct_conv``), or oneDNN's grouped primitive;
so are its gradients (``flowc_conv2d_bwd_input_grouped``: a gemm per group into the group's
column block, one col2im of all; ``flowc_conv2d_bwd_filter_grouped``: one im2col of all, a
gemm per group into its columns of df; or oneDNN's grouped backward primitives; with thin
groups, the input gradient with strides 1 and the filter gradient run direct kernels too),
whose groups
are the input depth over the filter's in-channels known at compile time;
pooling is direct loops over all channels of a window at once. NCHW is a compile-time error here. Large convolutions
run on oneDNN where it is installed, and so do the large gradients (``conv_engine.py``
chooses per shape).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from compiler.codegen.c_ops import conv_engine
from compiler.codegen.c_ops.nn import GEMM_PARALLEL_MIN_WORK, parallel_gemm
from compiler.codegen.elementwise import use_vector_math
from compiler.codegen.kernel_context import KernelContext as CKernelContext
from compiler.errors import CompileError
from compiler.ir.construct import constant_value
from compiler.ir.op_registry import get_op, set_c_kernel
from compiler.ops.conv import _MODES, Geometry, _geometry, window
from compiler.ops.conv_fused import epilogue
from compiler.options import setting
from compiler.codegen.c_ops.reduction import module_helper
from runtime.dtypes import DType


def _helpers(kc: CKernelContext, dtype: DType) -> str:
    """Add the module helpers for ``dtype``; returns the name suffix of its functions."""
    sfx = dtype.ir_name
    module_helper(kc, "flowc_conv_window", kc.render("conv.c.j2", part="window"))
    if base_op(kc.node.op).startswith("Conv"):
        add_epilogue(kc, dtype)
        kc.require("blas")
        if kc.target.name == "cuda":            # the CUDA twin of conv.c.j2 names no gemm
            gemm = "scipy_cblas_sgemm" if dtype is DType.f32 else "scipy_cblas_dgemm"
        else:
            gemm = parallel_gemm(kc, dtype)      # shares flowc's threads (nn.py)
        module_helper(kc, f"flowc_conv_{sfx}", kc.render("conv.c.j2", part="conv", sfx=sfx,
                                                         T=kc.target.c_type(dtype), gemm=gemm,
                                                         min_work=GEMM_PARALLEL_MIN_WORK))
    else:
        index = "int32_t" if dtype.itemsize == 4 else "int64_t"
        module_helper(kc, f"flowc_pool_{sfx}", kc.render("pool.c.j2", sfx=sfx,
                                                         T=kc.target.c_type(dtype), I=index,
                                                         I_MAX=index.upper()[:-2] + "_MAX"))
    return sfx


# The activation codes of conv.c.j2's epilogue (FLOWC_ACT_*), by fused_ops name.
ACT_CODES = {None: "FLOWC_ACT_NONE", "Relu": "FLOWC_ACT_RELU", "Relu6": "FLOWC_ACT_RELU6",
             "Elu": "FLOWC_ACT_ELU", "LeakyRelu": "FLOWC_ACT_LEAKY_RELU"}


def add_epilogue(kc: CKernelContext, dtype: DType) -> str:
    """Add the fused convolutions' epilogue helper for ``dtype``; returns its name."""
    module_helper(kc, "flowc_conv_window", kc.render("conv.c.j2", part="window"))
    name = f"flowc_conv_epilogue_{dtype.ir_name}"
    return module_helper(kc, name, kc.render("conv.c.j2", part="epilogue", sfx=dtype.ir_name,
                                             T=kc.target.c_type(dtype),
                                             expm1=use_vector_math(
                                                 kc, kc.math("expm1", dtype) + "(")[:-1]))


def epilogue_args(kc: CKernelContext, out_dims: List[str]) -> List[str]:
    """The C arguments (bias, addend, act, alpha) of a fused convolution's epilogue (NULL,
    NULL, FLOWC_ACT_NONE, 0 for a plain one); checks the residual's dims against
    ``out_dims``."""
    if not kc.node.op.startswith("_Fused"):
        return ["NULL", "NULL", ACT_CODES[None], "0"]
    add, act = epilogue(kc.attrs, kc.error)
    kc.check_dims_equal(kc.inputs[2].dim(0), out_dims[3],
                        "bias size differs from the output's channels")
    if add:
        for d in range(4):
            kc.check_dims_equal(kc.inputs[3].dim(d), out_dims[d],
                                f"the residual's dim {d} differs from the output's")
    alpha = kc.literal(float(kc.attrs.get("leakyrelu_alpha", 0.2)), kc.out.dtype)
    return [kc.inputs[2].data, kc.inputs[3].data if add else "NULL", ACT_CODES[act], alpha]


def _sizes_c(kc: CKernelContext, i: int) -> List[str]:
    """The 4 values of shape-like input ``i`` as C (literals when constant), checked >= 0."""
    v = constant_value(kc.node.inputs[i])
    if v is not None:
        return [str(int(a)) for a in np.reshape(v, -1)]
    ref, name = kc.inputs[i], get_op(kc.node.op).inputs[i].name
    kc.check_dims_equal(ref.size, "4", f"{name} must have 4 elements")
    vals = [f"(int64_t){ref.data}[{k}]" for k in range(4)]
    for k, e in enumerate(vals):
        kc.check(f"{e} >= 0", f"{name}[{k}] must be non-negative, got %lld", f"(long long)({e})")
    return vals


def check_output_sizes(kc: CKernelContext, geo: "CGeometry") -> None:
    """The window's output height and width must not be negative: checked now when they are
    known, at run time otherwise."""
    for axis in (0, 1):
        out = geo.out(axis)
        if out.lstrip("-").isdigit():
            if int(out) < 0:
                raise kc.error("computed output size would be negative")
        else:
            kc.check(f"{out} >= 0", "computed output size would be negative (or is too large)")


@dataclass
class CGeometry:
    """C expressions of one convolution/pooling problem (NHWC input x, KHxKWxCxO filter)."""
    x: List[str]
    kh: str
    kw: str
    o: str
    g: Geometry
    groups: int = 1     # a grouped Conv2D's groups (input depth / filter in-channels)

    def window_args(self, axis: int) -> str:
        k = (self.kh, self.kw)[axis]
        pads = self.g.pads[axis]
        return (f"{self.x[1 + axis]}, {k}, {self.g.strides[axis]}, {self.g.dilations[axis]}, "
                f"{_MODES[self.g.padding]}, {pads[0]}, {pads[1]}")

    def _static(self, axis: int) -> Optional[Tuple[int, int]]:
        size, k = self.x[1 + axis], (self.kh, self.kw)[axis]
        if not (size.isdigit() and k.isdigit()):
            return None
        return window(int(size), int(k), self.g.strides[axis], self.g.dilations[axis],
                      self.g.padding, self.g.pads[axis])

    def out(self, axis: int) -> str:
        """Output size along ``axis`` (0: height, 1: width): a literal when static."""
        known = self._static(axis)
        return str(known[0]) if known else f"flowc_conv_out({self.window_args(axis)})"

    def pad(self, axis: int) -> str:
        known = self._static(axis)
        return str(known[1]) if known else f"flowc_conv_pad({self.window_args(axis)})"

    def out_dims(self) -> List[str]:
        return [self.x[0], self.out(0), self.out(1), self.o]

    def call_args(self) -> str:
        """Arguments N, H, W, C, KH, KW, O, OH, OW, sh, sw, dh, dw, pt, pl of the helpers."""
        oh, ow = self.out_dims()[1:3]
        return ", ".join(self.x + [self.kh, self.kw, self.o, oh, ow,
                                   *map(str, self.g.strides + self.g.dilations),
                                   self.pad(0), self.pad(1)])


def conv_groups(kc: CKernelContext, c: str, c_f: str, o: str) -> int:
    """The groups of a Conv2D of input depth ``c`` by a filter of ``c_f`` in-channels and
    ``o`` outputs (C expressions): ``c / c_f`` when both are known now and ``c`` is a larger
    multiple of ``c_f`` (TensorFlow's grouped convolution; ``o`` must be a multiple of the
    groups, checked now or at run time), else 1; for Conv2D and its two backprops on the C
    target (the CUDA kernels work out their own groups, ``cuda_ops/conv.py``)."""
    if kc.target.name != "c" or not (c.isdigit() and c_f.isdigit()):
        return 1
    c, c_f = int(c), int(c_f)
    if c_f == 0 or c == 0 or c == c_f or c % c_f:
        return 1
    groups = c // c_f
    if o.isdigit():
        if int(o) % groups:
            raise kc.error(f"Depth of output ({o}) is not a multiple of the number of groups "
                           f"({groups})")
    else:
        kc.check(f"({o}) % {groups} == 0",
                 f"depth of output is not a multiple of the number of groups ({groups})")
    return groups


# A grouped convolution runs grouped only when the input depth and the filter's in-channels
# are known when compiling; otherwise they must be equal.
_DEPTH_DIFFERS = ("input depth differs from filter in-channels (a grouped convolution needs "
                  "both known at compile time)")


def _known_sizes(kc: CKernelContext, i: int) -> List[str]:
    """``_sizes_c`` of a backprop's shape-like input ``i``, with the dims its output's type
    knows (a ``Shape`` of a tensor whose batch alone is fed: see ``_sizes_value`` in
    ``compiler/ops/conv.py``) as literals, checked against the run-time values."""
    sizes = _sizes_c(kc, i)
    name = get_op(kc.node.op).inputs[i].name
    for k, known in enumerate(kc.out.shape):
        if known is not None and not sizes[k].isdigit():
            kc.check_dims_equal(sizes[k], str(known), f"{name}[{k}] differs from its known value")
            sizes[k] = str(known)
    return sizes


def _c_geometry(kc: CKernelContext) -> CGeometry:
    """Geometry of the node in C; the first call adds run-time checks of all the shapes."""
    cached = getattr(kc, "_conv_geometry", None)
    if cached is not None:
        return cached
    kc._conv_geometry = geo = _new_c_geometry(kc)
    return geo


def _new_c_geometry(kc: CKernelContext) -> CGeometry:
    op = base_op(kc.node.op)
    pool = "Pool" in op
    g = _geometry(kc.attrs, kc.error, ksize=pool)
    ins = kc.inputs
    _helpers(kc, kc.out.dtype)
    if op == "Conv2D":
        x, f = ins[0].dims, ins[1].dims
        groups = conv_groups(kc, x[3], f[2], f[3])
        if groups == 1:
            kc.check_dims_equal(x[3], f[2], _DEPTH_DIFFERS)
        geo, has_grad = CGeometry(x, f[0], f[1], f[3], g, groups), False
    elif op == "Conv2DBackpropInput":
        x, f = _known_sizes(kc, 0), ins[1].dims
        groups = conv_groups(kc, x[3], f[2], f[3])
        if groups == 1:
            kc.check_dims_equal(x[3], f[2], _DEPTH_DIFFERS)
        geo, has_grad = CGeometry(x, f[0], f[1], f[3], g, groups), True
    elif op == "Conv2DBackpropFilter":
        x, f = ins[0].dims, _known_sizes(kc, 1)
        groups = conv_groups(kc, x[3], f[2], f[3])
        if groups == 1:
            kc.check_dims_equal(x[3], f[2], _DEPTH_DIFFERS)
        geo, has_grad = CGeometry(x, f[0], f[1], f[3], g, groups), True
    else:
        k = kc.attr("ksize")
        x = _sizes_c(kc, 0) if op == "AvgPoolGrad" else ins[0].dims
        geo = CGeometry(x, str(k[1]), str(k[2]), x[3], g)
        has_grad = op.endswith("Grad")
    check_output_sizes(kc, geo)
    want = geo.out_dims()
    checked = (([len(ins) - 1] if has_grad else []) + ([1] if op == "MaxPoolGrad" else [])
               + ([2] if kc.node.op in _ARGMAX_GRADS else []))
    for i in checked:
        name = get_op(kc.node.op).inputs[i].name
        for d in range(4):
            kc.check_dims_equal(ins[i].dim(d), want[d], f"{name} dim {d} differs from the window output")
    return geo


def _out_dims(kc: CKernelContext) -> List[List[str]]:
    geo = _c_geometry(kc)
    op = base_op(kc.node.op)
    if op in ("Conv2D", "MaxPool", "AvgPool"):
        dims = geo.out_dims()
    elif op == "Conv2DBackpropFilter":
        dims = [geo.kh, geo.kw, geo.x[3], geo.o]
    else:
        dims = geo.x
    kc.check(f"flowc_conv_dims_ok({', '.join(dims)}, {kc.out.dtype.itemsize})",
             "the output shape is too large (its byte size overflows int64)")
    if kc.node.op == "_Conv2DBackpropFilterBias":
        return [dims, [geo.o]]
    if kc.node.op == "_MaxPoolArgmax":
        return [dims, dims]
    if kc.node.op == "_MaxPoolGradArgmaxBias":
        return [dims, [geo.x[3]]]
    return [dims]


# The pooling gradients routed by _MaxPoolArgmax's places (the second also sums dx per channel).
_ARGMAX_GRADS = ("_MaxPoolGradArgmax", "_MaxPoolGradArgmaxBias")


# Fused ops made by the fuse-conv pass (compiler/ops/conv_fused.py) that run the helper of
# the op they extend, with its epilogue switched on.
_BASE_OPS = {"_FusedConv2D": "Conv2D", "_MaxPoolReluGrad": "MaxPoolGrad",
             "_Conv2DBackpropFilterBias": "Conv2DBackpropFilter", "_MaxPoolArgmax": "MaxPool",
             "_MaxPoolGradArgmax": "MaxPoolGrad", "_MaxPoolGradArgmaxBias": "MaxPoolGrad"}


def base_op(op: str) -> str:
    """The op of this family whose window arithmetic and C helper ``op`` uses."""
    return _BASE_OPS.get(op, op)


def _epilogue_args(kc: CKernelContext) -> List[str]:
    """Extra C arguments after the inputs: Conv2D's epilogue (bias, residual, activation
    and its slope), MaxPoolGrad's ReLU flag (off for the plain ops)."""
    op = kc.node.op
    if op in ("Conv2D", "_FusedConv2D"):
        return epilogue_args(kc, _c_geometry(kc).out_dims())
    if op in ("MaxPoolGrad", "_MaxPoolReluGrad"):
        return ["1" if op == "_MaxPoolReluGrad" else "0"]
    if op in _ARGMAX_GRADS:
        return ["1" if kc.attr("relu") else "0",
                kc.outputs[1].data if op == "_MaxPoolGradArgmaxBias" else "NULL"]
    if op == "_MaxPoolArgmax":
        return [kc.out.data, kc.outputs[1].data]
    if op == "Conv2DBackpropFilter":
        return ["NULL"]
    if op == "_Conv2DBackpropFilterBias":
        return [kc.outputs[1].data]
    return []


_CALLS = {
    "Conv2D": ("flowc_conv2d", (0, 1)),
    "Conv2DBackpropInput": ("flowc_conv2d_bwd_input", (2, 1)),
    "Conv2DBackpropFilter": ("flowc_conv2d_bwd_filter", (0, 2)),
    "MaxPool": ("flowc_max_pool", (0,)),
    "AvgPool": ("flowc_avg_pool", (0,)),
    "MaxPoolGrad": ("flowc_max_pool_grad", (0, 2)),
    "_MaxPoolArgmax": ("flowc_max_pool_argmax", (0,)),
    "_MaxPoolGradArgmax": ("flowc_max_pool_grad_argmax", (1, 2, 3)),
    "_MaxPoolGradArgmaxBias": ("flowc_max_pool_grad_argmax", (1, 2, 3)),
    "AvgPoolGrad": ("flowc_avg_pool_grad", (1,)),
}


# A convolution whose filter has at most this many taps (KH * KW * C), and whose output
# channels fill whole 32-byte vectors, at most 4 of them, is computed directly
# (conv_direct.c.j2) instead of by im2col + gemm.
DIRECT_MAX_TAPS = 32
DIRECT_VECTOR_BYTES = 32
DIRECT_MAX_VECTORS = 4


# A grouped Conv2D whose groups are not wide (GROUPED_DIRECT_MAX_CG input channels a group
# or fewer, GROUPED_DIRECT_MAX_OG outputs or fewer) and whose filter, as the direct kernel
# reads it (expanded to whole vectors), is at most GROUPED_DIRECT_MAX_FILTER_BYTES (each
# output row reads all of it: a larger one would come from beyond L2 row after row), with
# static filter dims, outputs of all groups that fill whole 32-byte vectors and a group's
# outputs that fill whole vectors or a whole number of groups that fill one, runs
# conv_grouped_direct.c.j2's kernel instead of im2col + a gemm per group. Measured with
# examples/benchmarks/bench_conv.py --grouped (one thread, 3x3, batch 1): direct 2.7-3.7x
# the gemm kernel's speed with 4 channels a group, 1.6-1.9x with 16, 1.06-1.5x with 32 and
# 64 (filters up to 1.2 MB), 0.65x with 32 groups of 64 (a 4.7 MB filter).
GROUPED_DIRECT_MAX_CG = 64
GROUPED_DIRECT_MAX_OG = 64
GROUPED_DIRECT_MAX_FILTER_BYTES = 2 << 20
# The input gradient's (strides 1: the direct convolution of dy by the flipped, transposed
# filter, made on each call): 1.07-1.9x the gemm kernel's speed up to 4 groups of 64 (a
# 0.6 MB filter), 0.8x with 8 groups of 64 (1.2 MB).
GROUPED_DIRECT_MAX_DX_FILTER_BYTES = 1 << 20
# The filter gradient's, for groups of at most this many input and output channels (and
# filters up to GROUPED_DIRECT_MAX_DX_FILTER_BYTES): 1.2-6x the gemm kernel's speed with 4
# and 16 channels a group, 0.7-1.1x with 32 and 64.
GROUPED_DIRECT_MAX_DF_CHANNELS = 16
# output pixels a register block holds: of one vector of outputs, of two (a group's pairs)
GROUPED_DIRECT_PIXELS = (8, 6)


def grouped_setting() -> str:
    """``FLOWC_GROUPED_CONV``: auto (default), direct or gemm."""
    text = setting("FLOWC_GROUPED_CONV").strip().lower() or "auto"
    if text not in ("auto", "direct", "gemm"):
        raise CompileError(f"FLOWC_GROUPED_CONV must be auto, direct or gemm, not {text!r}")
    return text


def _grouped_direct_conv(kc: CKernelContext, geo: CGeometry) -> Optional[str]:
    """The name of the direct grouped-convolution helper for this grouped Conv2D, its input
    gradient (the direct convolution of dy by the flipped, per group transposed filter; at
    run time, for strides 1 only) or its filter gradient, added to the module, when its
    groups are thin and its filter dims static; else None."""
    op = base_op(kc.node.op)
    if op not in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter") or geo.groups <= 1:
        return None
    dims = [geo.kh, geo.kw, geo.x[3], geo.o]
    if not all(d.isdigit() for d in dims):
        return None
    kh, kw, c, o = map(int, dims)
    if op == "Conv2DBackpropInput":
        if tuple(geo.g.strides) != (1, 1):
            return None
        c, o = o, c         # a convolution of dy (O channels) into dx's C
    groups = geo.groups
    cg, og = c // groups, o // groups
    dtype = kc.out.dtype
    mode = grouped_setting()
    lanes = DIRECT_VECTOR_BYTES // kc.out.dtype.itemsize
    vector_inputs = cg if og >= lanes else lanes // max(og, 1) * cg     # the kernel's Cv
    most = (GROUPED_DIRECT_MAX_FILTER_BYTES if op == "Conv2D"
            else GROUPED_DIRECT_MAX_DX_FILTER_BYTES)
    widest = (GROUPED_DIRECT_MAX_DF_CHANNELS, GROUPED_DIRECT_MAX_DF_CHANNELS) \
        if op == "Conv2DBackpropFilter" else (GROUPED_DIRECT_MAX_CG, GROUPED_DIRECT_MAX_OG)
    thin = (cg <= widest[0] and og <= widest[1] and
            kh * kw * vector_inputs * o * kc.out.dtype.itemsize <= most)
    if mode == "gemm" or (mode == "auto" and not thin):
        return None
    if not (kh * kw > 0 and cg > 0 and og > 0 and o % lanes == 0
            and (og % lanes == 0 or lanes % og == 0)):
        return None
    name = f"flowc_conv2d_grouped_direct_{dtype.ir_name}_{kh}x{kw}x{cg}x{og}x{groups}"
    args = dict(name=name, T=kc.target.c_type(dtype), KH=kh, KW=kw, CG=cg, OG=og, G=groups,
                PB1=GROUPED_DIRECT_PIXELS[0], PB2=GROUPED_DIRECT_PIXELS[1], sfx=dtype.ir_name)
    module_helper(kc, name, kc.render("conv_grouped_direct.c.j2", part="conv", **args))
    if op == "Conv2D":
        return name
    part = "bwd_input" if op == "Conv2DBackpropInput" else "bwd_filter"
    return module_helper(kc, f"{name}_{part}",
                         kc.render("conv_grouped_direct.c.j2", part=part, **args))


def _direct_conv(kc: CKernelContext, geo: CGeometry) -> Optional[str]:
    """The name of the direct-convolution helper for this convolution or filter gradient,
    added to the module, when its filter dims are static and small; else None."""
    op = base_op(kc.node.op)
    if op not in ("Conv2D", "Conv2DBackpropFilter") or geo.groups > 1:
        return _grouped_direct_conv(kc, geo)
    dims = [geo.kh, geo.kw, geo.x[3], geo.o]
    if not all(d.isdigit() for d in dims):
        return None
    kh, kw, c, o = map(int, dims)
    dtype = kc.out.dtype
    out_bytes = o * dtype.itemsize
    if not (0 < kh * kw * c <= DIRECT_MAX_TAPS and out_bytes % DIRECT_VECTOR_BYTES == 0
            and 0 < out_bytes <= DIRECT_MAX_VECTORS * DIRECT_VECTOR_BYTES):
        return None
    name = f"flowc_conv2d_direct_{dtype.ir_name}_{kh}x{kw}x{c}x{o}"
    module_helper(kc, name, kc.render("conv_direct.c.j2", name=name, T=kc.target.c_type(dtype),
                                      KH=kh, KW=kw, C=c, O=o, sfx=dtype.ir_name))
    return name if op == "Conv2D" else f"{name}_bwd_filter"


def emit_conv(kc: CKernelContext) -> str:
    """C for every op of this family: one call of its module helper, failing on its status."""
    geo = _c_geometry(kc)
    fn, args = _CALLS.get(kc.node.op) or _CALLS[base_op(kc.node.op)]
    direct = _direct_conv(kc, geo)
    if direct is not None:
        fn = direct
    outs = [] if kc.node.op == "_MaxPoolArgmax" else [kc.out.data]
    ptrs = plain_ptrs = ", ".join([kc.inputs[i].data for i in args] + _epilogue_args(kc) + outs)
    rc = kc.tmp("rc")
    conv = base_op(kc.node.op).startswith("Conv")
    what = "the im2col buffer" if conv else "the pooling's buffers"
    oom = kc.fail(f"out of memory for {what}", code="FLOWC_RESOURCE_EXHAUSTED")
    if geo.groups > 1:      # flowc_conv2d_grouped, flowc_conv2d_bwd_{input,filter}_grouped
        ptrs = f"{ptrs}, {geo.groups}"
        if direct is None:
            fn = f"{fn}_grouped"
    if direct is None:
        fn = f"{fn}_{kc.out.dtype.ir_name}"
    call = f"{fn}({ptrs}, {geo.call_args()})"
    if conv_engine.uses_onednn(kc, geo, base_op(kc.node.op)):
        oom = kc.fail("out of memory for the convolution's buffers",
                      code="FLOWC_RESOURCE_EXHAUSTED")
        start = conv_engine.emit_onednn(kc, geo, rc, call)
    elif conv_engine.uses_onednn_backward(kc, geo, base_op(kc.node.op)):
        oom = kc.fail("out of memory for the convolution gradient's buffers",
                      code="FLOWC_RESOURCE_EXHAUSTED")
        start = conv_engine.emit_onednn_backward(kc, geo, base_op(kc.node.op), plain_ptrs, rc,
                                                 call)
    else:
        start = f"int {rc} = {call};\n"
    return (start +
            f"if ({rc} == 1) {oom}\n"
            f"if ({rc} != 0) {kc.fail('sizes too large for 32-bit indices (of BLAS or a pooling window)')}\n")


for _name in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MaxPool", "AvgPool",
              "MaxPoolGrad", "AvgPoolGrad"):
    set_c_kernel(_name, emit_conv, _out_dims)
