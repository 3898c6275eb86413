"""``fl.nn.embedding_lookup``: rows of an embedding table that may be sharded over several
variables (on several devices or parameter-server tasks), as ``tf.nn.embedding_lookup``.

With one table it is a gather. With shards ``params[0..P-1]`` each id is routed to a shard
(``partition_strategy``: ``"mod"``: shard ``id % P``, row ``id // P``; ``"div"``: contiguous
ranges, the first ``total % P`` shards one row longer), the ids are split with
``DynamicPartition``, each shard's rows are read on the shard's own device (``colocate_with``)
and ``DynamicStitch`` puts them back in the ids' order. All of it is ordinary graph code; the
gradient reaches each shard as sparse ``IndexedSlices`` of the rows it served, so an optimizer
updates only those rows, on the shard's device.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from dsl.context import colocate_with, name_scope
from dsl.data_flow_ops import dynamic_partition, dynamic_stitch
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor, static_shape

__all__ = ["embedding_lookup"]


def _gather(param, ids: Tensor) -> Tensor:
    if hasattr(param, "sparse_read"):                    # a variable: ResourceGather
        return param.sparse_read(ids)
    return apply_op("GatherV2", [convert_to_tensor(param), ids, np.array(0, np.int32)], {})


def _rows(param) -> Optional[int]:
    shape = static_shape(param)
    return None if not shape or shape[0] is None else int(shape[0])


def embedding_lookup(params, ids, partition_strategy: str = "mod", name: Optional[str] = None,
                     max_norm=None) -> Tensor:
    """Rows ``ids`` of the table ``params`` (a tensor or variable, or a list of shards)."""
    if max_norm is not None:
        raise NotImplementedError("embedding_lookup(max_norm=...) is not supported")
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"partition_strategy must be 'mod' or 'div', got {partition_strategy!r}")
    shards: Sequence = list(params) if isinstance(params, (list, tuple)) else [params]
    if not shards:
        raise ValueError("embedding_lookup needs at least one table")
    ids = convert_to_tensor(ids)
    if not ids.dtype.is_integer:
        raise TypeError(f"embedding_lookup ids must be integers, got {ids.dtype}")
    with name_scope(name or "embedding_lookup"):
        if len(shards) == 1:
            with colocate_with(shards[0]):
                return _gather(shards[0], ids)
        return _sharded(shards, ids, partition_strategy)


def shard_routing(shards: Sequence, flat: Tensor, strategy: str):
    """(shard, row in that shard) of each id of ``flat`` (int32 shards, ids' dtype rows)."""
    p = len(shards)
    idt = flat.dtype.np
    if strategy == "mod":
        assign = apply_op("FloorMod", [flat, np.array(p, idt)], {})
        new_ids = apply_op("FloorDiv", [flat, np.array(p, idt)], {})
    else:
        rows = [_rows(s) for s in shards]
        if any(r is None for r in rows):
            raise ValueError("partition_strategy='div' needs every shard's row count known")
        total = sum(rows)
        per, extras = total // p, total % p
        if [per + (k < extras) for k in range(p)] != rows:
            raise ValueError(f"shards of {rows} rows are not a 'div' split of {total} rows over "
                             f"{p} shards (expected {[per + (k < extras) for k in range(p)]})")
        big = apply_op("FloorDiv", [flat, np.array(per + 1, idt)], {})
        small = apply_op("FloorDiv", [apply_op("Sub", [flat, np.array(extras, idt)], {}),
                                      np.array(max(per, 1), idt)], {})
        assign = apply_op("Maximum", [big, small], {})
        in_big = apply_op("Less", [assign, np.array(extras, idt)], {})
        new_ids = apply_op("SelectV2", [
            in_big, apply_op("FloorMod", [flat, np.array(per + 1, idt)], {}),
            apply_op("FloorMod", [apply_op("Sub", [flat, np.array(extras, idt)], {}),
                                  np.array(max(per, 1), idt)], {})], {})
    assign = apply_op("Cast", [assign], {"DstT": np.int32}) if idt != np.int32 else assign
    return assign, new_ids


def _sharded(shards: Sequence, ids: Tensor, strategy: str) -> Tensor:
    p = len(shards)
    flat = apply_op("Reshape", [ids, np.array([-1], np.int32)], {})
    assign, new_ids = shard_routing(shards, flat, strategy)
    count = apply_op("Size", [flat], {"out_type": np.int32})
    positions = apply_op("Range", [np.array(0, np.int32), count, np.array(1, np.int32)], {})
    shard_ids = dynamic_partition(new_ids, assign, p)
    shard_pos = dynamic_partition(positions, assign, p)
    pieces = []
    for shard, sid in zip(shards, shard_ids):
        with colocate_with(shard):
            pieces.append(_gather(shard, sid))
    merged = dynamic_stitch(shard_pos, pieces)
    inner = apply_op("Slice", [apply_op("Shape", [pieces[0]], {}), np.array([1], np.int32),
                               np.array([-1], np.int32)], {})
    shape = apply_op("ConcatV2", [[apply_op("Shape", [ids], {}), inner], np.array(0, np.int32)], {})
    return apply_op("Reshape", [merged, shape], {})
