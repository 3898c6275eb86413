"""The C lowering of the dense-layer ops (``compiler/ops/nn.py``): MatMul and BatchMatMulV2
(OpenBLAS gemm for floats, C loops for integers), BiasAdd, Softmax and LogSoftmax; and the BLAS
helpers other families' matrix products share (``blas_routines``, ``parallel_gemm``).

Integer products and sums are computed in unsigned arithmetic in C, so their two's-complement
wrap-around has no undefined behaviour.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from compiler.codegen.elementwise import broadcast_dim, use_vector_math
from compiler.codegen.kernel_context import KernelContext as CKernelContext, product
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.nn import _channel_axis
from compiler.codegen.c_ops.reduction import module_helper
from runtime.dtypes import DType

_INT32_MAX = 2**31 - 1
_UNSIGNED = {DType.i8: "uint8_t", DType.i16: "uint16_t", DType.i32: "uint32_t",
             DType.i64: "uint64_t", DType.u8: "uint8_t"}


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


for _name in ("MatMul", "BatchMatMulV2"):
    set_c_kernel(_name, emit_matmul, _matmul_output_dims)


# --- BiasAdd ---------------------------------------------------------------------------------
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


set_c_kernel("BiasAdd", emit_bias_add, lambda kc: [kc.inputs[0].dims])


# --- Softmax / LogSoftmax --------------------------------------------------------------------
def emit_softmax(kc: CKernelContext, log: bool) -> str:
    """C for (Log)Softmax over the last axis: max, shifted exp-sum in double, normalize."""
    x = kc.inputs[0]
    return (kc.render("softmax.c.j2", rows=x.dim_product(0, x.rank - 1),
                                  n=x.dim(-1), log=log,
                                  exp=use_vector_math(kc, kc.math("exp", x.dtype) + "(")[:-1]))


for _name, _log in (("Softmax", False), ("LogSoftmax", True)):
    set_c_kernel(_name, lambda kc, log=_log: emit_softmax(kc, log),
                 lambda kc: [kc.inputs[0].dims])
