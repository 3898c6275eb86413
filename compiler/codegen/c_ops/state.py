"""The C lowering of resource variables (``compiler/ops/state.py``): the handle, reads,
assignments, in-place updates, row gathers and scatters (``codegen_templates/c/variables.c.j2``
and ``sparse_rows.c.j2``).

In generated C a handle's data points at the variable's ``flowc_var`` (from ``rt->vars``);
``FLOWC_VAR`` reaches it. The checks on a variable's state (initialized, rank and dims, every
row index in range before the first row is touched) are shared with the CUDA kernels
(``compiler/codegen/cuda_ops/state.py``) and the fused updates (``_ResourceScatterSubScaled``,
``_MatMulAssignSub``).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.codegen.kernel_context import KernelContext, shape_printf
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.state import declared_shape, variable_key


def _var_expr(kc: KernelContext) -> str:
    return f"FLOWC_VAR({kc.inputs[0].var})"


def _render(kc: KernelContext, part: str, **extra) -> str:
    return kc.render("variables.c.j2", part=part, v=_var_expr(kc), **extra)


def _check_initialized(kc: KernelContext) -> None:
    v = _var_expr(kc)
    kc.checks.append(f"if (!{v}->initialized) "
                     + kc.fail("variable '%s' is not initialized (run its initializer or restore "
                               "it from a checkpoint)", f"{v}->name",
                               code="FLOWC_FAILED_PRECONDITION"))


def _check_value_dims(kc: KernelContext, rank: int, dims: List[str], what: str) -> None:
    """The variable's current value must have rank ``rank`` and these dims."""
    v = _var_expr(kc)
    kc.check(f"{v}->value.rank == {rank}",
             f"variable '%s' has rank %d; {what} has rank {rank}", f"{v}->name",
             f"(int){v}->value.rank")
    for d, e in enumerate(dims):
        kc.check(f"{v}->value.dims[{d}] == {e}",
                 f"variable '%s' has dim {d} = %lld; {what} has %lld", f"{v}->name",
                 f"(long long){v}->value.dims[{d}]", f"(long long)({e})")


def _handle_c(kc: KernelContext) -> str:
    node = kc.node
    index = kc.module.variable_index(variable_key(node), node.attrs["dtype"],
                                     node.attrs.get("shape"))
    return f"{kc.out.var}.data = (void *)flowc_rt->vars[{index}];"


def _read_c_dims(kc: KernelContext) -> List[List[str]]:
    v = _var_expr(kc)
    return [[str(d) if d is not None else f"{v}->value.dims[{k}]"
             for k, d in enumerate(kc.out.shape)]]


def _read_c(kc: KernelContext) -> str:
    _check_initialized(kc)
    out = kc.out
    _check_value_dims(kc, out.rank, [str(d) for d in out.shape if d is not None]
                      if all(d is not None for d in out.shape) else [], "the read")
    return _render(kc, "read")


def assign_shape_checks(kc: KernelContext, v: str) -> None:
    """Run-time checks that an assigned value's dims unknown at compile time match the
    variable's declared shape (``v``: a ``flowc_var *`` expression; the C and CUDA kernels)."""
    value = kc.inputs[1]
    declared = declared_shape(kc.node.inputs[0])
    if declared is None:
        return
    for d, want in enumerate(declared):
        if want is not None and value.shape[d] is None:
            kc.check(f"{value.dim(d)} == {want}",
                     f"variable '%s' is declared with dim {d} = {want}; the value has %lld",
                     f"{v}->name", f"(long long){value.dim(d)}")


def _assign_c(kc: KernelContext) -> str:
    assign_shape_checks(kc, _var_expr(kc))
    return _render(kc, "assign", value=kc.inputs[1])


def _update_c(op: str):
    def emit(kc: KernelContext) -> str:
        _check_initialized(kc)
        value = kc.inputs[1]
        _check_value_dims(kc, value.rank, value.dims, "the update")
        return _render(kc, "update", value=value, op=op)
    return emit


def _rows_checks(kc: KernelContext) -> str:
    """Checks that the variable has rows; returns the statement reporting a bad index (an
    InvalidArgumentError, as TensorFlow's ResourceGather and scatter updates report it)."""
    v = _var_expr(kc)
    _check_initialized(kc)
    kc.check(f"{v}->value.rank >= 1", "variable '%s' is a scalar", f"{v}->name")
    return kc.fail("indices[%lld] = %lld is not in [0, %lld) (rows of variable '%s')",
                   "(long long)i", "(long long)ix", "(long long)rows", f"{v}->name")


def _gather_c_dims(kc: KernelContext) -> List[List[str]]:
    v = _var_expr(kc)
    ind = kc.inputs[1]
    out = kc.out
    dims = list(ind.dims)
    for k in range(ind.rank, out.rank):
        d = out.shape[k]
        dims.append(str(d) if d is not None else f"{v}->value.dims[{k - ind.rank + 1}]")
    return [dims]


def gather_shape_checks(kc: KernelContext, v: str) -> None:
    """Run-time checks that variable ``v`` has the rank and known dims the gather's output
    implies (shared by the C and CUDA kernels)."""
    ind, out = kc.inputs[1], kc.out
    kc.check(f"{v}->value.rank == {out.rank - ind.rank + 1}",
             f"variable '%s' has rank %d; the gather expects {out.rank - ind.rank + 1}",
             f"{v}->name", f"(int){v}->value.rank")
    for k in range(ind.rank, out.rank):
        if out.shape[k] is not None:
            kc.check(f"{v}->value.dims[{k - ind.rank + 1}] == {out.shape[k]}",
                     f"variable '%s' has dim {k - ind.rank + 1} = %lld, expected {out.shape[k]}",
                     f"{v}->name", f"(long long){v}->value.dims[{k - ind.rank + 1}]")


def static_row_elements(shape: Optional[tuple], lead: int) -> Optional[int]:
    """Elements of one row (the dims after the first ``lead``) when they are all known."""
    if shape is None or any(d is None for d in shape[lead:]):
        return None
    return int(np.prod(shape[lead:], dtype=np.int64))


def render_sparse_rows(kc: KernelContext, part: str, **extra) -> str:
    """C of a row gather or scatter (codegen_templates/c/sparse_rows.c.j2)."""
    extra.setdefault("scale", None)
    return kc.render("sparse_rows.c.j2", part=part, v=_var_expr(kc), **extra)


def _gather_c(kc: KernelContext) -> str:
    ind = kc.inputs[1]
    bad = _rows_checks(kc)
    gather_shape_checks(kc, _var_expr(kc))
    return render_sparse_rows(kc, "gather", indices=ind, bad_index=bad,
                              inner=static_row_elements(kc.out.shape, ind.rank))


def scatter_shape_checks(kc: KernelContext, v: str) -> None:
    """Run-time checks that variable ``v`` (a ``flowc_var *`` expression) has the rank and
    trailing dims its scatter's updates need, and that the updates have one row per index
    (their leading dims are those of the indices; shared by the C and CUDA kernels). A scalar
    update is one value for every row."""
    ind, upd = kc.inputs[1], kc.inputs[2]
    if upd.rank == 0:
        return
    kc.check(f"{v}->value.rank == {upd.rank - ind.rank + 1}",
             f"variable '%s' has rank %d; the updates need {upd.rank - ind.rank + 1}",
             f"{v}->name", f"(int){v}->value.rank")
    for k in range(ind.rank, upd.rank):
        kc.check(f"{v}->value.dims[{k - ind.rank + 1}] == {upd.dim(k)}",
                 f"variable '%s' has dim {k - ind.rank + 1} = %lld; the updates have %lld",
                 f"{v}->name", f"(long long){v}->value.dims[{k - ind.rank + 1}]",
                 f"(long long)({upd.dim(k)})")
    # Without this, updates with fewer rows than indices were read past their end (garbage
    # rows; a SIGSEGV for long index lists) and extra rows were silently dropped.
    lead = [k for k in range(min(ind.rank, upd.rank)) if upd.dim(k) != ind.dim(k)]
    if lead:
        got, got_args = shape_printf(upd)
        want_dims = ind.dims + [f"{v}->value.dims[{d}]"
                                for d in range(1, upd.rank - ind.rank + 1)]
        want = "[" + ", ".join("%lld" for _ in want_dims) + "]"
        kc.check(" && ".join(f"{upd.dim(k)} == {ind.dim(k)}" for k in lead),
                 f"updates of shape {got} must have shape indices.shape + variable.shape[1:] "
                 f"= {want}", *got_args, *[f"(long long)({d})" for d in want_dims])


def _scatter_c(mode: str):
    def emit(kc: KernelContext) -> str:
        ind, upd = kc.inputs[1], kc.inputs[2]
        bad = _rows_checks(kc)
        v = _var_expr(kc)
        scatter_shape_checks(kc, v)
        inner = static_row_elements(upd.shape, ind.rank) if upd.rank else None
        return render_sparse_rows(kc, "scatter", indices=ind, updates=upd, mode=mode,
                                  bad_index=bad, inner=inner)
    return emit


def _is_initialized_c(kc: KernelContext) -> str:
    return f"{kc.out.data}[0] = {_var_expr(kc)}->initialized != 0;"


# --- registrations ---------------------------------------------------------------------------
set_c_kernel("VarHandleOp", _handle_c)
set_c_kernel("ReadVariableOp", _read_c, _read_c_dims)
set_c_kernel("AssignVariableOp", _assign_c)
for _name, _c_op in (("AssignAddVariableOp", "+="), ("AssignSubVariableOp", "-=")):
    set_c_kernel(_name, _update_c(_c_op))
set_c_kernel("ResourceGather", _gather_c, _gather_c_dims)
for _name, _mode in (("ResourceScatterAdd", "add"), ("ResourceScatterSub", "sub"),
                     ("ResourceScatterUpdate", "update")):
    set_c_kernel(_name, _scatter_c(_mode))
set_c_kernel("VarIsInitializedOp", _is_initialized_c)
