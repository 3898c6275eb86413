"""TensorFlow-named indexing and selection functions: ``fl.gather_nd``, ``fl.scatter_nd``,
``fl.tensor_scatter_nd_update`` (``_add``, ``_sub``, ``_max``, ``_min``),
``fl.reverse_sequence``, ``fl.unique``, ``fl.unique_with_counts``, ``fl.einsum`` and
``fl.nn.top_k``."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from compiler.ops.einsum import parse_equation
from dsl.array_ops import _as_index
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType, as_dtype

__all__ = ["gather_nd", "scatter_nd", "tensor_scatter_nd_update", "tensor_scatter_nd_add",
           "tensor_scatter_nd_sub", "tensor_scatter_nd_max", "tensor_scatter_nd_min",
           "reverse_sequence", "unique", "unique_with_counts", "einsum", "top_k"]


def _indices(indices) -> Tensor:
    return indices if isinstance(indices, Tensor) else _as_index(indices)


def gather_nd(params, indices, name: Optional[str] = None, batch_dims: int = 0) -> Tensor:
    """Slices ``params[indices[..., :]]`` (GatherNd). With ``batch_dims`` the leading dims of
    ``params`` and ``indices`` pair up, as ``tf.gather_nd`` does it (their coordinates are
    prepended to each index row)."""
    params = convert_to_tensor(params)
    indices = _indices(indices)
    if batch_dims:
        indices = _with_batch_coordinates(indices, batch_dims)
    return apply_op("GatherNd", [params, indices], name=name or "GatherNd")


def _with_batch_coordinates(indices: Tensor, batch_dims: int) -> Tensor:
    """indices [b_0..b_{B-1}, ..., Q] -> [b_0..b_{B-1}, ..., B + Q] with each row's batch
    coordinates in front (the dims must be known)."""
    shape = static_shape(indices)
    if shape is None or any(d is None for d in shape[:-1]):
        raise ValueError("gather_nd with batch_dims needs the dims of indices known")
    if not 0 < batch_dims < len(shape):
        raise ValueError(f"batch_dims must be in [0, {len(shape) - 1}), got {batch_dims}")
    grid = np.indices(shape[:batch_dims], dtype=indices.dtype.np)            # [B, b...]
    coords = np.broadcast_to(np.moveaxis(grid, 0, -1).reshape(
        tuple(shape[:batch_dims]) + (1,) * (len(shape) - 1 - batch_dims) + (batch_dims,)),
        tuple(shape[:-1]) + (batch_dims,))
    from dsl.ops import constant
    return apply_op("ConcatV2", [[constant(np.ascontiguousarray(coords), dtype=indices.dtype),
                                  indices], _as_index(-1)])


def scatter_nd(indices, updates, shape, name: Optional[str] = None) -> Tensor:
    """Zeros of ``shape`` with ``updates`` added at ``indices`` (ScatterNd)."""
    indices = _indices(indices)
    return apply_op("ScatterNd", [indices, convert_to_tensor(updates),
                                  _as_index(shape, indices.dtype)], name=name or "ScatterNd")


def _tensor_scatter(op: str):
    def fn(tensor, indices, updates, name: Optional[str] = None) -> Tensor:
        tensor = convert_to_tensor(tensor)
        return apply_op(op, [tensor, _indices(indices),
                             convert_to_tensor(updates, dtype=tensor.dtype)], name=name or op)
    fn.__name__ = "tensor_scatter_nd_" + op[len("TensorScatter"):].lower()
    fn.__doc__ = f"A copy of ``tensor`` with ``updates`` applied at ``indices`` ({op})."
    return fn


tensor_scatter_nd_update = _tensor_scatter("TensorScatterUpdate")
tensor_scatter_nd_add = _tensor_scatter("TensorScatterAdd")
tensor_scatter_nd_sub = _tensor_scatter("TensorScatterSub")
tensor_scatter_nd_max = _tensor_scatter("TensorScatterMax")
tensor_scatter_nd_min = _tensor_scatter("TensorScatterMin")


def reverse_sequence(input, seq_lengths, seq_axis: Optional[int] = None,  # noqa: A002
                     batch_axis: Optional[int] = None, name: Optional[str] = None,
                     seq_dim: Optional[int] = None, batch_dim: Optional[int] = None) -> Tensor:
    """Reverses the first ``seq_lengths[b]`` entries along ``seq_axis`` of each batch entry."""
    seq = seq_axis if seq_axis is not None else seq_dim
    batch = batch_axis if batch_axis is not None else (batch_dim or 0)
    if seq is None:
        raise ValueError("reverse_sequence needs seq_axis")
    x = convert_to_tensor(input)
    lengths = _indices(seq_lengths)
    rank = None if static_shape(x) is None else len(static_shape(x))
    if rank is not None:
        seq, batch = seq % rank, batch % rank
    return apply_op("ReverseSequence", [x, lengths], {"seq_dim": int(seq), "batch_dim": int(batch)},
                    name=name or "ReverseSequence")


def unique(x, out_idx=DType.i32, name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """(the distinct elements of vector ``x`` in the order they first occur, for each element
    the index of its value)."""
    y, idx = apply_op("Unique", [convert_to_tensor(x)], {"out_idx": as_dtype(out_idx)},
                      name=name or "Unique")
    return y, idx


def unique_with_counts(x, out_idx=DType.i32,
                       name: Optional[str] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """``unique`` plus how often each distinct element occurs."""
    y, idx, count = apply_op("UniqueWithCounts", [convert_to_tensor(x)],
                             {"out_idx": as_dtype(out_idx)}, name=name or "UniqueWithCounts")
    return y, idx, count


def top_k(input, k=1, sorted: bool = True, index_type=DType.i32,  # noqa: A002
          name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """(values, indices) of the ``k`` largest entries of each last-axis row, largest first
    (ties: the lower index first)."""
    k = k if isinstance(k, Tensor) else convert_to_tensor(np.int32(k))
    values, indices = apply_op("TopKV2", [convert_to_tensor(input), k],
                               {"sorted": bool(sorted), "index_type": as_dtype(index_type)},
                               name=name or "TopKV2")
    return values, indices


def einsum(equation: str, *inputs, name: Optional[str] = None, **kwargs) -> Tensor:
    """Einstein summation (``tf.einsum``). One or two operands make one Einsum op; more are
    contracted two at a time, left to right, each step keeping only the labels still needed
    (as tf.einsum contracts pairwise)."""
    if kwargs:
        raise TypeError(f"unexpected arguments {', '.join(kwargs)}")
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        inputs = tuple(inputs[0])
    xs = [convert_to_tensor(x) for x in inputs]
    if not xs:
        raise ValueError("einsum needs at least one operand")
    eq = parse_equation(equation, [None if static_shape(x) is None else len(static_shape(x)) for x in xs]) \
        if len(xs) > 2 else None
    if eq is None or eq.broadcast:      # '...' may stretch dims: one op does it all
        return apply_op("Einsum", [xs], {"equation": equation}, name=name or "Einsum")
    labels: List[List[str]] = list(eq.inputs)
    letters = _letters(eq)
    acc, acc_labels = xs[0], labels[0]
    for k in range(1, len(xs)):
        later = set(c for rest in labels[k + 1:] for c in rest) | set(eq.output)
        if k == len(xs) - 1:
            keep = list(eq.output)
        else:
            keep = [c for c in dict.fromkeys(acc_labels + labels[k]) if c in later]
        step = ",".join("".join(letters[c] for c in ls) for ls in (acc_labels, labels[k])) \
            + "->" + "".join(letters[c] for c in keep)
        acc = apply_op("Einsum", [[acc, xs[k]]], {"equation": step},
                       name=name if k == len(xs) - 1 and name else "Einsum")
        acc_labels = keep
    return acc


def _letters(eq) -> dict:
    """A letter for every label (``...`` labels get letters the equation does not use)."""
    used = {c for c in eq.labels if c.isascii()}
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                 if c not in used)
    return {c: c if c.isascii() else next(spare) for c in eq.labels}
