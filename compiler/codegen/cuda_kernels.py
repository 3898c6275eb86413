"""The CUDA kernels of ops: one ``CudaKernel`` per op name, kept beside the op registry.

An op has a GPU kernel when a family module of ``cuda_ops/`` registers one here; registering also
sets ``OpDef.cuda_kernel``, which the ``place`` pass reads (``has_gpu_kernel``) to know the op may run on a GPU.
``supports(node)`` narrows that per node: a kernel whose output dims depend on an input's
*values* (a reshape's shape, a reduction's axes) is offered only where those values are known
at compile time, since the host code that sizes buffers cannot read device memory.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from compiler.ir.graph import Node
from compiler.ir.op_registry import get_op, has_gpu_kernel, has_op

# The family modules of ``compiler/codegen/cuda_ops/`` (beside ``c_ops/``, the C lowerings),
# imported once by ``load_all``.
FAMILIES = ("elementwise", "reduction", "nn", "matmul", "conv", "depthwise_conv", "array",
            "random", "state", "data_flow", "batch_norm", "image_resize", "space_batch",
            "identity_n")


@dataclass
class CudaKernel:
    """How one op runs on a GPU.

    ``emit(kc)`` returns host code (it launches kernels through ``CudaLaunch``);
    ``output_dims(kc)`` gives host C expressions of dynamic output dims (default: the op's C
    ``c_output_dims``); ``supports(node)`` says whether this node can use the kernel
    (default: always). ``host_inputs``: inputs whose *values* the output dims depend on (a
    reshape's shape); where they are not constants, the emitter copies them to the host
    (a stream sync) and the dims are computed there. ``emit`` None: the output is a view of
    input ``c_alias`` (no kernel). ``owns_outputs``: ``emit`` sets its outputs' dims and
    allocates their device buffers itself (sizes that depend on data, found as it runs).
    """
    emit: Optional[Callable]
    output_dims: Optional[Callable] = None
    supports: Optional[Callable[[Node], bool]] = None
    host_inputs: tuple = ()
    owns_outputs: bool = False


_KERNELS: Dict[str, CudaKernel] = {}
_LOADED = False


def register_cuda_kernel(op_name: str, emit: Optional[Callable],
                         output_dims: Optional[Callable] = None,
                         supports: Optional[Callable[[Node], bool]] = None,
                         host_inputs: tuple = (), owns_outputs: bool = False) -> None:
    """Give ``op_name`` a GPU kernel (the op must be registered)."""
    kernel = CudaKernel(emit, output_dims, supports, tuple(host_inputs), owns_outputs)
    _KERNELS[op_name] = kernel
    get_op(op_name).cuda_kernel = kernel


def load_all() -> None:
    """Import every CUDA family module (registering their kernels) once."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for name in FAMILIES:
        importlib.import_module(f"compiler.codegen.cuda_ops.{name}")


def cuda_kernel(op_name: str) -> Optional[CudaKernel]:
    load_all()
    return _KERNELS.get(op_name)


def has_cuda_kernel(node: Node) -> bool:
    """Whether ``node`` can run on a GPU: its op has a CUDA kernel that supports it."""
    load_all()
    return has_gpu_kernel(node)


def ops_with_cuda_kernels() -> List[str]:
    load_all()
    return sorted(_KERNELS)


def constant_inputs(*indices: int) -> Callable[[Node], bool]:
    """A ``supports`` predicate: the inputs at ``indices`` are compile-time constants."""
    def supports(node: Node) -> bool:
        from compiler.ir.construct import constant_value
        return all(i >= len(node.inputs) or constant_value(node.inputs[i]) is not None
                   for i in indices)
    return supports


def registered(op_name: str) -> bool:
    return has_op(op_name)
