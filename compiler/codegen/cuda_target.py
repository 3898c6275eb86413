"""The CUDA target: the C target with CUDA's qualifiers, thread indexing and launch shape.

Type names, literals and math function names are the C target's (CUDA's device math library
has ``expf``, ``log1pf``, ... under the same names) but f16, stored as its bits; what differs
is how a pointer is marked restrict, how device helpers and kernels are qualified, and how a
thread finds its elements.
"""
from __future__ import annotations

from compiler.codegen.target import CTarget

# Threads per block of every generated kernel, and the most blocks a grid-stride launch uses.
BLOCK_SIZE = 256
MAX_BLOCKS = 4096


class CudaTarget(CTarget):
    name = "cuda"
    # nvcc has no _Float16 in device code: f16 is stored as its bits (uint16_t), as bf16 is,
    # and Cast converts with math_helpers.c.j2's bit-exact helpers.
    native_f16 = False
    restrict = "__restrict__"
    function_qualifier = "static __device__ __forceinline__"
    # Kernels have C names (pycuda finds them in the fatbin) and FLOWC_BLOCK threads a block.
    kernel_qualifier = "extern \"C\" __global__ void __launch_bounds__(FLOWC_BLOCK)"
    file_suffix = ".cu"
    block_size = BLOCK_SIZE

    @staticmethod
    def thread_index() -> str:
        """The first flat index a thread handles in a grid-stride loop."""
        return "((int64_t)blockIdx.x * blockDim.x + threadIdx.x)"

    @staticmethod
    def grid_stride() -> str:
        """How far a thread's index moves between iterations of a grid-stride loop."""
        return "((int64_t)gridDim.x * blockDim.x)"

    def grid_stride_loop(self, index: str, count: str) -> str:
        """``for (...)`` header of a grid-stride loop over ``[0, count)``."""
        return (f"for (int64_t {index} = {self.thread_index()}; {index} < (int64_t)({count}); "
                f"{index} += {self.grid_stride()})")


CUDA = CudaTarget()
