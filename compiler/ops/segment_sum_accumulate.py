"""``_SegmentSumAccumulate``: ``acc + UnsortedSegmentSum(data, ids, rows of acc)`` added into
``acc``'s own buffer.

Made by the ``fuse-accumulate`` pass (``compiler/passes/fuse_accumulate.py``) inside a loop: the
gradient of ``gather(params, t)`` in a ``while_loop`` body, summed over the backward loop's
iterations, is a loop variable taking ``acc + UnsortedSegmentSum(g, [t], n)`` each iteration.
Unfused, every iteration zeroes a dense [n, ...] tensor, writes one row of it and adds all of
it to the accumulator (O(n) work per iteration, O(n²) per loop); fused, it adds the one row.
The output is the accumulator's buffer (``c_alias``): the pass only fuses an accumulator that
nothing else reads. Results equal the unfused ones (each segment adds its rows' sum, summed in
double and rounded once, as ``UnsortedSegmentSum`` computes it).
"""
from __future__ import annotations

from compiler.errors import ExecutionError
from compiler.ir.types import shape_str
from compiler.ops.nn_grad import _segment_ref
from compiler.ir.op_registry import register_op


def _shape(ctx) -> list:
    acc, data, ids = ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2)
    if acc is None or data is None or ids is None:
        return [acc]
    if len(acc) < 1 or len(data) < len(ids):
        raise ctx.error(f"the accumulator {shape_str(acc)} cannot take the segment sums of data "
                        f"{shape_str(data)} with ids {shape_str(ids)}")
    rows = tuple(data[len(ids):])
    if len(rows) != len(acc) - 1 or any(a is not None and b is not None and a != b
                                        for a, b in zip(rows, acc[1:])):
        raise ctx.error(f"data rows {shape_str(rows)} do not match the accumulator's "
                        f"{shape_str(acc)}")
    return [acc]


def _kernel(ctx, acc, data, ids):
    sums = _segment_ref(ctx, data, ids, acc.shape[0])
    if sums.shape != acc.shape:
        raise ExecutionError(f"the segment sums' shape {list(sums.shape)} does not match the "
                             f"accumulator's {list(acc.shape)}", ctx.node)
    return (acc + sums).astype(acc.dtype)


register_op("_SegmentSumAccumulate", inputs=["acc: T", "data: T", "segment_ids: Tindices"],
            outputs=["sum: T"], attrs=["T: {f32, f64}", "Tindices: {i32, i64}"],
            shape=_shape, kernel=_kernel, c_alias=0, group="other",
            doc="acc + UnsortedSegmentSum(data, segment_ids, rows of acc), written into acc's "
                "buffer.")
