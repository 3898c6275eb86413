"""Gradients of DynamicPartition and DynamicStitch (as TensorFlow's data_flow_grad)."""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from dsl.gradients import RegisterGradient
from dsl.ops import apply_op
from dsl.tensor import Operation, Tensor


@RegisterGradient("DynamicPartition")
def _dynamic_partition_grad(op: Operation, *grads: Tensor) -> List[Optional[Tensor]]:
    """Each data row takes the gradient of the output row it went to: partition the row numbers
    the same way, then stitch the gradients back by them."""
    data, partitions = op.inputs
    n = op.get_attr("num_partitions")
    count = apply_op("Size", [partitions], {"out_type": partitions.dtype})
    rows = apply_op("Range", [np.array(0, np.int32), count, np.array(1, np.int32)], {})
    rows = apply_op("Reshape", [rows, apply_op("Shape", [partitions], {})], {})
    parted = apply_op("DynamicPartition", [rows, partitions], {"num_partitions": n})
    parted = parted if isinstance(parted, (list, tuple)) else [parted]
    filled = [g if g is not None else apply_op("ZerosLike", [o], {})
              for g, o in zip(grads, op.outputs)]
    stitched = apply_op("DynamicStitch", [list(parted), filled], {})
    return [apply_op("Reshape", [stitched, apply_op("Shape", [data], {})], {}), None]


@RegisterGradient("DynamicStitch")
def _dynamic_stitch_grad(op: Operation, g: Tensor) -> List[Optional[Tensor]]:
    """data[m] gets the merged gradient's rows at indices[m] (where indices repeat, as in
    TensorFlow, every piece gets the row: only the last one's value reached the output)."""
    n = op.get_attr("N")
    indices = op.inputs[:n]
    return [None] * n + [apply_op("GatherV2", [g, idx, np.array(0, np.int32)], {})
                         for idx in indices]
