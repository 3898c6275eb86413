"""The C lowering of TensorFlow's fused LSTM ops (``compiler/ops/lstm_block.py``), rendered
from ``codegen_templates/c/lstm_block.c.j2``: LSTMBlockCell and BlockLSTM(V2) as one kernel
each (a BlockLSTM runs its whole time loop inside its kernel, its matrix products on BLAS),
LSTMBlockCellGrad elementwise, and BlockLSTMGrad(V2) as one kernel over the steps backwards.
Every size relation TensorFlow's kernels check is checked here too, before any output is
written, and so is ``seq_len_max`` (a scalar in [0, time])."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.nn import _blas_fits, blas_routines
from compiler.codegen.elementwise import use_vector_math
from compiler.codegen.kernel_context import KernelContext, product
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.lstm_block import LAYOUT


def _sum(a: str, b: str) -> str:
    if a.isdigit() and b.isdigit():
        return str(int(a) + int(b))
    return f"({a} + {b})"


def _check_cell_inputs(kc: KernelContext, first: int) -> tuple:
    """Checks x, cs_prev, h_prev, w, wci, wcf, wco, b (from input ``first``) agree; returns
    the C expressions of (batch, input, cell)."""
    x, cs, h, w, wci, wcf, wco, b = kc.inputs[first:first + 8]
    batch, inp, cell = x.dim(-2), x.dim(-1), cs.dim(1)
    four = product(["4", cell])
    kc.check_dims_equal(cs.dim(0), batch, "cs_prev.dims(0) != batch_size")
    kc.check_dims_equal(h.dim(0), batch, "h_prev.dims(0) != batch_size")
    kc.check_dims_equal(h.dim(1), cell, "h_prev.dims(1) != cell_size")
    kc.check_dims_equal(w.dim(0), _sum(inp, cell), "w.dim_size(0) != input_size + cell_size")
    kc.check_dims_equal(w.dim(1), four, "w.dim_size(1) != cell_size * 4")
    kc.check_dims_equal(b.dim(0), four, "b.dim_size(0) != cell_size * 4")
    for name, p in (("wci", wci), ("wcf", wcf), ("wco", wco)):
        kc.check_dims_equal(p.dim(0), cell, f"{name}.dim_size(0) != cell_size")
    return batch, inp, cell


def _check_states(kc: KernelContext, first: int, names: List[str], dims: List[str]) -> None:
    for k, name in enumerate(names):
        ref = kc.inputs[first + k]
        for d, want in enumerate(dims):
            kc.check_dims_equal(ref.dim(d), want, f"{name}.dims({d}) does not match")


def _seq_len_check(kc: KernelContext, time: str) -> str:
    """The run-time check of seq_len_max (input 0); returns its C expression."""
    kc.check_scalar(0, "seq_len_max")
    steps = f"{kc.inputs[0].data}[0]"
    kc.check(f"{steps} >= 0 && {steps} <= {time}",
             f"seq_len_max must be between 0 and %lld but is %lld", f"(long long)({time})",
             f"(long long)({steps})")
    return steps


def _cell_dims(kc: KernelContext) -> List[List[str]]:
    batch, _, cell = _check_cell_inputs(kc, 0)
    return [[batch, cell]] * 7


def _block_dims(kc: KernelContext) -> List[List[str]]:
    batch, _, cell = _check_cell_inputs(kc, 1)
    time = kc.inputs[1].dim(0)
    _seq_len_check(kc, time)
    return [[time, batch, cell]] * 7


def _cell_grad_dims(kc: KernelContext) -> List[List[str]]:
    batch, _, cell = _check_cell_inputs(kc, 0)
    _check_states(kc, 8, ["i", "cs", "f", "o", "ci", "co", "cs_grad", "h_grad"], [batch, cell])
    return [[batch, cell], [batch, product(["4", cell])], [cell], [cell], [cell]]


def _block_grad_dims(kc: KernelContext) -> List[List[str]]:
    batch, _, cell = _check_cell_inputs(kc, 1)
    time = kc.inputs[1].dim(0)
    _check_states(kc, 9, ["i", "cs", "f", "o", "ci", "co", "h", "cs_grad", "h_grad"],
                  [time, batch, cell])
    _seq_len_check(kc, time)
    return [kc.inputs[k].dims for k in range(1, 9)]


def _math(kc: KernelContext, fn: str, dtype) -> str:
    """The C function for ``fn`` in ``dtype``: for float32 flowc's branch-free version, which
    lets the compiler vectorize the gate loops (a libm call keeps them scalar)."""
    return use_vector_math(kc, kc.math(fn, dtype) + "(")[:-1]


def _emit(kc: KernelContext, part: str) -> str:
    node_op = kc.node.op
    first = 0 if node_op.startswith("LSTMBlockCell") else 1
    x, cs, h, w, wci, wcf, wco, b = kc.inputs[first:first + 8]
    seq = first == 1
    dtype = x.dtype
    batch, inp, cell = x.dim(-2), x.dim(-1), cs.dim(1)
    time = x.dim(0) if seq else "1"
    steps = f"{kc.inputs[0].data}[0]" if seq else "1"
    c_at, f_at = LAYOUT[node_op]
    peephole = bool(kc.attr("use_peephole"))
    args = dict(part=part, batch=batch, inp=inp, cell=cell, time=time, steps=steps,
                c_at=c_at, f_at=f_at, peephole=peephole, x=x.data, cs0=cs.data, h0=h.data,
                w=w.data, b=b.data, wci=wci.data, wcf=wcf.data, wco=wco.data,
                exp=_math(kc, "exp", dtype), tanh=_math(kc, "tanh", dtype), gemm="")
    if part != "cell_grad":
        kc.require("blas")
        _blas_fits(kc, [product([time, batch]), product(["4", cell]), _sum(inp, cell)])
        # oneDNN's gemm where it may run (float32; gemm_engine.py), chosen by the per-step
        # product with h_prev (the dnnl wrapper checks each call's size at run time)
        args["gemm"] = blas_routines(kc, dtype, [batch, product(["4", cell]), cell])["gemm"]
    if part == "forward":
        # the gate outputs nothing reads (inference: only h, and cs, which the steps read
        # back) are not written: 5 of the 7 arrays a step would store
        args["live"] = [k in (1, 6) or bool(kc.node.output_users(k)) for k in range(7)]
        clip = float(kc.attr("cell_clip"))
        args.update(forget_bias=repr(float(kc.attrs.get("forget_bias", 0.0))),
                    cell_clip=repr(clip) if clip > 0 else "")
    states = {} if part == "forward" else {
        n: kc.inputs[first + 8 + k].data for k, n in enumerate(["i", "cs", "f", "o", "ci", "co"])}
    return kc.render("lstm_block.c.j2", states=states, **args)


set_c_kernel("LSTMBlockCell", lambda kc: _emit(kc, "forward"), _cell_dims)
set_c_kernel("LSTMBlockCellGrad", lambda kc: _emit(kc, "cell_grad"), _cell_grad_dims)
for _name in ("BlockLSTM", "BlockLSTMV2"):
    set_c_kernel(_name, lambda kc: _emit(kc, "forward"), _block_dims)
for _name in ("BlockLSTMGrad", "BlockLSTMGradV2"):
    set_c_kernel(_name, lambda kc: _emit(kc, "block_grad"), _block_grad_dims)
