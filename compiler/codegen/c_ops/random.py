"""The C lowering of the random ops (``compiler/ops/random.py``): RandomUniform,
RandomStandardNormal, TruncatedNormal and RandomUniformInt.

The generated C (``philox.c.j2``) draws the same Philox-4x32-10 numbers as the numpy reference,
bit for bit. Each random node has a stream in the runtime (``flowc_rt->streams``, numbered by
the module's ``stream_index``); a run that draws n numbers reserves ``BLOCKS_PER_OUTPUT * n``
Philox blocks of it. ``_out_dims`` and ``_u64`` are shared with the CUDA kernels and the
candidate samplers' C code.
"""
from __future__ import annotations

from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.codegen.c_ops.array.common import _c, _check_alloc, _elements
from compiler.ops.random import BLOCKS_PER_OUTPUT
from runtime.dtypes import DType


def _out_dims(kc: KernelContext, checks: bool) -> List[str]:
    dims = _elements(kc, 0, kc.out.rank)
    if checks:
        for d in dims:
            if isinstance(d, str):
                kc.check(f"{d} >= 0", "Dimension %lld must be >= 0", f"(long long){d}")
        _check_alloc(kc, dims, kc.out.dtype.itemsize)
    return [_c(d) for d in dims]


def _u64(value: int) -> str:
    return f"UINT64_C({value & (2**64 - 1)})"


def _random_c(kc: KernelContext, kind: str) -> str:
    _out_dims(kc, checks=True)
    kc.module.add_global(kc.render("philox.c.j2", part="helpers"))
    dtype = kc.out.dtype
    fail = ""
    if kind == "int":
        fail = kc.fail("Need minval < maxval: %lld >= %lld", "(long long)lo", "(long long)hi")
    stream = kc.module.stream_index(kc.node.name)
    return kc.render("philox.c.j2", part="kernel", kind=kind, f32=dtype is DType.f32,
                     stream=stream, blocks_per_output=BLOCKS_PER_OUTPUT,
                     wide=dtype in (DType.f64, DType.i64), seed=_u64(kc.attr("seed")),
                     seed2=_u64(kc.attr("seed2")), fail=fail)


_KINDS = (("RandomUniform", "uniform"), ("RandomStandardNormal", "normal"),
          ("TruncatedNormal", "truncated"), ("RandomUniformInt", "int"))

for _name, _kind in _KINDS:
    set_c_kernel(_name, lambda kc, kind=_kind: _random_c(kc, kind),
                 lambda kc: [_out_dims(kc, checks=False)])
