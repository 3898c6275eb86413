"""The C lowering of the training ops (``compiler/ops/nn_grad.py``): the elementwise gradient
ops (each a C expression of its inputs ``a0``, ``a1``, also read by the fusion of elementwise
ops), L2Loss, (Sparse)SoftmaxCrossEntropyWithLogits, BiasAddGrad, UnsortedSegmentSum,
BroadcastGradientArgs and MaxPoolGradGrad (whose C geometry the CUDA kernel shares).
"""
from __future__ import annotations

from typing import Callable, List

from compiler.codegen.c_ops import conv as c_conv
from compiler.codegen.elementwise import (broadcast_dim, emit_elementwise, input_strides,
                                          use_vector_math)
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops import conv
from compiler.codegen.c_ops.array.common import _check_alloc
from compiler.codegen.c_ops.math import unsigned_ctype
from compiler.ops.nn_grad import _channel_axis
from runtime.dtypes import DType


# --- elementwise gradient ops ----------------------------------------------------------------
def _same_dims2(kc: KernelContext) -> List[List[str]]:
    a, b = kc.inputs
    for k in range(a.rank):
        kc.check_dims_equal(a.dim(k), b.dim(k), f"inputs must have the same shape: dim {k}")
    return [[a.dim(k) if a.shape[k] is not None else b.dim(k) for k in range(a.rank)]]


def _lit(kc: KernelContext, value: float) -> str:
    return kc.literal(value, kc.out.dtype)


def _grad_op(name: str, c_expr: Callable[[KernelContext], str]) -> None:
    """Attach the C of an elementwise two-input gradient op (inputs read as a0, a1)."""
    set_c_kernel(name, lambda kc: emit_elementwise(kc, c_expr(kc)), _same_dims2, c_expr=c_expr)


_grad_op("ReluGrad", lambda kc: f"a1 > 0 ? a0 : {_lit(kc, 0)}")
_grad_op("Relu6Grad", lambda kc: f"(a1 > 0 && a1 < 6) ? a0 : {_lit(kc, 0)}")
_grad_op("EluGrad", lambda kc: f"a1 < 0 ? a0 * (a1 + {_lit(kc, 1)}) : a0")
_grad_op("SoftplusGrad", lambda kc: f"a0 / ({kc.math('exp', kc.out.dtype)}(-a1) + {_lit(kc, 1)})")
_grad_op("SigmoidGrad", lambda kc: f"a1 * a0 * ({_lit(kc, 1)} - a0)")
_grad_op("TanhGrad", lambda kc: f"a1 * ({_lit(kc, 1)} - a0 * a0)")
_grad_op("RsqrtGrad", lambda kc: f"{_lit(kc, -0.5)} * (a1 * a0) * (a0 * a0)")
_grad_op("SqrtGrad", lambda kc: f"{_lit(kc, 0.5)} * a1 / a0")
_grad_op("ReciprocalGrad", lambda kc: "-a1 * a0 * a0")


# --- L2Loss ----------------------------------------------------------------------------------
def _l2_loss_c(kc: KernelContext) -> str:
    t = kc.inputs[0]
    return (f"double acc = 0;\nconst {t.ctype} *x = {t.data};\n"
            f"for (int64_t i = 0; i < {t.size}; i++) acc += (double)x[i] * (double)x[i];\n"
            f"{kc.out.data}[0] = ({kc.out.ctype})(acc * 0.5);")


set_c_kernel("L2Loss", _l2_loss_c, lambda kc: [[]])


# --- softmax cross-entropy -------------------------------------------------------------------
def _xent_c(kc: KernelContext, sparse: bool) -> str:
    f, lab = kc.inputs
    back = kc.outputs[1]
    if sparse:
        kc.check_dims_equal(f.dim(0), lab.dim(0), "features and labels differ in batch size")
        strides = [[f.dim(1), "1"], ["0", "0"]]
    else:
        strides = [input_strides(back, f), input_strides(back, lab)]
    fail = kc.fail("Received a label value of %lld which is outside the valid range of "
                   "[0, %lld)", "(long long)lbl", "(long long)n")
    rows, n = _xent_dims(kc)[1]
    # (the exp loop vectorizes with flowc's float exp; libm's expf keeps it scalar)
    exp = use_vector_math(kc, kc.math("exp", f.dtype) + "(")[:-1]
    return kc.render("xent.c.j2", sparse=sparse, rows=rows, n=n, strides=strides,
                     exp=exp, fail=fail)


def _xent_dims(kc: KernelContext) -> List[List[str]]:
    """[rows], [rows, classes]: the broadcast of the inputs' dims (checked at run time)."""
    f, lab = kc.inputs
    if kc.node.op == "SparseSoftmaxCrossEntropyWithLogits":
        return [[f.dim(0)], [f.dim(0), f.dim(1)]]
    dims = []
    for k in range(2):
        exprs = [t.dim(k - (2 - t.rank)) for t in (f, lab) if k - (2 - t.rank) >= 0]
        dims.append(broadcast_dim(kc, exprs, f"dim {k}"))
    return [[dims[0]], dims]


set_c_kernel("SoftmaxCrossEntropyWithLogits", lambda kc: _xent_c(kc, False), _xent_dims)
set_c_kernel("SparseSoftmaxCrossEntropyWithLogits", lambda kc: _xent_c(kc, True), _xent_dims)


# --- BiasAddGrad -----------------------------------------------------------------------------
def _bias_add_grad_c(kc: KernelContext) -> str:
    g = kc.inputs[0]
    axis = _channel_axis(kc.attr("data_format"), g.rank)
    floating = g.dtype.is_floating
    acc = "double" if floating else unsigned_ctype(g.dtype)
    return kc.render("bias_add_grad.c.j2", outer=g.dim_product(0, axis), channels=g.dim(axis),
                     inner=g.dim_product(axis + 1), acc=acc)


set_c_kernel("BiasAddGrad", _bias_add_grad_c, lambda kc: [[kc.inputs[0].dim(
    _channel_axis(kc.attr("data_format"), kc.inputs[0].rank))]])


# --- UnsortedSegmentSum ----------------------------------------------------------------------
def _num_segments(kc: KernelContext) -> str:
    v = kc.input_value(2)
    if v is not None:
        return str(int(v))
    return f"((int64_t){kc.inputs[2].data}[0])"


def _segment_dims(kc: KernelContext) -> List[List[str]]:
    data, ids = kc.inputs[0], kc.inputs[1]
    return [[_num_segments(kc)] + data.dims[ids.rank:]]


def segment_sum_checks(kc: KernelContext) -> str:
    """UnsortedSegmentSum's run-time checks (shared with the CUDA kernel, which runs them on
    the host): num_segments >= 0, one segment id per row of data, an output that can be
    sized. Returns num_segments as C."""
    data, ids = kc.inputs[0], kc.inputs[1]
    n = _num_segments(kc)
    if not n.isdigit():
        kc.check(f"{n} >= 0", "num_segments must be >= 0, got %lld", f"(long long){n}")
    for k in range(ids.rank):
        kc.check_dims_equal(ids.dim(k), data.dim(k), f"segment_ids dim {k} differs from data")
    _check_alloc(kc, [int(d) if d.isdigit() else d for d in [n] + data.dims[ids.rank:]],
                 data.dtype.itemsize)
    return n


def _segment_c(kc: KernelContext) -> str:
    data, ids = kc.inputs[0], kc.inputs[1]
    n = segment_sum_checks(kc)
    fail = kc.fail("segment_ids[%lld] = %lld is out of range [0, %lld)", "(long long)r",
                   "(long long)s", "(long long)nseg")
    floating = data.dtype.is_floating
    acc = "double" if data.dtype is DType.f32 else (data.ctype if floating
                                                     else unsigned_ctype(data.dtype))
    return kc.render("segment_sum.c.j2", n=n, nrows=ids.size,
                     inner=data.dim_product(ids.rank), acc=acc,
                     acc_f32=data.dtype is DType.f32, fail=fail)


set_c_kernel("UnsortedSegmentSum", _segment_c, _segment_dims)


# --- BroadcastGradientArgs -------------------------------------------------------------------
def _bga_helper(kc: KernelContext) -> str:
    t = kc.inputs[0]
    name = f"flowc_bga_{t.dtype.ir_name}"
    kc.module.add_global(kc.render("broadcast_grad_args.c.j2", name=name, T=t.ctype))
    return name


def _bga_args(kc: KernelContext) -> str:
    a, b = kc.inputs
    return f"{a.data}, {a.dim(0)}, {b.data}, {b.dim(0)}"


def _bga_dims(kc: KernelContext) -> List[List[str]]:
    fn, args = _bga_helper(kc), _bga_args(kc)
    return [[f"{fn}({args}, 0, NULL)"], [f"{fn}({args}, 1, NULL)"]]


def _bga_c(kc: KernelContext) -> str:
    fn, args = _bga_helper(kc), _bga_args(kc)
    kc.check(f"{fn}({args}, 0, NULL) >= 0", "Incompatible shapes in BroadcastGradientArgs")
    return (f"{fn}({args}, 0, {kc.outputs[0].data});\n"
            f"{fn}({args}, 1, {kc.outputs[1].data});")


set_c_kernel("BroadcastGradientArgs", _bga_c, _bga_dims)


# --- MaxPoolGradGrad -------------------------------------------------------------------------
def max_pool_grad_grad_geometry(kc: KernelContext, c_kernel: bool = True) -> "c_conv.CGeometry":
    """The window geometry in C; the first call adds the run-time checks of the input shapes
    (and, with ``c_kernel``, the C kernel's function to the module: not for the GPU's)."""
    cached = getattr(kc, "_pool_grad_grad_geometry", None)
    if cached is not None:
        return cached
    g = conv._geometry(kc.attrs, kc.error, ksize=True)
    x, y, gx = kc.inputs
    sfx = c_conv._helpers(kc, kc.out.dtype)          # the window and pooling helpers first
    if c_kernel:
        kc.module.add_global(kc.render("pool_grad_grad.c.j2", sfx=sfx, T=kc.out.ctype))
    k = kc.attr("ksize")
    geo = c_conv.CGeometry(x.dims, str(k[1]), str(k[2]), x.dim(3), g)
    c_conv.check_output_sizes(kc, geo)
    want = geo.out_dims()
    for d in range(4):
        kc.check_dims_equal(gx.dim(d), x.dim(d), f"grad dim {d} differs from orig_input")
        kc.check_dims_equal(y.dim(d), want[d],
                            f"orig_output dim {d} differs from the window output")
    kc._pool_grad_grad_geometry = geo
    return geo


def max_pool_grad_grad_dims(kc: KernelContext, c_kernel: bool = True) -> List[List[str]]:
    dims = max_pool_grad_grad_geometry(kc, c_kernel).out_dims()
    kc.check(f"flowc_conv_dims_ok({', '.join(dims)}, {kc.out.dtype.itemsize})",
             "the output shape is too large (its byte size overflows int64)")
    return [dims]


def _max_pool_grad_grad_c(kc: KernelContext) -> str:
    geo = max_pool_grad_grad_geometry(kc)
    x, _, gx = kc.inputs
    return (f"flowc_max_pool_grad_grad_{kc.out.dtype.ir_name}({x.data}, {gx.data}, "
            f"{kc.out.data}, {geo.call_args()});")


set_c_kernel("MaxPoolGradGrad", _max_pool_grad_grad_c, max_pool_grad_grad_dims)
