"""Which library runs a float32 matrix product (gemm) in the generated C: oneDNN's
``dnnl_sgemm`` (where ``compiler/codegen/onednn.py`` finds oneDNN) or OpenBLAS's
``cblas_sgemm`` (scipy-openblas32, always there).

Why: scipy-openblas32 (0.3.34, DYNAMIC_ARCH) does not know AMD's Zen 5 cores and runs its
Haswell (AVX2) kernels on them, at half the AVX-512 machine's speed; oneDNN's gemm picks its
AVX-512 kernels by what the CPU reports. Measured one call at a time in C (best of 7, one
thread, the shared 2-core AMD EPYC AVX-512 machine; examples/benchmarks/README.md, "Matrix
products on oneDNN"): dnnl_sgemm took 0.44x-0.52x OpenBLAS's time from 32x32x32 up to
9216x576x64 (the LSTM's recurrent 32x128x512 product with B transposed 0.49x, the
Transformer's 2048x128x512 0.52x), 0.14x-0.33x on products of 2 to 8 rows that are not one
row (OpenBLAS packs them), and 1.3x-2.1x on products below about 16x16x16-24x24x24
(oneDNN's per-call dispatch, about 0.3 us). One-row and one-column products stay OpenBLAS's
gemv either way (matmul.c.j2).

``FLOWC_GEMM_ENGINE``: ``auto`` (the default) gives oneDNN every float32 gemm of a call site
that can reach ``MIN_WORK`` (m * n * k; checked again at run time for dims known only then);
``onednn`` every float32 gemm; ``blas`` none. float64 and the CUDA target keep their BLAS.
The convolutions' im2col gemm keeps OpenBLAS (``FLOWC_CONV_ENGINE`` chooses their engine).
"""
from __future__ import annotations

from typing import Sequence

from compiler.codegen.kernel_context import KernelContext as CKernelContext
from compiler.codegen.onednn import available
from compiler.errors import CompileError
from compiler.options import setting
from runtime.dtypes import DType

MIN_WORK = 16384              # m * n * k from which dnnl_sgemm beat OpenBLAS (32x32x16 and up)
ENGINES = ("auto", "onednn", "blas")


def engine_setting() -> str:
    """``FLOWC_GEMM_ENGINE``: auto (default), onednn or blas."""
    text = setting("FLOWC_GEMM_ENGINE").strip().lower() or "auto"
    if text not in ENGINES:
        raise CompileError(f"FLOWC_GEMM_ENGINE must be one of {', '.join(ENGINES)}, not {text!r}")
    return text


def min_work() -> int:
    """The least m * n * k a gemm runs on oneDNN (0 under ``onednn``)."""
    return 0 if engine_setting() == "onednn" else MIN_WORK


def uses_onednn_gemm(kc: CKernelContext, dtype: DType, dims: Sequence[str]) -> bool:
    """Whether a gemm of ``dtype`` with ``dims`` (m, n, k: C expressions, digits when static)
    at this call site may run on oneDNN."""
    if dtype is not DType.f32 or kc.target.name != "c":
        return False
    engine = engine_setting()
    if engine == "blas" or not available():
        return False
    if all(d.isdigit() for d in dims):
        m, n, k = (int(d) for d in dims)
        return m > 0 and n > 0 and k > 0 and m * n * k >= min_work()
    return True
