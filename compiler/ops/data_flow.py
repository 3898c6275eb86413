"""DynamicPartition and DynamicStitch: routing rows by a data-dependent index, as TensorFlow's
data_flow_ops do. They are what a sharded embedding lookup is built from
(``fl.nn.embedding_lookup``): partition the ids by shard, gather on each shard's device, stitch
the rows back in the original order.

- ``DynamicPartition(data, partitions)``: output k holds the rows ``data[i]`` whose
  ``partitions[i] == k``, in order (``partitions``' shape is a prefix of ``data``'s). A
  partition outside ``[0, num_partitions)`` is an error, found before anything is written.
- ``DynamicStitch(indices[N], data[N])``: ``merged[indices[m][i]] = data[m][i]``, later pieces
  winning where indices repeat; ``merged`` has ``max(index) + 1`` rows, rows no index names are
  zero. A negative index is an error.

Both have data-dependent output sizes (their C lowering is ``compiler/codegen/c_ops/data_flow.py``).
"""
from __future__ import annotations

from typing import List

import numpy as np

from compiler.errors import ExecutionError
from compiler.ir.types import TensorType, shape_str
from compiler.ir.op_registry import register_op

_MAX_PARTITIONS = 4096


# --- DynamicPartition ------------------------------------------------------------------------
def _partition_shape(ctx) -> List[TensorType]:
    data, parts = ctx.input_shape(0), ctx.input_shape(1)
    n = ctx.attr("num_partitions")
    if n > _MAX_PARTITIONS:
        raise ctx.error(f"num_partitions = {n} is more than {_MAX_PARTITIONS}")
    dtype = ctx.input_type(0).dtype
    if data is None or parts is None:
        return [TensorType(dtype, None)] * n
    if len(parts) > len(data):
        raise ctx.error(f"partitions {shape_str(parts)} must be a prefix of data's shape "
                        f"{shape_str(data)}")
    for k, (p, d) in enumerate(zip(parts, data)):
        if p is not None and d is not None and p != d:
            raise ctx.error(f"partitions {shape_str(parts)} must be a prefix of data's shape "
                            f"{shape_str(data)} (dim {k} differs)")
    return [TensorType(dtype, (None,) + tuple(data[len(parts):]))] * n


def _partition_ref(ctx, data: np.ndarray, parts: np.ndarray) -> List[np.ndarray]:
    n = ctx.attrs["num_partitions"]
    if data.shape[:parts.ndim] != parts.shape:
        raise ExecutionError(f"partitions {list(parts.shape)} must be a prefix of data's shape "
                             f"{list(data.shape)}", ctx.node)
    flat = parts.reshape(-1)
    bad = (flat < 0) | (flat >= n)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ExecutionError(f"partitions[{i}] = {int(flat[i])} is not in [0, {n})", ctx.node)
    rows = data.reshape((flat.size,) + data.shape[parts.ndim:])
    return [rows[flat == k] for k in range(n)]


register_op("DynamicPartition", inputs=["data: T", "partitions: i32"],
            outputs=["outputs: num_partitions * T"],
            attrs=["num_partitions: int >= 1", "T: {all}"],
            shape=_partition_shape, kernel=_partition_ref, group="movement",
            doc="Rows of data routed to num_partitions outputs by partitions.", half_native=True)


# --- DynamicStitch -----------------------------------------------------------------------------
def _stitch_shape(ctx) -> List[TensorType]:
    n = ctx.attr("N")
    dtype = ctx.input_type(n).dtype
    idx0, data0 = ctx.input_shape(0), ctx.input_shape(n)
    for m in range(n):
        idx, dat = ctx.input_shape(m), ctx.input_shape(n + m)
        if idx is None or dat is None:
            continue
        if len(idx) > len(dat) or any(a is not None and b is not None and a != b
                                      for a, b in zip(idx, dat)):
            raise ctx.error(f"indices[{m}] {shape_str(idx)} must be a prefix of data[{m}]'s "
                            f"shape {shape_str(dat)}")
    if idx0 is None or data0 is None:
        return [TensorType(dtype, None)]
    rows = None
    values = [ctx.input_value(m) for m in range(n)]
    if all(v is not None for v in values):
        rows = max([int(np.max(v)) + 1 if np.size(v) else 0 for v in values] + [0])
    return [TensorType(dtype, (rows,) + tuple(data0[len(idx0):]))]


def _stitch_ref(ctx, *args) -> np.ndarray:
    n = ctx.attrs["N"]
    indices, data = args[:n], args[n:]
    inner = data[0].shape[indices[0].ndim:]
    rows = 0
    for m, (idx, dat) in enumerate(zip(indices, data)):
        if dat.shape != idx.shape + inner:
            raise ExecutionError(f"data[{m}] has shape {list(dat.shape)}; indices[{m}] "
                                 f"{list(idx.shape)} needs {list(idx.shape + inner)}", ctx.node)
        if idx.size and int(idx.min()) < 0:
            raise ExecutionError(f"indices[{m}] has a negative index {int(idx.min())}", ctx.node)
        if idx.size:
            rows = max(rows, int(idx.max()) + 1)
    out = np.zeros((rows,) + inner, data[0].dtype)
    for idx, dat in zip(indices, data):
        out[idx.reshape(-1)] = dat.reshape((-1,) + inner)
    return out


register_op("DynamicStitch", inputs=["indices: N * i32", "data: N * T"], outputs=["merged: T"],
            attrs=["N: int >= 1", "T: {all}"],
            shape=_stitch_shape, kernel=_stitch_ref, group="movement", half_native=True,
            doc="merged[indices[m][i]] = data[m][i]; max(index) + 1 rows, unnamed rows zero.")
