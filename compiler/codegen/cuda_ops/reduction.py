"""GPU kernels of reductions: Sum, Mean, Prod, Max, Min, All, Any over constant axes, L2Loss,
BiasAddGrad (one thread per output element where each has few elements, else one block per
output element with a shared-memory tree inside the block), and
ArgMax/ArgMin (one thread per output, scanning the axis).

Accumulators, identities and finishing steps are the C backend's (``c_reducer``): floats sum
in double, integers wrap in unsigned arithmetic, Max/Min propagate NaN, a floating Prod keeps
a mantissa and an unbounded exponent (``prod_acc.c.j2``: an overflowing product is inf).
"""
from __future__ import annotations

from typing import List, Tuple

from compiler.codegen.c_ops.math import unsigned_ctype
from compiler.codegen.c_ops.reduction import (_arg_output_dims, _reduce_output_dims, c_reducer,
                                              collapse_groups, constant_axes)
from compiler.codegen.cuda_kernels import constant_inputs, register_cuda_kernel
from compiler.codegen.cuda_launch import CudaLaunch, device_loop
from compiler.codegen.kernel_context import KernelContext, product
from compiler.ops.nn import _channel_axis


def _blocks(nout: str) -> str:
    return f"(unsigned)(({nout}) < 65535 ? ({nout}) : 65535)"


def _group_strides(groups: List[Tuple[str, bool]]):
    kept, reduced = [], []
    for j, (e, r) in enumerate(groups):
        stride = product([g for g, _ in groups[j + 1:]])
        (reduced if r else kept).append((e, stride))
    return kept, reduced


# A reduction with at most SPLIT_MAX_OUTPUTS outputs (static) of at least SPLIT_MIN_COUNT
# elements each runs in two passes: one block per output alone would leave all but a few of
# the GPU's multiprocessors idle (a sum of 16M floats took 24 ms in one block on an H200).
SPLIT_MAX_OUTPUTS = 1024
SPLIT_MIN_COUNT = 1 << 16
SLICE_ELEMENTS = 1 << 14          # about this many elements per block in the first pass
MAX_SLICES = 1024


def _slices(nout: str, count: str) -> int:
    """Slices per output for the two-pass form (1: one pass); static sizes only."""
    if not (nout.isdigit() and count.isdigit()):
        return 1
    n, c = int(nout), int(count)
    if n == 0 or n > SPLIT_MAX_OUTPUTS or c < SPLIT_MIN_COUNT:
        return 1
    return max(1, min(MAX_SLICES, -(-c // SLICE_ELEMENTS), 65535 // n))


# At most this many elements per output: a thread per output (reduction_serial.cu.j2), not a
# block. Where the count is known only at run time, the host picks one of the two kernels.
SERIAL_MAX_COUNT = 32


def block_reduce(kc: KernelContext, groups, acc: str, init: str, combine, final,
                 load=lambda v: v, hint: str = "reduce") -> str:
    """Launch a reduction of input 0 over ``groups`` ([(extent, reduced)]): a thread per
    output where each has few elements, else a block per output (in two passes where a few
    outputs have many elements each)."""
    nout_expr = product([e for e, r in groups if not r])
    count_expr = product([e for e, r in groups if r])
    slices = _slices(nout_expr, count_expr)
    if slices > 1:
        return _two_pass_reduce(kc, groups, acc, init, combine, final, load, hint,
                                int(nout_expr), int(count_expr), slices)
    args = (kc, groups, acc, init, combine, final, load, hint, nout_expr, count_expr)
    if count_expr.isdigit():
        return (_thread_per_output if int(count_expr) <= SERIAL_MAX_COUNT
                else _block_per_output)(*args)
    return (f"if ((int64_t)({count_expr}) <= {SERIAL_MAX_COUNT}) {{\n"
            f"{_thread_per_output(*args)}\n}} else {{\n{_block_per_output(*args)}\n}}")


def _thread_per_output(kc: KernelContext, groups, acc: str, init: str, combine, final, load,
                       hint: str, nout_expr: str, count_expr: str) -> str:
    x = kc.inputs[0]
    launch = CudaLaunch(kc, hint + "_serial")
    o, px = launch.ptr(kc.out, writable=True), launch.ptr(x)
    kept, reduced = _group_strides(groups)
    v = launch.value
    body = kc.render("reduction_serial.cu.j2", acc=acc, init=init, combine=combine,
                     final=final, load=load, kept=[(v(e), v(s)) for e, s in kept],
                     reduced=[(v(e), v(s)) for e, s in reduced],
                     loop=device_loop("oi", v(nout_expr)), count=v(count_expr), x=px, o=o)
    return launch.launch(body, nout_expr)


def _block_per_output(kc: KernelContext, groups, acc: str, init: str, combine, final, load,
                      hint: str, nout_expr: str, count_expr: str) -> str:
    x = kc.inputs[0]
    launch = CudaLaunch(kc, hint)
    o, px = launch.ptr(kc.out, writable=True), launch.ptr(x)
    kept, reduced = _group_strides(groups)
    v = launch.value
    kept = [(v(e), v(s)) for e, s in kept]
    reduced = [(v(e), v(s)) for e, s in reduced]
    body = kc.render("reduction.cu.j2", acc=acc, init=init, combine=combine, final=final,
                     load=load, kept=kept, reduced=reduced, nout=v(nout_expr),
                     count=v(count_expr), x=px, o=o)
    return launch.launch(body, nout_expr, threads=_blocks(nout_expr))


def _two_pass_reduce(kc: KernelContext, groups, acc: str, init: str, combine, final, load,
                     hint: str, nout: int, count: int, slices: int) -> str:
    """Partial accumulators of ``slices`` contiguous slices per output into a stream-ordered
    scratch buffer, then one block per output combines its slices in order and finishes."""
    x = kc.inputs[0]
    kept, reduced = _group_strides(groups)
    first = CudaLaunch(kc, hint + "_slices")
    px, part = first.ptr(x), first.raw_ptr(acc, "flowc_part")
    v = first.value
    body = kc.render("reduction_split.cu.j2", acc=acc, init=init, combine=combine, load=load,
                     kept=[(v(e), v(s)) for e, s in kept],
                     reduced=[(v(e), v(s)) for e, s in reduced], nout=nout, count=count,
                     slices=slices, per_slice=-(-count // slices), x=px, part=part)
    blocks = nout * slices
    pass1 = first.launch(body, str(blocks), threads=_blocks(str(blocks)))
    second = CudaLaunch(kc, hint)
    o, partial = second.ptr(kc.out, writable=True), second.raw_ptr(acc, "flowc_part", False)
    body = kc.render("reduction.cu.j2", acc=acc, init=init, combine=combine,
                     final=lambda a, _n: final(a, str(count)), load=lambda e: e,
                     kept=[(str(nout), str(slices))], reduced=[(str(slices), "1")],
                     nout=nout, count=slices, x=partial, o=o)
    pass2 = second.launch(body, str(nout), threads=_blocks(str(nout)))
    nbytes = f"(size_t){blocks} * sizeof({acc})"
    return "\n".join([
        "{",
        f"{acc} *flowc_part = NULL;",
        f"if (cudaMallocAsync((void **)&flowc_part, {nbytes}, flowc_stream) != cudaSuccess) "
        + kc.fail("out of GPU memory for the reduction's partial results",
                  code="FLOWC_RESOURCE_EXHAUSTED"),
        pass1,
        pass2,
        "cudaFreeAsync(flowc_part, flowc_stream);",
        "}"])


def _reduction(op: str):
    def emit(kc: KernelContext) -> str:
        x = kc.inputs[0]
        red = c_reducer(op, kc)
        groups = collapse_groups(x.dims, constant_axes(kc))
        return block_reduce(kc, groups, red.acc, red.init, red.combine, red.final,
                            load=red.load, hint=op.lower())
    return emit


def _l2_loss(kc: KernelContext) -> str:
    x = kc.inputs[0]
    return block_reduce(kc, [(x.size, True)], "double", "0", lambda a, b: f"({a}) + ({b})",
                        lambda a, n: f"({kc.out.ctype})(({a}) * 0.5)",
                        load=lambda e: f"(double){e} * (double){e}", hint="l2loss")


def _bias_add_grad(kc: KernelContext) -> str:
    g = kc.inputs[0]
    axis = _channel_axis(kc.attr("data_format"), g.rank)
    groups = [(g.dim_product(0, axis), True), (g.dim(axis), False),
              (g.dim_product(axis + 1), True)]
    acc = "double" if g.dtype.is_floating else unsigned_ctype(g.dtype)
    return block_reduce(kc, groups, acc, "0", lambda a, b: f"({a}) + ({b})",
                        lambda a, n: f"({kc.out.ctype})({a})", load=lambda e: f"({acc}){e}",
                        hint="bias_add_grad")


def _arg(greater: str):
    def emit(kc: KernelContext) -> str:
        x = kc.inputs[0]
        (axis,) = constant_axes(kc)
        extent = x.dim(axis)
        kc.check(f"{extent} > 0", f"reduction axis {axis} is empty (size 0)")
        launch = CudaLaunch(kc, "argmax" if greater == ">" else "argmin")
        o, px = launch.ptr(kc.out, writable=True), launch.ptr(x)
        e, inner = launch.value(extent), launch.value(x.dim_product(axis + 1))
        n = launch.value(kc.out.size)
        nan = "if (v != v) { bi = d; break; }" if x.dtype.is_floating else ""
        first_nan = "if (best == best) " if x.dtype.is_floating else ""
        body = (f"{kc.target.grid_stride_loop('i', n)} {{\n"
                f"    const {x.ctype} *p = {px} + (i / {inner}) * {e} * {inner} + i % {inner};\n"
                f"    {x.ctype} best = p[0];\n    int64_t bi = 0;\n"
                f"    {first_nan}for (int64_t d = 1; d < {e}; d++) {{\n"
                f"        const {x.ctype} v = p[d * {inner}];\n"
                f"        {nan}\n"
                f"        if (v {greater} best) {{ best = v; bi = d; }}\n    }}\n"
                f"    {o}[i] = ({kc.out.ctype})bi;\n}}")
        return launch.launch(body, kc.out.size)
    return emit


for _op in ("Sum", "Mean", "Prod", "Max", "Min", "All", "Any"):
    register_cuda_kernel(_op, _reduction(_op), output_dims=_reduce_output_dims,
                         supports=constant_inputs(1))
register_cuda_kernel("ArgMax", _arg(">"), output_dims=_arg_output_dims, supports=constant_inputs(1))
register_cuda_kernel("ArgMin", _arg("<"), output_dims=_arg_output_dims, supports=constant_inputs(1))
register_cuda_kernel("L2Loss", _l2_loss)
register_cuda_kernel("BiasAddGrad", _bias_add_grad)
