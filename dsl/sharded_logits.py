"""Logits against chosen rows of a sharded output layer, each shard's part computed on the
shard's own device: ``sharded_row_logits(w_shards, b_shards, ids, inputs)`` is ``inputs @
W[ids].T + b[ids]`` where every shard gathers its rows and multiplies them with ``inputs``
where it lives (its ops colocated with the shard, and their gradients too).

So the inputs travel to each shard and logits [batch, ids on that shard] come back, instead of
the rows [ids, dim] travelling to the inputs; backwards, the logits' gradient travels to the
shards and each shard's rows' gradient (``IndexedSlices``) stays there for the update. Sampled
softmax uses it for sharded weights (``dsl/nn_sampled.py``), as the paper's Figure 9 does.
"""
from __future__ import annotations

import contextlib
from typing import Sequence

import numpy as np

from dsl.array_ops import expand_dims, range as range_, size, transpose
from dsl.context import colocate_with, get_default_graph
from dsl.data_flow_ops import dynamic_partition, dynamic_stitch
from dsl.embedding_ops import embedding_lookup, shard_routing
from dsl.gradients import RegisterGradient, registered_gradients
from dsl.linalg_ops import matmul
from dsl.math_ops import add
from dsl.tensor import Tensor
from runtime.dtypes import DType

__all__ = ["sharded_row_logits", "gradients_on_their_devices"]

# the op types of one shard's part of the logits (their gradients stay on the shard)
SHARD_OP_TYPES = ("MatMul", "AddV2", "ExpandDims", "ResourceGather", "GatherV2")


def _on_its_device(op_type: str) -> str:
    """The name of a gradient that is ``op_type``'s registered one, built on the forward op's
    device (registered on first use)."""
    name = f"_{op_type}GradientOnItsDevice"
    if name not in registered_gradients():
        def gradient(op, *grads):
            with colocate_with(op):
                return registered_gradients()[op_type](op, *grads)
        RegisterGradient(name)(gradient)
    return name


@contextlib.contextmanager
def gradients_on_their_devices(op_types: Sequence[str] = SHARD_OP_TYPES):
    """Ops of ``op_types`` created inside get their gradient built on their own device (as
    TensorFlow's ``colocate_gradients_with_ops``, for these ops only)."""
    overrides = {t: _on_its_device(t) for t in op_types}
    with get_default_graph().gradient_override_map(overrides):
        yield


def sharded_row_logits(w_shards: Sequence, b_shards: Sequence, ids: Tensor, inputs: Tensor,
                       partition_strategy: str = "mod") -> Tensor:
    """[batch, len(ids)]: ``inputs @ W[ids].T + b[ids]`` for a table split into ``w_shards``
    and ``b_shards`` (split alike) by ``partition_strategy``; ``ids`` is a vector."""
    if len(w_shards) != len(b_shards):
        raise ValueError(f"{len(w_shards)} weight shards but {len(b_shards)} bias shards")
    p = len(w_shards)
    shard, row = shard_routing(w_shards, ids, partition_strategy)
    positions = range_(0, size(ids, out_type=DType.i32), dtype=DType.i32)
    shard_rows = dynamic_partition(row, shard, p)
    shard_positions = dynamic_partition(positions, shard, p)
    pieces = []
    for w, b, rows in zip(w_shards, b_shards, shard_rows):
        with colocate_with(w), gradients_on_their_devices():
            logits_t = matmul(embedding_lookup(w, rows), inputs, transpose_b=True)   # [n_k, B]
            pieces.append(add(logits_t, expand_dims(embedding_lookup(b, rows), 1)))
    merged = dynamic_stitch(shard_positions, pieces)                               # [n, B]
    return transpose(merged, np.array([1, 0], np.int32))

