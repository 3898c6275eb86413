"""GPU kernels of MatMul and BatchMatMulV2: cuBLAS gemm for float matrices where the module is
built with cuBLAS (``FLOWC_CUBLAS``, see ``cuda_build.py``), else (and for integers and
broadcast batches) a generated 16x16 shared-memory tiled kernel. Both paths are in the source;
the build picks one. Integer products wrap (computed unsigned), as on the CPU."""
from __future__ import annotations

from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext, product
from compiler.ops.nn import _batch_dims, _batch_strides, _transposes
from runtime.dtypes import DType

_UNSIGNED = {DType.i32: "uint32_t", DType.i64: "uint64_t"}


def _matmul(kc: KernelContext) -> str:
    a, b = kc.inputs
    out = kc.out
    ta, tb = _transposes(kc)
    m = a.dim(-1) if ta else a.dim(-2)
    k_a = a.dim(-2) if ta else a.dim(-1)
    k_b = b.dim(-1) if tb else b.dim(-2)
    n = b.dim(-2) if tb else b.dim(-1)
    kc.check_dims_equal(k_a, k_b, "matrix size-incompatible: inner dimensions differ")
    rank = out.rank - 2
    batch = _batch_dims(kc, check=True)
    launch = CudaLaunch(kc, f"matmul_{'t' if ta else 'n'}{'t' if tb else 'n'}")
    o, pa, pb = launch.ptr(out, writable=True), launch.ptr(a), launch.ptr(b)
    v = launch.value
    acc = _UNSIGNED.get(a.dtype, a.ctype)
    body = kc.render("matmul.cu.j2", part="tiled", acc=acc, T=out.ctype, o=o, a=pa, b=pb,
                     m=v(m), n=v(n), k=v(k_a), lda=v(a.dim(-1)), ldb=v(b.dim(-1)), ta=ta, tb=tb,
                     batch=v(product(batch)) if batch else "1",
                     batch_dims=[v(d) for d in batch],
                     a_strides=[v(s) for s in _batch_strides(kc, a, rank)],
                     b_strides=[v(s) for s in _batch_strides(kc, b, rank)])
    tiles = f"((({m}) + 15) / 16) * ((({n}) + 15) / 16) * {product(batch) if batch else '1'}"
    tiled = launch.launch(body, out.size,
                          threads=f"(unsigned)(({tiles}) < 65535 ? ({tiles}) : 65535)")
    if not a.dtype.is_floating or rank > 0:
        return tiled
    kc.module.add_global(kc.render("matmul.cu.j2", part="cublas"))
    gemm = (f"if ({out.size} > 0 && flowc_gemm(flowc_stream, {int(a.dtype is DType.f64)}, "
            f"{int(ta)}, {int(tb)}, {m}, {n}, {k_a}, {a.var}.data, {a.dim(-1)}, {b.var}.data, "
            f"{b.dim(-1)}, {out.var}.data)) "
            + kc.fail("cuBLAS gemm failed", code="FLOWC_ERROR"))
    return "#ifdef FLOWC_CUBLAS\n" + gemm + "\n#else\n" + tiled + "\n#endif"


register_cuda_kernel("MatMul", _matmul)
register_cuda_kernel("BatchMatMulV2", _matmul)
