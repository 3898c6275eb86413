"""N-dimensional indexing ops, as TensorFlow defines them: GatherNd, ScatterNd, the
TensorScatter family (TensorScatterUpdate, TensorScatterAdd, TensorScatterSub,
TensorScatterMax, TensorScatterMin) and ReverseSequence; plus ``_TensorScatterMul``, flowc's
own multiplying scatter (TensorFlow has none on tensors; ONNX's ScatterND and ScatterElements
with ``reduction="mul"`` lower to it).

``indices`` has shape ``[..., Q]``: each row of Q coordinates names a slice
``tensor[i_0, ..., i_{Q-1}]`` of shape ``tensor.shape[Q:]``; ``updates`` has shape
``indices.shape[:-1] + tensor.shape[Q:]``.

- An index outside the tensor is an error naming it, found before anything is written (the
  C kernels check every index first: ``compiler/codegen/c_ops/indexing.py``).
- Scatters apply the updates in index order: where indices repeat, TensorScatterUpdate keeps
  the last one, ScatterNd and TensorScatterAdd sum them, Max / Min keep the extreme (NaN
  propagates, as ``np.maximum``), ``_TensorScatterMul`` multiplies.
- Integer sums and products wrap around (two's complement), as TensorFlow's do.
- ReverseSequence reverses the first ``seq_lengths[b]`` entries along ``seq_dim`` of each
  batch entry ``b`` (along ``batch_dim``); a length outside [0, dim] is an error.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.op_registry import register_op
from compiler.ir.types import shape_str

Shape = Optional[Sequence[Optional[int]]]


def _merge_dim(ctx, a: Optional[int], b: Optional[int], what: str) -> Optional[int]:
    if a is not None and b is not None and a != b:
        raise ctx.error(f"{what}: {a} != {b}")
    return a if a is not None else b


def check_indices(node, indices: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """``indices`` ([..., Q]) as int64 rows of Q; raises naming the first that is out of range."""
    q = indices.shape[-1]
    rows = indices.reshape(int(np.prod(indices.shape[:-1], dtype=np.int64)), q).astype(np.int64)
    bounds = np.asarray(shape[:q], np.int64)
    bad = np.nonzero(((rows < 0) | (rows >= bounds)).any(axis=1))[0]
    if bad.size:
        k = int(bad[0])
        where = ",".join(str(int(i)) for i in np.unravel_index(k, indices.shape[:-1]))
        raise ExecutionError(f"indices[{where}] = [{', '.join(str(int(v)) for v in rows[k])}] "
                             f"does not index into shape {list(shape)}", node)
    return rows


# --- GatherNd ----------------------------------------------------------------------------------
def _gather_nd_shape(ctx) -> list:
    params, indices = ctx.input_shape(0), ctx.input_shape(1)
    if indices is not None and len(indices) < 1:
        raise ctx.error("indices must be at least a vector")
    if params is None or indices is None:
        return [None]
    q = indices[-1]
    if q is None:
        return [None]
    if q > len(params):
        raise ctx.error(f"index innermost dimension length must be <= params rank; saw: "
                        f"{q} vs. {len(params)}")
    return [tuple(indices[:-1]) + tuple(params[q:])]


def _gather_nd_ref(ctx, params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    if indices.ndim < 1:
        raise ExecutionError("indices must be at least a vector", ctx.node)
    q = indices.shape[-1]
    if q > params.ndim:
        raise ExecutionError(f"index innermost dimension length must be <= params rank; saw: "
                             f"{q} vs. {params.ndim}", ctx.node)
    rows = check_indices(ctx.node, indices, params.shape)
    picked = params[tuple(rows.T)] if q else np.broadcast_to(params, (len(rows),) + params.shape)
    return np.ascontiguousarray(picked).reshape(indices.shape[:-1] + params.shape[q:])


register_op("GatherNd", inputs=["params: Tparams", "indices: Tindices"],
            outputs=["output: Tparams"],
            attrs=["Tparams: {all}", "Tindices: {i16, i32, i64}"],
            shape=_gather_nd_shape, kernel=_gather_nd_ref, group="movement",
            doc="Slices params[indices[..., :]] (an index out of range: an error).")


# --- scatters ----------------------------------------------------------------------------------
def _updates_shape_check(ctx, tensor: Shape, indices: Shape, updates: Shape) -> None:
    """updates must be indices.shape[:-1] + tensor.shape[Q:] (where the dims are known)."""
    if indices is not None and len(indices) < 1:
        raise ctx.error("indices must be at least a vector")
    if tensor is None or indices is None or updates is None or indices[-1] is None:
        return
    q = indices[-1]
    if q > len(tensor):
        raise ctx.error(f"index innermost dimension length must be <= tensor rank; saw: "
                        f"{q} vs. {len(tensor)}")
    want = tuple(indices[:-1]) + tuple(tensor[q:])
    if len(want) != len(updates):
        raise ctx.error(f"updates must have shape {shape_str(want)} (indices.shape[:-1] + "
                        f"tensor.shape[{q}:]), got {shape_str(updates)}")
    for k, (w, u) in enumerate(zip(want, updates)):
        _merge_dim(ctx, w, u, f"updates dim {k} must be {shape_str(want)}[{k}]")


def _tensor_scatter_shape(ctx) -> list:
    tensor = ctx.input_shape(0)
    _updates_shape_check(ctx, tensor, ctx.input_shape(1), ctx.input_shape(2))
    return [tensor]


def _scatter_nd_shape(ctx) -> list:
    shape_value = ctx.input_value(2)
    shape = None
    if shape_value is not None:
        shape = tuple(int(d) for d in np.reshape(shape_value, -1))
        if any(d < 0 for d in shape):
            raise ctx.error(f"shape must be non-negative, got {list(shape)}")
    elif ctx.input_shape(2) is not None and ctx.input_shape(2)[0] is not None:
        shape = (None,) * ctx.input_shape(2)[0]
    _updates_shape_check(ctx, shape, ctx.input_shape(0), ctx.input_shape(1))
    return [shape]


def _combine(kind: str, dtype: np.dtype):
    if kind == "update":
        return None
    if kind == "add":
        return np.add
    if kind == "sub":
        return np.subtract
    if kind == "mul":
        return np.multiply
    return np.maximum if kind == "max" else np.minimum


def scatter_into(node, out: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                 kind: str) -> np.ndarray:
    """Apply ``updates`` to ``out`` (a copy) at ``indices``, in index order."""
    q = indices.shape[-1] if indices.ndim else 0
    want = indices.shape[:-1] + out.shape[q:]
    if updates.shape != want:
        raise ExecutionError(f"updates must have shape {list(want)} (indices.shape[:-1] + "
                             f"tensor.shape[{q}:]), got {list(updates.shape)}", node)
    rows = check_indices(node, indices, out.shape)
    slices = updates.reshape((len(rows),) + out.shape[q:])
    combine = _combine(kind, out.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for row, value in zip(rows, slices):
            at = tuple(int(i) for i in row)
            out[at] = value if combine is None else combine(out[at], value)
    return out


def _tensor_scatter_ref(kind: str):
    def kernel(ctx, tensor, indices, updates):
        if indices.ndim < 1:
            raise ExecutionError("indices must be at least a vector", ctx.node)
        if indices.shape[-1] > tensor.ndim:
            raise ExecutionError(f"index innermost dimension length must be <= tensor rank; "
                                 f"saw: {indices.shape[-1]} vs. {tensor.ndim}", ctx.node)
        return scatter_into(ctx.node, np.array(tensor, copy=True), indices, updates, kind)
    kernel.__name__ = f"_tensor_scatter_{kind}_ref"
    return kernel


def _scatter_nd_ref(ctx, indices, updates, shape):
    dims = [int(d) for d in np.reshape(shape, -1)]
    if any(d < 0 for d in dims):
        raise ExecutionError(f"shape must be non-negative, got {dims}", ctx.node)
    if indices.ndim < 1 or indices.shape[-1] > len(dims):
        raise ExecutionError(f"index innermost dimension length must be <= rank of shape "
                             f"{dims}", ctx.node)
    return scatter_into(ctx.node, np.zeros(dims, updates.dtype), indices, updates, "add")


register_op("ScatterNd", inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
            outputs=["output: T"], attrs=["T: {numeric}", "Tindices: {i16, i32, i64}"],
            shape=_scatter_nd_shape, kernel=_scatter_nd_ref, group="movement",
            doc="Zeros of ``shape`` with the updates added at the indices (repeats summed).")

SCATTERS = {"TensorScatterUpdate": ("update", "all"), "TensorScatterAdd": ("add", "numeric"),
            "TensorScatterSub": ("sub", "numeric"), "TensorScatterMax": ("max", "numeric"),
            "TensorScatterMin": ("min", "numeric"), "_TensorScatterMul": ("mul", "numeric")}

for _name, (_kind, _types) in SCATTERS.items():
    register_op(_name, inputs=["tensor: T", "indices: Tindices", "updates: T"],
                outputs=["output: T"], attrs=[f"T: {{{_types}}}", "Tindices: {i16, i32, i64}"],
                shape=_tensor_scatter_shape, kernel=_tensor_scatter_ref(_kind),
                group="movement",
                doc=f"A copy of tensor with the updates applied at the indices ({_kind}).")


# --- ReverseSequence ---------------------------------------------------------------------------
def _reverse_dims(ctx_or_rank, seq_dim: int, batch_dim: int, rank: int, error) -> None:
    if not 0 <= seq_dim < rank:
        raise error(f"seq_dim must be in [0, {rank}), got {seq_dim}")
    if not 0 <= batch_dim < rank:
        raise error(f"batch_dim must be in [0, {rank}), got {batch_dim}")
    if seq_dim == batch_dim:
        raise error(f"seq_dim == batch_dim == {seq_dim}")


def _reverse_sequence_shape(ctx) -> list:
    x, lengths = ctx.input_shape(0), ctx.input_shape(1)
    if lengths is not None and len(lengths) != 1:
        raise ctx.error(f"seq_lengths must be 1-dim, not {len(lengths)}")
    if x is None:
        return [None]
    _reverse_dims(ctx, ctx.attr("seq_dim"), ctx.attr("batch_dim"), len(x), ctx.error)
    if lengths is not None:
        _merge_dim(ctx, x[ctx.attr("batch_dim")], lengths[0],
                   "len(seq_lengths) must equal input.dims(batch_dim)")
    return [x]


def reverse_sequence_ref(node, x: np.ndarray, lengths: np.ndarray, seq_dim: int,
                         batch_dim: int) -> np.ndarray:
    def error(msg):
        return ExecutionError(msg, node)
    _reverse_dims(None, seq_dim, batch_dim, x.ndim, error)
    if lengths.ndim != 1 or lengths.shape[0] != x.shape[batch_dim]:
        raise error(f"len(seq_lengths) must equal input.dims(batch_dim): "
                    f"{list(lengths.shape)} vs. {x.shape[batch_dim]}")
    out = np.array(x, copy=True)
    for b, n in enumerate(lengths.astype(np.int64)):
        if not 0 <= n <= x.shape[seq_dim]:
            raise error(f"seq_lengths[{b}] = {int(n)} is not in [0, {x.shape[seq_dim]}]")
        src = [slice(None)] * x.ndim
        src[batch_dim] = b
        dst = list(src)
        src[seq_dim] = slice(int(n) - 1, None, -1) if n else slice(0, 0)
        dst[seq_dim] = slice(0, int(n))
        out[tuple(dst)] = x[tuple(src)]
    return out


register_op("ReverseSequence", inputs=["input: T", "seq_lengths: Tlen"], outputs=["output: T"],
            attrs=["seq_dim: int", "batch_dim: int = 0", "T: {all}", "Tlen: {i32, i64} = i64"],
            shape=_reverse_sequence_shape,
            kernel=lambda ctx, x, lengths: reverse_sequence_ref(
                ctx.node, x, lengths, ctx.attrs["seq_dim"], ctx.attrs["batch_dim"]),
            group="movement",
            doc="Reverses the first seq_lengths[b] entries along seq_dim of each batch entry.")


__all__: List[str] = ["check_indices", "scatter_into", "SCATTERS", "reverse_sequence_ref"]
