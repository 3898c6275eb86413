"""Checkpoint ops: ``SaveV2`` writes tensors to a checkpoint, ``RestoreV2`` reads them back.

The files belong to the runtime (``runtime/checkpoint.py``: safetensors data plus an index,
written atomically). The reference kernels call it directly; the C kernels reach it through
the runtime's host-call hook (``flowc_rt->host_call``), so both backends write and read the
same files. There is no string dtype, so the checkpoint path is a u8 tensor (its UTF-8 bytes;
a ``Saver`` feeds it, so saving to a new path compiles nothing) and the tensor names are an
attr. ``RestoreV2`` declares each tensor's dtype and shape (the variables'), so its outputs
have static types, and it checks every tensor before returning any: a graph that assigns
its outputs to variables changes all of them or none.
"""
from __future__ import annotations

from typing import List

from compiler.ir.types import TensorType
from compiler.ir.op_registry import register_op
from runtime.checkpoint import CheckpointError, prefix_from_bytes, read_checkpoint, write_checkpoint
from runtime.dtypes import DType, bf16_numpy_is_raw


# (bf16 tensors are saved as safetensors BF16, which needs ml_dtypes: runtime/checkpoint.py)
_NO_CHECKPOINT_TYPES = (DType.resource,) + ((DType.bf16,) if bf16_numpy_is_raw() else ())


# --- shape functions -----------------------------------------------------------------------
def _check_prefix(ctx) -> None:
    shape = ctx.input_shape(0)
    if shape is not None and len(shape) != 1:
        raise ctx.error(f"prefix must be a vector of UTF-8 bytes (u8[?]), got rank {len(shape)}")


def _check_names(ctx, count: int, what: str) -> List[str]:
    names = ctx.attr("tensor_names")
    if len(names) != count:
        raise ctx.error(f"{len(names)} tensor_names for {count} {what}")
    seen = set()
    for name in names:
        if not name or name == "__metadata__":
            raise ctx.error(f"{name!r} cannot name a checkpoint tensor")
        if name in seen:
            raise ctx.error(f"tensor name '{name}' appears twice")
        seen.add(name)
    return names


def _check_dtypes(ctx, dtypes) -> None:
    for name, dt in zip(ctx.attr("tensor_names"), dtypes):
        if dt in _NO_CHECKPOINT_TYPES:
            need = " (bf16 needs ml_dtypes)" if dt is DType.bf16 else ""
            raise ctx.error(f"tensor '{name}' is {dt}; checkpoints hold float, integer and "
                            f"bool tensors{need}")


def _save_shape(ctx):
    _check_prefix(ctx)
    n = len(ctx.input_types) - 1
    _check_names(ctx, n, "tensors")
    _check_dtypes(ctx, [t.dtype for t in ctx.input_types[1:]])
    return []


def _restore_shape(ctx):
    _check_prefix(ctx)
    dtypes, shapes = ctx.attr("dtypes"), ctx.attr("shapes")
    if not dtypes:
        raise ctx.error("RestoreV2 needs at least one tensor to restore")
    if len(shapes) != len(dtypes):
        raise ctx.error(f"{len(shapes)} shapes for {len(dtypes)} dtypes")
    _check_names(ctx, len(dtypes), "dtypes")
    _check_dtypes(ctx, dtypes)
    return [TensorType(d, None if s is None else tuple(s)) for d, s in zip(dtypes, shapes)]


# --- reference kernels ---------------------------------------------------------------------
def _save_kernel(ctx, prefix, *tensors):
    try:
        write_checkpoint(prefix_from_bytes(prefix), dict(zip(ctx.attrs["tensor_names"], tensors)))
    except CheckpointError as e:          # its TensorFlow class (NotFound, DataLoss, ...)
        raise e.add_node(ctx.node.name, ctx.node.location, ctx.node.op) from None
    return []


def _restore_kernel(ctx, prefix):
    try:
        return read_checkpoint(prefix_from_bytes(prefix), ctx.attrs["tensor_names"],
                               ctx.attrs["dtypes"], ctx.attrs["shapes"])
    except CheckpointError as e:          # its TensorFlow class (NotFound, DataLoss, ...)
        raise e.add_node(ctx.node.name, ctx.node.location, ctx.node.op) from None


# --- registrations ---------------------------------------------------------------------------
register_op("SaveV2", inputs=["prefix: u8", "tensors: dtypes"],
            attrs=["tensor_names: list(string)", "dtypes: list(type)"],
            shape=_save_shape, kernel=_save_kernel, stateful=True,
            doc="Write ``tensors`` as checkpoint ``prefix`` (UTF-8 bytes), named "
                "``tensor_names``; atomic: the previous checkpoint stays valid until the new "
                "one is complete.", half_native=True)

register_op("RestoreV2", inputs=["prefix: u8"], outputs=["tensors: dtypes"],
            attrs=["tensor_names: list(string)", "dtypes: list(type)", "shapes: list(shape)"],
            shape=_restore_shape, kernel=_restore_kernel, stateful=True, half_native=True,
            doc="The tensors ``tensor_names`` of checkpoint ``prefix``; refuses (naming every "
                "tensor that does not match) a missing, truncated or corrupt checkpoint or one "
                "whose tensors differ from ``dtypes``/``shapes``, before returning any.")
