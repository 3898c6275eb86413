"""GPU kernels of MatMul and BatchMatMulV2, and of the fused matrix products the fusion passes
make on a GPU (``_MatMulBiasAdd``, ``_MatMulAssignSub``; a loop's ``_MatMulAccumulate``
stays on a CPU with its loop).

Float matrices use cuBLAS gemm where the module is built with cuBLAS (``FLOWC_CUBLAS``, see
``cuda_build.py``); otherwise (and for integers and broadcast batches) a generated 16x16
shared-memory tiled kernel runs. Both paths are in the source; the build picks one. Integer
products wrap (computed unsigned), as on the CPU.

A fused product is one kernel on the tiled path: the tile's store writes the product plus the
bias, or subtracts the scaled product from the variable in place, so the product is never
written out on its own. With cuBLAS the output starts as the bias and the gemm adds to it
(beta = 1); a variable's update is a gemm into scratch and one elementwise kernel.
"""
from __future__ import annotations

from typing import Callable, Optional

from compiler.codegen.c_ops.matmul_accumulate import _checked_product
from compiler.codegen.c_ops.nn import _batch_dims, _batch_strides, _transposes
from compiler.codegen.c_ops.state import _check_initialized, _check_value_dims, _var_expr
from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext, TensorRef, product
from runtime.dtypes import DType

_UNSIGNED = {DType.i32: "uint32_t", DType.i64: "uint64_t"}

# store(launch) -> (at -> the C statement writing element `at` of the result from `sum`)
StoreFor = Callable[[CudaLaunch], Callable[[str], str]]


def _op_transposes(kc: KernelContext):
    """(transpose a, transpose b): MatMul's and the fused products' attrs, or BatchMatMulV2's
    adjoints."""
    if kc.node.op == "BatchMatMulV2":
        return _transposes(kc)
    return kc.attr("transpose_a"), kc.attr("transpose_b")


def _tiled(kc: KernelContext, a: TensorRef, b: TensorRef, m: str, n: str, k: str,
           store_for: StoreFor, hint: str, count: str, guard: bool = False) -> str:
    """Launch the tiled kernel over op(a) @ op(b) (batched as the node's output says)."""
    ta, tb = _op_transposes(kc)
    rank = max(a.rank, b.rank) - 2
    batch = _batch_dims(kc, check=True) if rank > 0 else []
    launch = CudaLaunch(kc, f"{hint}_{'t' if ta else 'n'}{'t' if tb else 'n'}")
    if guard:
        launch.guard_state()
    store = store_for(launch)
    pa, pb = launch.ptr(a), launch.ptr(b)
    v = launch.value
    body = kc.render("matmul.cu.j2", part="tiled", acc=_UNSIGNED.get(a.dtype, a.ctype),
                     store=store, a=pa, b=pb, m=v(m), n=v(n), k=v(k), lda=v(a.dim(-1)),
                     ldb=v(b.dim(-1)), ta=ta, tb=tb,
                     batch=v(product(batch)) if batch else "1",
                     batch_dims=[v(d) for d in batch],
                     a_strides=[v(s) for s in _batch_strides(kc, a, rank)],
                     b_strides=[v(s) for s in _batch_strides(kc, b, rank)])
    tiles = f"((({m}) + 15) / 16) * ((({n}) + 15) / 16) * {product(batch) if batch else '1'}"
    return launch.launch(body, count, threads=f"(unsigned)(({tiles}) < 65535 ? ({tiles}) : 65535)")


def _gemm(kc: KernelContext, a: TensorRef, b: TensorRef, m: str, n: str, k: str, c: str,
          beta1: bool) -> str:
    """Host code: one cuBLAS gemm of op(a) @ op(b) into device pointer ``c`` (+ c: beta1)."""
    kc.module.add_global(kc.render("matmul.cu.j2", part="cublas"))
    ta, tb = _op_transposes(kc)
    return (f"if (({m}) * ({n}) > 0 && flowc_gemm(flowc_stream, {int(a.dtype is DType.f64)}, "
            f"{int(ta)}, {int(tb)}, {m}, {n}, {k}, {a.var}.data, {a.dim(-1)}, {b.var}.data, "
            f"{b.dim(-1)}, {c}, {int(beta1)})) "
            + kc.fail("cuBLAS gemm failed", code="FLOWC_INTERNAL"))


def _either(tiled: str, cublas: Optional[str]) -> str:
    return tiled if cublas is None else "#ifdef FLOWC_CUBLAS\n" + cublas + "\n#else\n" + tiled + "\n#endif"


def _elementwise(kc: KernelContext, hint: str, count: str, stmt_for, guard: bool = False) -> str:
    """Launch a grid-stride loop over ``count`` elements; ``stmt_for(launch)`` is its body."""
    launch = CudaLaunch(kc, hint)
    if guard:
        launch.guard_state()
    body = stmt_for(launch)
    return launch.launch(f"{kc.target.grid_stride_loop('i', launch.value(count))} {body}", count)


def _matmul(kc: KernelContext) -> str:
    a, b = kc.inputs
    out = kc.out
    ta, tb = _transposes(kc)
    m = a.dim(-1) if ta else a.dim(-2)
    k_a = a.dim(-2) if ta else a.dim(-1)
    k_b = b.dim(-1) if tb else b.dim(-2)
    n = b.dim(-2) if tb else b.dim(-1)
    kc.check_dims_equal(k_a, k_b, "matrix size-incompatible: inner dimensions differ")

    def store(launch):
        o = launch.ptr(out, writable=True)
        return lambda at: f"{o}[{at}] = ({out.ctype})sum;"
    hint = "matmul" if kc.node.op == "MatMul" else "batch_matmul"
    tiled = _tiled(kc, a, b, m, n, k_a, store, hint, out.size)
    if not a.dtype.is_floating or out.rank > 2:
        return tiled
    return _either(tiled, _gemm(kc, a, b, m, n, k_a, f"{out.var}.data", beta1=False))


def _matmul_bias_add(kc: KernelContext) -> str:
    a, b, bias = kc.inputs
    out = kc.out
    m, n, k = _checked_product(kc, a, b)
    kc.check_dims_equal(bias.dim(0), n, "bias size differs from the product's columns")
    acc = a.ctype

    def store(launch):
        o, pbias = launch.ptr(out, writable=True), launch.ptr(bias)
        return lambda at: f"{o}[{at}] = ({out.ctype})(sum + ({acc}){pbias}[col]);"
    tiled = _tiled(kc, a, b, m, n, k, store, "matmul_bias", out.size)

    def fill(launch):
        o, pbias = launch.ptr(out, writable=True), launch.ptr(bias)
        return f"{o}[i] = {pbias}[i % {launch.value(n)}];"
    cublas = "\n".join([_elementwise(kc, "bias_rows", out.size, fill),
                        _gemm(kc, a, b, m, n, k, f"{out.var}.data", beta1=True)])
    return _either(tiled, cublas)


def _matmul_assign_sub(kc: KernelContext) -> str:
    _, a, b, scale = kc.inputs
    m, n, k = _checked_product(kc, a, b)
    _check_initialized(kc)
    _check_value_dims(kc, 2, [m, n], "the update")
    value = f"{_var_expr(kc)}->value.data"
    T = a.ctype

    def store(launch):
        o, s = launch.raw_ptr(T, value), launch.ptr(scale)
        return lambda at: f"{o}[{at}] = ({T})({o}[{at}] - {s}[0] * sum);"
    tiled = _tiled(kc, a, b, m, n, k, store, "matmul_assign_sub", f"({m}) * ({n})", guard=True)

    def update(launch):
        o, s = launch.raw_ptr(T, value), launch.ptr(scale)
        g = launch.raw_ptr(T, "flowc_product", writable=False)
        return f"{o}[i] -= {s}[0] * {g}[i];"
    nbytes = f"(size_t)({m}) * ({n}) * sizeof({T})"
    cublas = "\n".join([
        "{",
        "void *flowc_product = NULL;",
        f"FLOWC_CUDA(cudaMallocAsync(&flowc_product, ({nbytes}) ? ({nbytes}) : 64, flowc_stream));",
        _gemm(kc, a, b, m, n, k, "flowc_product", beta1=False),
        _elementwise(kc, "assign_sub_product", f"({m}) * ({n})", update, guard=True),
        "cudaFreeAsync(flowc_product, flowc_stream);",
        "}"])
    return _either(tiled, cublas)


register_cuda_kernel("MatMul", _matmul)
register_cuda_kernel("BatchMatMulV2", _matmul)
register_cuda_kernel("_MatMulBiasAdd", _matmul_bias_add)
register_cuda_kernel("_MatMulAssignSub", _matmul_assign_sub)
