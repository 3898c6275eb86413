"""The GPU kernel of IdentityN: each input copied to its output on the stream (IdentityN has
several outputs, so they cannot all be views of its inputs, as in the C kernel,
``compiler/codegen/c_ops/identity_n.py``). Resource handles stay on a CPU."""
from __future__ import annotations

from compiler.codegen.cuda_kernels import register_cuda_kernel
from compiler.codegen.kernel_context import KernelContext
from compiler.ir.graph import Node
from runtime.dtypes import DType


def _identity_n(kc: KernelContext) -> str:
    return "\n".join(
        f"if (({x.size}) > 0) FLOWC_CUDA(cudaMemcpyAsync({o.var}.data, {x.var}.data, "
        f"(size_t)({x.size}) * sizeof({x.ctype}), cudaMemcpyDeviceToDevice, flowc_stream));"
        for x, o in zip(kc.inputs, kc.outputs))


def _supports(node: Node) -> bool:
    return all(o.dtype is not DType.resource for o in node.outputs)


register_cuda_kernel("IdentityN", _identity_n, supports=_supports)
