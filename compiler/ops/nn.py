"""Dense-layer ops: MatMul and BatchMatMulV2 (OpenBLAS gemm for floats, C loops for integers),
BiasAdd, Softmax and LogSoftmax (over the last axis, max-subtracted for stability).

Integer products and sums wrap around in two's complement (computed in unsigned arithmetic in
C, so there is no undefined behaviour; numpy wraps the same way).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from compiler.codegen.elementwise import broadcast_dim
from compiler.codegen.kernel_context import KernelContext as CKernelContext, product
from compiler.errors import ExecutionError
from compiler.ir.types import broadcast_shapes, shape_str
from compiler.ops.reduction import module_helper
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType

_INT32_MAX = 2**31 - 1
_UNSIGNED = {DType.i8: "uint8_t", DType.i16: "uint16_t", DType.i32: "uint32_t",
             DType.i64: "uint64_t", DType.u8: "uint8_t"}


# --- MatMul / BatchMatMulV2: shapes ---------------------------------------------------------
def _matrix_dims(shape: Optional[tuple], transpose: bool) -> Tuple[Optional[int], Optional[int]]:
    """(rows, cols) of the matrix as used in the product (after the optional transpose)."""
    if shape is None:
        return None, None
    r, c = shape[-2], shape[-1]
    return (c, r) if transpose else (r, c)


def _check_inner(ctx, k_a: Optional[int], k_b: Optional[int]) -> None:
    if k_a is not None and k_b is not None and k_a != k_b:
        raise ctx.error(f"matrix size-incompatible: inner dimensions {k_a} and {k_b} differ "
                        f"(shapes {shape_str(ctx.input_shape(0))} and {shape_str(ctx.input_shape(1))})")


def _matmul_shape(ctx) -> list:
    a, b = ctx.input_shape(0), ctx.input_shape(1)
    for i, s in enumerate((a, b)):
        if s is not None and len(s) != 2:
            raise ctx.error(f"MatMul input {i} must be a matrix (rank 2), got shape {shape_str(s)}")
    m, k_a = _matrix_dims(a, ctx.attr("transpose_a"))
    k_b, n = _matrix_dims(b, ctx.attr("transpose_b"))
    _check_inner(ctx, k_a, k_b)
    return [(m, n)]


def _batch_matmul_shape(ctx) -> list:
    x, y = ctx.input_shape(0), ctx.input_shape(1)
    for i, s in enumerate((x, y)):
        if s is not None and len(s) < 2:
            raise ctx.error(f"BatchMatMulV2 input {i} must have rank >= 2, got shape {shape_str(s)}")
    m, k_x = _matrix_dims(x, ctx.attr("adj_x"))
    k_y, n = _matrix_dims(y, ctx.attr("adj_y"))
    _check_inner(ctx, k_x, k_y)
    if x is None or y is None:
        return [None]
    try:
        batch = broadcast_shapes([x[:-2], y[:-2]])
    except ValueError:
        raise ctx.error(f"batch dimensions of {shape_str(x)} and {shape_str(y)} cannot be "
                        "broadcast together") from None
    return [tuple(batch) + (m, n)]


def _matmul_ref(ctx, a, b):
    if ctx.attrs["transpose_a"]:
        a = a.T
    if ctx.attrs["transpose_b"]:
        b = b.T
    return np.matmul(a, b)


def _batch_matmul_ref(ctx, x, y):
    if ctx.attrs["adj_x"]:
        x = np.swapaxes(x, -1, -2)
    if ctx.attrs["adj_y"]:
        y = np.swapaxes(y, -1, -2)
    return np.matmul(x, y)


# --- MatMul / BatchMatMulV2: C -------------------------------------------------------------
def _matmul_output_dims(kc: CKernelContext) -> List[List[str]]:
    a, b = kc.inputs
    ta, tb = _transposes(kc)
    rows = a.dim(-1) if ta else a.dim(-2)
    cols = b.dim(-2) if tb else b.dim(-1)
    return [_batch_dims(kc) + [rows, cols]]


def _transposes(kc: CKernelContext) -> Tuple[bool, bool]:
    if kc.node.op == "MatMul":
        return kc.attr("transpose_a"), kc.attr("transpose_b")
    return kc.attr("adj_x"), kc.attr("adj_y")


def _batch_dims(kc: CKernelContext, check: bool = False) -> List[str]:
    """C expressions of the broadcast batch dims (checked at run time when ``check``)."""
    a, b = kc.inputs
    rank = kc.out.rank - 2
    dims = []
    for k in range(rank):
        exprs = [t.dim(j) for t in (a, b) for j in [k - (rank - (t.rank - 2))] if j >= 0]
        result = broadcast_dim(kc, exprs, f"batch dim {k}", check)
        dims.append(result)
    return dims


def _batch_strides(kc: CKernelContext, t, rank: int) -> List[str]:
    """Per output batch dim, the element stride of input ``t`` (0 where it is broadcast)."""
    strides = []
    for k in range(rank):
        j = k - (rank - (t.rank - 2))
        if j < 0:
            strides.append("0")
            continue
        d, s = t.dim(j), t.stride(j)
        strides.append("0" if d == "1" else s if d.isdigit() else f"({d} == 1 ? 0 : {s})")
    return strides


def _blas_fits(kc: CKernelContext, dims: Sequence[str]) -> None:
    """BLAS takes 32-bit sizes: fail at compile time or run time if a dim does not fit."""
    for d in dims:
        if d.isdigit():
            if int(d) > _INT32_MAX:
                raise kc.error(f"dimension {d} is too large for BLAS (32-bit sizes)")
        else:
            kc.check(f"{d} <= INT32_MAX", "dimension %lld is too large for BLAS (32-bit sizes)",
                     f"(long long)({d})")


GEMM_PARALLEL_MIN_WORK = 1 << 20       # m * n * k below which a gemm is not cut across threads


def blas_routines(kc: CKernelContext, dtype: DType) -> dict:
    """The BLAS routines for a float dtype, as template arguments: scipy-openblas32's gemv and
    ger, and for gemm the module's wrapper that cuts a large product across flowc's threads
    (``gemm_parallel.c.j2``)."""
    p = "scipy_cblas_s" if dtype is DType.f32 else "scipy_cblas_d"
    kc.require("blas")
    return {"gemm": parallel_gemm(kc, dtype), "gemv": p + "gemv", "ger": p + "ger"}


def parallel_gemm(kc: CKernelContext, dtype: DType) -> str:
    """Define the module's thread-sharing gemm for ``dtype`` once; returns its C name."""
    name = f"flowc_gemm_{dtype.ir_name}"
    kc.require("openmp")
    module_helper(kc, name, kc.render(
        "gemm_parallel.c.j2", name=name, T=kc.target.c_type(dtype),
        gemm="scipy_cblas_sgemm" if dtype is DType.f32 else "scipy_cblas_dgemm",
        min_work=GEMM_PARALLEL_MIN_WORK))
    return name


def emit_matmul(kc: CKernelContext) -> str:
    """C for MatMul / BatchMatMulV2: a per-matrix product in a loop over broadcast batch dims."""
    a, b = kc.inputs
    ta, tb = _transposes(kc)
    m = a.dim(-1) if ta else a.dim(-2)
    k_a = a.dim(-2) if ta else a.dim(-1)
    k_b = b.dim(-1) if tb else b.dim(-2)
    n = b.dim(-2) if tb else b.dim(-1)
    kc.check_dims_equal(k_a, k_b, "matrix size-incompatible: inner dimensions differ")
    rank = kc.out.rank - 2
    batch = _batch_dims(kc, check=True)
    # With no batch dims on b (and a not transposed) the batch folds into the rows of one gemm.
    fold = rank > 0 and not ta and all(s == "0" for s in _batch_strides(kc, b, rank))
    rows = product(a.dims[:-1]) if fold else m
    blas = a.dtype.is_floating
    if blas:
        kc.require("blas")
        _blas_fits(kc, [rows, n, k_a, a.dim(-1), b.dim(-1)])
    fn = f"flowc_matmul_{a.dtype.ir_name}_{'t' if ta else 'n'}{'t' if tb else 'n'}"
    module_helper(kc, fn, kc.render(
        "matmul.c.j2", part="helper", fn=fn, ta=ta, tb=tb, blas=blas,
        **blas_routines(kc, a.dtype), utype=_UNSIGNED.get(a.dtype, "")))
    loops = [] if fold else batch
    return (kc.render("matmul.c.j2", part="body", fn=fn, m=rows, n=n, k=k_a,
                                  lda=a.dim(-1), ldb=b.dim(-1), batch=loops,
                                  a_strides=_batch_strides(kc, a, rank),
                                  b_strides=_batch_strides(kc, b, rank)))


_MATMUL_TYPES = "T: {f32, f64, i32, i64}"

register_op("MatMul", inputs=["a: T", "b: T"], outputs=["product: T"],
            attrs=["transpose_a: bool = false", "transpose_b: bool = false", _MATMUL_TYPES],
            shape=_matmul_shape, kernel=_matmul_ref, c_kernel=emit_matmul,
            c_output_dims=_matmul_output_dims, group="matmul",
            doc="Matrix product of two matrices, either optionally transposed.")

register_op("BatchMatMulV2", inputs=["x: T", "y: T"], outputs=["output: T"],
            attrs=["adj_x: bool = false", "adj_y: bool = false", _MATMUL_TYPES],
            shape=_batch_matmul_shape, kernel=_batch_matmul_ref, c_kernel=emit_matmul,
            c_output_dims=_matmul_output_dims, group="matmul",
            doc="Matrix products over the last two dims, with broadcasting batch dims.")


# --- BiasAdd ---------------------------------------------------------------------------------
def _channel_axis(data_format: str, rank: int) -> int:
    return 1 if data_format == "NCHW" else rank - 1


def _check_format(ctx_or_kc, data_format: str) -> None:
    if data_format not in ("NHWC", "NCHW"):
        raise ctx_or_kc.error(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")


def _bias_add_shape(ctx) -> list:
    fmt = ctx.attr("data_format")
    _check_format(ctx, fmt)
    value, bias = ctx.input_shape(0), ctx.input_shape(1)
    if bias is not None and len(bias) != 1:
        raise ctx.error(f"bias must be a vector (rank 1), got shape {shape_str(bias)}")
    if value is None:
        return [None]
    least = 3 if fmt == "NCHW" else 2
    if len(value) < least:
        raise ctx.error(f"value must have rank >= {least} for data_format {fmt}, "
                        f"got shape {shape_str(value)}")
    axis = _channel_axis(fmt, len(value))
    c, bc = value[axis], (bias[0] if bias is not None else None)
    if c is not None and bc is not None and c != bc:
        raise ctx.error(f"bias has {bc} elements but value {shape_str(value)} has {c} channels")
    out = list(value)
    out[axis] = c if c is not None else bc
    return [tuple(out)]


def _bias_add_ref(ctx, value, bias):
    axis = _channel_axis(ctx.attrs["data_format"], value.ndim)
    if value.shape[axis] != bias.shape[0]:
        raise ExecutionError(f"bias has {bias.shape[0]} elements but value has "
                             f"{value.shape[axis]} channels", ctx.node)
    shape = [1] * value.ndim
    shape[axis] = bias.shape[0]
    return value + bias.reshape(shape)


def _add_expr(kc: CKernelContext, a: str, b: str) -> str:
    """``a + b`` in the output type; integers wrap (computed unsigned, so no overflow UB)."""
    t = kc.out.dtype
    if t.is_integer and t.itemsize >= 4:
        u = _UNSIGNED[t]
        return f"({kc.out.ctype})(({u})({a}) + ({u})({b}))"
    return f"({kc.out.ctype})({a} + {b})"


def emit_bias_add(kc: CKernelContext) -> str:
    """C for BiasAdd: [outer, channels, inner] with the bias constant over ``inner``."""
    value, bias = kc.inputs
    axis = _channel_axis(kc.attr("data_format"), value.rank)
    channels = value.dim(axis)
    kc.check_dims_equal(channels, bias.dim(0), "bias size differs from the channel dimension")
    return (kc.render("bias_add.c.j2", outer=value.dim_product(0, axis),
                                  channels=channels, inner=value.dim_product(axis + 1),
                                  add=_add_expr(kc, "v", "c")))


register_op("BiasAdd", inputs=["value: T", "bias: T"], outputs=["output: T"],
            attrs=["T: {numeric}", 'data_format: string = "NHWC"'],
            shape=_bias_add_shape, kernel=_bias_add_ref, c_kernel=emit_bias_add,
            c_output_dims=lambda kc: [kc.inputs[0].dims], group="elementwise",
            doc="Adds a 1-D bias along the channel dim (last for NHWC, 1 for NCHW).")


# --- Softmax / LogSoftmax --------------------------------------------------------------------
def _softmax_shape(ctx) -> list:
    s = ctx.input_shape(0)
    if s is not None and len(s) < 1:
        raise ctx.error("logits must have rank >= 1, got a scalar")
    return [s]


def _softmax_parts(x: np.ndarray):
    """(x - max, sum of exp(x - max) in float64) over the last axis; NaN propagates."""
    m = np.max(x, axis=-1, keepdims=True, initial=-np.inf).astype(x.dtype)
    shifted = x - m
    e = np.exp(shifted)
    return shifted, e, np.sum(e, axis=-1, keepdims=True, dtype=np.float64)


def _softmax_ref(ctx, logits):
    _, e, s = _softmax_parts(logits)
    return e / s.astype(logits.dtype)


def _log_softmax_ref(ctx, logits):
    shifted, _, s = _softmax_parts(logits)
    return shifted - np.log(s).astype(logits.dtype)


def emit_softmax(kc: CKernelContext, log: bool) -> str:
    """C for (Log)Softmax over the last axis: max, shifted exp-sum in double, normalize."""
    x = kc.inputs[0]
    return (kc.render("softmax.c.j2", rows=x.dim_product(0, x.rank - 1),
                                  n=x.dim(-1), log=log, exp=kc.math("exp", x.dtype)))


for _name, _ref, _log in (("Softmax", _softmax_ref, False), ("LogSoftmax", _log_softmax_ref, True)):
    register_op(_name, inputs=["logits: T"], outputs=[("logsoftmax" if _log else "softmax") + ": T"],
                attrs=["T: {f32, f64}"], shape=_softmax_shape, kernel=_ref,
                c_kernel=lambda kc, log=_log: emit_softmax(kc, log),
                c_output_dims=lambda kc: [kc.inputs[0].dims], group="other",
                doc="Softmax over the last axis, computed with the row max subtracted.")
