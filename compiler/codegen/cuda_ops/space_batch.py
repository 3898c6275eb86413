"""GPU kernels of SpaceToBatchND and BatchToSpaceND (``compiler/ops/space_batch.py``): index
maps, one thread per output element, with the C kernels' semantics
(``compiler/codegen/c_ops/space_batch.py``): the block shape and the paddings or crops are
constants (the C kernels need them so too), the batch and spatial dims may be fed and are
checked on the host as there. SpaceToBatchND writes zeros in the padding."""
from __future__ import annotations

from typing import List

import numpy as np

from compiler.codegen.c_ops.space_batch import _plan, b2s_checks, s2b_checks
from compiler.codegen.cuda_kernels import constant_inputs, register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.cuda_ops.array import _offset, index_map
from compiler.codegen.kernel_context import KernelContext


def _inner(steps: List[int], k: int) -> int:
    """The row-major weight of block offset k (the product of the later block sizes)."""
    return int(np.prod(steps[k + 1:])) if steps[k + 1:] else 1


def _space_to_batch(kc: KernelContext) -> str:
    """out[o * N + b, i_1.., rest] = x[b, i_1 * s_1 + o_1 - pad_1, .., rest] (0 outside)."""
    x = kc.inputs[0]
    m, steps, pairs = _plan(kc)
    s2b_checks(kc)

    def spatial(launch: CudaLaunch) -> List[str]:
        n = launch.value(x.dim(0))
        return [f"(c{k + 1} * {s} + (c0 / {n} / {_inner(steps, k)}) % {s} - {a})"
                for k, (s, (a, _)) in enumerate(zip(steps, pairs))]

    def source(launch: CudaLaunch) -> str:
        n = launch.value(x.dim(0))
        coords = ([f"c0 % {n}"] + spatial(launch)
                  + [f"c{d}" for d in range(m + 1, x.rank)])
        return _offset(launch, x, coords)

    def inside(launch: CudaLaunch) -> str:
        return " && ".join(f"{p} >= 0 && {p} < {launch.value(x.dim(k + 1))}"
                           for k, p in enumerate(spatial(launch))) or "1"
    return index_map(kc, x, source, valid=inside, hint="space_to_batch")


def _batch_to_space(kc: KernelContext) -> str:
    """out[b, t_1 - crop_1, .., rest] = x[o * B + b, t_1 / s_1, .., rest] with o the
    row-major index of (t_1 % s_1, ..)."""
    x, out = kc.inputs[0], kc.out
    m, steps, pairs = _plan(kc)
    b2s_checks(kc)

    def source(launch: CudaLaunch) -> str:
        t = [f"(c{k + 1} + {a})" for k, (a, _) in enumerate(pairs)]
        off = " + ".join(f"({tk} % {s}) * {_inner(steps, k)}"
                         for k, (tk, s) in enumerate(zip(t, steps))) or "0"
        coords = ([f"(({off}) * {launch.value(out.dim(0))} + c0)"]
                  + [f"({tk} / {s})" for tk, s in zip(t, steps)]
                  + [f"c{d}" for d in range(m + 1, x.rank)])
        return _offset(launch, x, coords)
    return index_map(kc, x, source, hint="batch_to_space")


register_cuda_kernel("SpaceToBatchND", _space_to_batch, supports=constant_inputs(1, 2))
register_cuda_kernel("BatchToSpaceND", _batch_to_space, supports=constant_inputs(1, 2))
