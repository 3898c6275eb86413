"""Resource variables: ``VarHandleOp`` and the ops that read and update a variable's state.

A variable lives in the runtime's ``ResourceStore`` (outside any step), keyed by its shared
name (the ``VarHandleOp``'s ``shared_name``, or its node name when that is empty). A handle is
a ``resource`` tensor: in generated C its data points at the variable's ``flowc_var`` (from
``rt->vars``), in the interpreter it is a ``VarHandle``. Updates happen in place; reads copy.
Every read and every read-modify-write update is atomic per variable (``update_value``), in
the interpreter as in generated C, so concurrent steps' ``AssignAdd``s add up exactly.

Every op here is stateful, so no pass folds, merges or drops it. Reading an uninitialized
variable, a value of the wrong shape, or an index out of range is an error naming the node
and the variable, and (for the scatter updates) leaves the variable unchanged: every index is
checked before the first row is touched.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from compiler.errors import ExecutionError, node_error
from compiler.ir.types import TensorType, shape_str
from compiler.ops.handles import resource_source
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType
from runtime.errors import FailedPreconditionError, FlowcError
from runtime.resources import ResourceError


@dataclass(frozen=True)
class VarHandle:
    """The interpreter's value of a resource handle."""
    name: str
    dtype: DType
    shape: Optional[tuple]


def variable_key(node) -> str:
    """The store key of the variable a ``VarHandleOp`` names."""
    return node.attrs.get("shared_name") or node.name


def handle_source(out):
    """The ``VarHandleOp`` a handle comes from (through Identity), or None."""
    return resource_source(out, ("VarHandleOp",))


def declared_shape(node_input) -> Optional[tuple]:
    """The declared shape of the variable behind a handle input (None if unknown)."""
    src = handle_source(node_input)
    if src is None:
        return None
    shape = src.attrs.get("shape")
    return None if shape is None else tuple(shape)


def _check_declared(ctx, value_shape, what: str) -> None:
    declared = declared_shape(ctx.node.inputs[0])
    if declared is None or value_shape is None:
        return
    if len(declared) != len(value_shape) or any(
            d is not None and v is not None and d != v for d, v in zip(declared, value_shape)):
        raise ctx.error(f"{what} of shape {shape_str(value_shape)} does not fit variable "
                        f"'{_var_name(ctx.node)}' of shape {shape_str(declared)}")


def _var_name(node) -> str:
    src = handle_source(node.inputs[0]) if node.inputs else None
    return variable_key(src) if src is not None else node.inputs[0].node.name


# --- shape functions -----------------------------------------------------------------------
def _handle_shape(ctx):
    return [TensorType(DType.resource, ())]


def _read_shape(ctx):
    return [TensorType(ctx.attr("dtype"), declared_shape(ctx.node.inputs[0]))]


def _assign_shape(ctx):
    _check_declared(ctx, ctx.input_shape(1), "the value")
    return []


def _gather_shape(ctx):
    var = declared_shape(ctx.node.inputs[0])
    ind = ctx.input_shape(1)
    if ctx.attr("batch_dims") != 0:
        raise ctx.error("ResourceGather supports batch_dims=0 only")
    if var is not None and len(var) == 0:
        raise ctx.error(f"variable '{_var_name(ctx.node)}' is a scalar; it has no rows to gather")
    if var is None or ind is None:
        return [TensorType(ctx.attr("dtype"), None)]
    return [TensorType(ctx.attr("dtype"), tuple(ind) + tuple(var[1:]))]


def _scatter_shape(ctx):
    var = declared_shape(ctx.node.inputs[0])
    ind, upd = ctx.input_shape(1), ctx.input_shape(2)
    if var is not None and len(var) == 0:
        raise ctx.error(f"variable '{_var_name(ctx.node)}' is a scalar; it has no rows to update")
    if var is not None and ind is not None and upd is not None and len(upd) != 0:
        want = tuple(ind) + tuple(var[1:])
        if len(want) != len(upd) or any(a is not None and b is not None and a != b
                                        for a, b in zip(want, upd)):
            raise ctx.error(f"updates of shape {shape_str(upd)} must have shape indices.shape + "
                            f"variable.shape[1:] = {shape_str(want)}")
    return []


# --- reference kernels ---------------------------------------------------------------------
def _store(ctx):
    if ctx.state is None or not hasattr(ctx.state, "variable"):
        raise node_error(FailedPreconditionError, "variables need a session's state; run this "
                         "graph in a Session", ctx.node)
    return ctx.state


def _variable(ctx, handle):
    h = handle[()] if isinstance(handle, np.ndarray) else handle
    if not isinstance(h, VarHandle):
        raise ExecutionError(f"input 0 is not a variable handle ({type(h).__name__})", ctx.node)
    try:
        return _store(ctx).variable(h.name, h.dtype, h.shape)
    except FlowcError as e:
        raise ExecutionError(str(e), ctx.node) from None


def _value(ctx, var) -> np.ndarray:
    if not var.initialized:
        raise node_error(FailedPreconditionError, f"variable '{var.info.name}' is not "
                         "initialized (run its initializer or restore it from a checkpoint)",
                         ctx.node)
    return var.read()


def _handle_kernel(ctx):
    shape = ctx.attrs.get("shape")
    return [np.array(VarHandle(variable_key(ctx.node), ctx.attrs["dtype"],
                               None if shape is None else tuple(shape)), dtype=object)]


def _read_kernel(ctx, handle):
    return [_value(ctx, _variable(ctx, handle))]


def _assign_kernel(ctx, handle, value):
    var = _variable(ctx, handle)
    try:
        var.assign(np.asarray(value, ctx.attrs["dtype"].np))
    except FlowcError as e:
        raise ExecutionError(str(e), ctx.node) from None
    return []


def update_value(ctx, var, compute) -> None:
    """Set ``var`` to ``compute(its current value)`` atomically: the variable's lock is held
    from the read to the write (``Variable.update``), so updates from concurrent steps all
    land, as in TensorFlow and in generated C (``flowc_var_lock``). ``compute`` raising leaves
    the variable unchanged; an uninitialized variable is an error naming the node."""
    if not var.initialized:              # never reset once set: checking first is safe
        raise ExecutionError(f"variable '{var.info.name}' is not initialized (run its "
                             "initializer or restore it from a checkpoint)", ctx.node)
    try:
        var.update(compute)
    except ResourceError as e:
        raise ExecutionError(str(e), ctx.node) from None


def _update_kernel(sign: int):
    def kernel(ctx, handle, value):
        var = _variable(ctx, handle)

        def compute(cur):
            if cur.shape != value.shape:
                raise ExecutionError(f"the value's shape {list(value.shape)} does not match "
                                     f"variable '{var.info.name}' of shape {list(cur.shape)}",
                                     ctx.node)
            return (cur + value if sign > 0 else cur - value).astype(cur.dtype)
        update_value(ctx, var, compute)
        return []
    return kernel


def _check_rows(ctx, var_name: str, rows: int, indices: np.ndarray) -> np.ndarray:
    flat = indices.reshape(-1).astype(np.int64)
    bad = np.nonzero((flat < 0) | (flat >= rows))[0]
    if bad.size:
        k = int(bad[0])
        pos = ",".join(str(int(i)) for i in np.unravel_index(k, indices.shape)) if indices.ndim else ""
        raise ExecutionError(f"indices[{pos}] = {flat[k]} is not in [0, {rows}) "
                             f"(rows of variable '{var_name}')", ctx.node)
    return flat


def _gather_kernel(ctx, handle, indices):
    var = _variable(ctx, handle)
    cur = _value(ctx, var)
    if cur.ndim == 0:
        raise ExecutionError(f"variable '{var.info.name}' is a scalar", ctx.node)
    flat = _check_rows(ctx, var.info.name, cur.shape[0], indices)
    return [cur[flat].reshape(indices.shape + cur.shape[1:])]


def update_rows(ctx, handle, indices, updates, apply) -> None:
    """A row scatter, atomic per variable (``update_value``): under the variable's lock the
    rows it writes are checked against the current table, ``apply(new, rows, upd)`` changes a
    copy of it (``upd``: the updates as one row per index, a scalar update broadcast), and
    the copy becomes the value. A bad index or shape leaves the variable unchanged."""
    var = _variable(ctx, handle)

    def compute(cur):
        if cur.ndim == 0:
            raise ExecutionError(f"variable '{var.info.name}' is a scalar", ctx.node)
        flat = _check_rows(ctx, var.info.name, cur.shape[0], indices)
        want = indices.shape + cur.shape[1:]
        if updates.shape != want and updates.ndim != 0:
            raise ExecutionError(f"updates of shape {list(updates.shape)} must have shape "
                                 f"indices.shape + variable.shape[1:] = {list(want)}", ctx.node)
        upd = np.broadcast_to(updates, want).reshape((len(flat),) + cur.shape[1:])
        new = cur.copy()
        apply(new, flat, upd)
        return new
    update_value(ctx, var, compute)


def _scatter_kernel(mode: str):
    def apply(new, flat, upd):
        if mode == "add":
            np.add.at(new, flat, upd)
        elif mode == "sub":
            np.subtract.at(new, flat, upd)
        else:
            new[flat] = upd

    def kernel(ctx, handle, indices, updates):
        update_rows(ctx, handle, indices, updates, apply)
        return []
    return kernel


def _is_initialized_kernel(ctx, handle):
    h = handle[()]
    store = _store(ctx)
    try:
        var = store.variable(h.name, h.dtype, h.shape)
    except FlowcError as e:
        raise ExecutionError(str(e), ctx.node) from None
    return [np.array(var.initialized)]


# --- registrations ---------------------------------------------------------------------------
# A variable holds any dtype; its in-place arithmetic updates take no f16/bf16 (they have no
# half arithmetic, and a variable's storage cannot be legalized to f32).
_VALUE_TYPES = "{all}"

register_op("VarHandleOp", outputs=["resource: resource"],
            attrs=["container: string = ''", "shared_name: string = ''", f"dtype: {_VALUE_TYPES}",
                   "shape: shape"],
            shape=_handle_shape, kernel=_handle_kernel, group="source",
            stateful=True, half_native=True,
            doc="A handle to the variable ``shared_name`` (the node's name when empty).")

register_op("ReadVariableOp", inputs=["resource: resource"], outputs=["value: dtype"],
            attrs=[f"dtype: {_VALUE_TYPES}"],
            shape=_read_shape, kernel=_read_kernel,
            stateful=True, doc="A copy of the variable's current value.", half_native=True)

register_op("AssignVariableOp", inputs=["resource: resource", "value: dtype"],
            attrs=[f"dtype: {_VALUE_TYPES}", "validate_shape: bool = false"],
            shape=_assign_shape, kernel=_assign_kernel, stateful=True,
            doc="Set the variable to ``value`` (initializes it).", half_native=True)

for _name, _sign, _c_op in (("AssignAddVariableOp", 1, "+="), ("AssignSubVariableOp", -1, "-=")):
    register_op(_name, inputs=["resource: resource", "value: dtype"],
                attrs=["dtype: {f32, f64, int}"],
                shape=_assign_shape, kernel=_update_kernel(_sign),
                stateful=True, doc=f"variable {_c_op} value, in place.")

register_op("ResourceGather", inputs=["resource: resource", "indices: Tindices"],
            outputs=["output: dtype"],
            attrs=["batch_dims: int = 0", "validate_indices: bool = true",
                   f"dtype: {_VALUE_TYPES}", "Tindices: {i32, i64}"],
            shape=_gather_shape, kernel=_gather_kernel, stateful=True,
            doc="Rows ``indices`` of the variable (out of range: an error).", half_native=True)

for _name, _mode in (("ResourceScatterAdd", "add"), ("ResourceScatterSub", "sub"),
                     ("ResourceScatterUpdate", "update")):
    register_op(_name, inputs=["resource: resource", "indices: Tindices", "updates: dtype"],
                attrs=[("dtype: {f32, f64, int}" if _mode != "update"
                        else f"dtype: {_VALUE_TYPES}"), "Tindices: {i32, i64}"],
                shape=_scatter_shape, kernel=_scatter_kernel(_mode), stateful=True,
                half_native=_mode == "update",
                doc=f"Rows ``indices`` of the variable {_mode} ``updates``, touching only those "
                    "rows; every index is checked before any row changes.")

register_op("VarIsInitializedOp", inputs=["resource: resource"], outputs=["is_initialized: bool"],
            shape=lambda ctx: [TensorType(DType.bool, ())], kernel=_is_initialized_kernel,
            stateful=True,
            doc="Whether the variable has a value.")
