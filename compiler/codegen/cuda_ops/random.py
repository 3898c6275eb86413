"""GPU kernels of the Philox random ops (RandomUniform, RandomStandardNormal,
TruncatedNormal, RandomUniformInt): the CPU's stream, counter for counter.

The host reserves the run's numbers in the node's stream exactly as the C kernel does (one
atomic add on ``rt->streams``), then each thread of a grid-stride loop makes whole groups of
outputs from Philox blocks ``base + g`` (see ``codegen_templates/cuda/philox.cu.j2``).
"""
from __future__ import annotations

from compiler.codegen.c_ops.random import _out_dims, _u64
from compiler.codegen.cuda_kernels import constant_inputs, register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch
from compiler.codegen.kernel_context import KernelContext
from compiler.ops.random import BLOCKS_PER_OUTPUT
from runtime.dtypes import DType


def _random(kind: str):
    def emit(kc: KernelContext) -> str:
        _out_dims(kc, checks=True)
        kc.module.add_global(kc.render("philox.cu.j2", part="helpers"))
        out = kc.out
        wide = out.dtype in (DType.f64, DType.i64)
        group = 2 if wide else 4
        stream = kc.module.stream_index(kc.node.name)
        reserve = (f"const uint64_t base = __atomic_fetch_add(flowc_rt->streams[{stream}], "
                   f"(uint64_t)({out.size}) * {BLOCKS_PER_OUTPUT}u, __ATOMIC_RELAXED);")
        launch = CudaLaunch(kc, f"random_{kind}")
        o = launch.ptr(out, writable=True)
        lo = hi = report = ""
        if kind == "int":
            lo, hi = launch.ptr(kc.inputs[1]), launch.ptr(kc.inputs[2])
            report = launch.report("Need minval < maxval")
        n = launch.value(out.size)
        base = launch.value("base", "uint64_t")
        groups = f"(({n}) + {group - 1}) / {group}"
        body = kc.render("philox.cu.j2", part="kernel", kind=kind, f32=out.dtype is DType.f32,
                         wide=wide, T=out.ctype, o=o, n=n, base=base, lo=lo, hi=hi,
                         report=report, seed=_u64(kc.attr("seed")),
                         seed2=_u64(kc.attr("seed2")), thread=kc.target.thread_index(),
                         loop=kc.target.grid_stride_loop("g", groups))
        count = f"(({out.size}) + {group - 1}) / {group}"
        return "{\n" + reserve + "\n" + launch.launch(body, count) + "\n}"
    return emit


for _name, _kind in (("RandomUniform", "uniform"), ("RandomStandardNormal", "normal"),
                     ("TruncatedNormal", "truncated"), ("RandomUniformInt", "int")):
    register_cuda_kernel(_name, _random(_kind), supports=constant_inputs(0))
