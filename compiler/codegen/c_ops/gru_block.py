"""The C lowering of ``GRUBlockCell`` and ``GRUBlockCellGrad`` (``compiler/ops/gru_block.py``):
TensorFlow's shape checks at run time for the dims known only then, then
``codegen_templates/c/gru_block.c.j2``: the matrix products through the BLAS gemm MatMul's
kernel uses (``blas_routines``), the gates and the candidate in loops over the rows."""
from __future__ import annotations

from typing import List

from compiler.codegen.c_ops.nn import _blas_fits, blas_routines
from compiler.codegen.elementwise import use_vector_math
from compiler.codegen.kernel_context import KernelContext, product
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.gru_block import _FORWARD_INPUTS, _GRAD_INPUTS, dim_rules, rank_error


def _sum(a: str, b: str) -> str:
    if a.isdigit() and b.isdigit():
        return str(int(a) + int(b))
    return f"({a} + {b})"


def _sizes(kc: KernelContext):
    """(batch, input_size, cell_size) as C expressions, after TensorFlow's checks of every
    input's dims (at compile time where both sides are known, else at run time)."""
    names = _GRAD_INPUTS if kc.node.op == "GRUBlockCellGrad" else _FORWARD_INPUTS
    message = rank_error(names, [[None] * ref.rank for ref in kc.inputs])
    if message:
        raise kc.error(message)
    dims = [ref.dims for ref in kc.inputs]
    x, h = dims[0], dims[1]
    batch, inp, cell = x[0], x[1], h[1]
    for actual, want, what in dim_rules(names, dims):
        if "input_size + cell_size" in what:
            want = _sum(inp, cell)
        elif "cell_size * 2" in what:
            want = product(["2", cell])
        if actual.isdigit() and want.isdigit():
            if actual != want:
                raise kc.error(f"{what}: {actual} vs. {want}")
            continue
        kc.check(f"{actual} == {want}", what + ": %lld vs. %lld", f"(long long)({actual})",
                 f"(long long)({want})")
    return batch, inp, cell


def _dims(kc: KernelContext) -> List[List[str]]:
    batch, inp, cell = _sizes(kc)
    if kc.node.op == "GRUBlockCell":
        return [[batch, cell]] * 4
    return [[batch, inp], [batch, cell], [batch, cell], [batch, product(["2", cell])]]


def _emit(kc: KernelContext) -> str:
    batch, inp, cell = _sizes(kc)
    dtype = kc.inputs[0].dtype
    kc.require("blas")
    _blas_fits(kc, [batch, product(["2", cell]), _sum(inp, cell)])
    routines = blas_routines(kc, dtype, [batch, product(["2", cell]), cell])
    return kc.render("gru_block.c.j2",
                     part="forward" if kc.node.op == "GRUBlockCell" else "grad",
                     batch=batch, input_size=inp, cell=cell, gemm=routines["gemm"],
                     exp=_math(kc, "exp", dtype), tanh=_math(kc, "tanh", dtype))


def _math(kc: KernelContext, fn: str, dtype) -> str:
    """The C function for ``fn`` in ``dtype``: for float32 flowc's branch-free version, which
    lets the compiler vectorize the gate loops (a libm call keeps them scalar)."""
    return use_vector_math(kc, kc.math(fn, dtype) + "(")[:-1]


for _name in ("GRUBlockCell", "GRUBlockCellGrad"):
    set_c_kernel(_name, _emit, _dims)
