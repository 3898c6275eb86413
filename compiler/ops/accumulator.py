"""Conditional gradient accumulators as graph ops (TensorFlow's ``ConditionalAccumulator``
family): the state that synchronous replication (``fl.train.SyncReplicasOptimizer``, the
paper's Figure 4) is built from.

``ConditionalAccumulator`` makes a handle to an accumulator that lives in the runtime (keyed by
its shared name, the node name when empty; ``runtime/accumulators.py`` holds the rules):

- ``AccumulatorApplyGradient(handle, local_step, gradient)`` adds a gradient, unless
  ``local_step`` is below the accumulator's global step (dropped, counted as stale) or
  ``max_accumulated`` gradients are already held this step (dropped, counted as dropped);
- ``AccumulatorTakeGradient(handle, num_required)`` waits, within the step's deadline, until
  ``num_required`` gradients are held, returns their mean, empties the accumulator and
  advances its global step; ``OutOfRangeError`` once the accumulator is closed;
- ``AccumulatorNumAccumulated``, ``AccumulatorSetGlobalStep``, ``AccumulatorDropCounts``
  (dropped and stale since creation) and ``AccumulatorClose`` (end of input: waiting takes
  fail, later applies fail with ``AbortedError``).

The reference kernels call the runtime's accumulator directly; the C kernels
(``compiler/codegen/c_ops/accumulator.py``) reach the same object, so the interpreter and
compiled steps share one accumulator per store.
``SparseConditionalAccumulator`` holds sparse gradients (rows and their slices, as
``IndexedSlices``) under the same rules: ``SparseAccumulatorApplyGradient`` and
``SparseAccumulatorTakeGradient`` (each touched row once, with its mean); the other ops take
either kind of handle.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ShapeError
from compiler.ir.types import TensorType, shape_str
from compiler.ops.handles import resource_source
from compiler.ir.op_registry import register_op
from runtime.accumulators import accumulator
from runtime.dtypes import DType
from runtime.errors import OpError

# The accumulators keep and sum their dtype as such (numpy in runtime/accumulators.py): f16
# and bf16 too, so their ops are half_native.
_GRAD_TYPES = "{float}"
ACCUMULATOR_OPS = ("ConditionalAccumulator", "SparseConditionalAccumulator")


def accumulator_key(node) -> str:
    return node.attrs.get("shared_name") or node.name


def accumulator_source(out):
    """The ConditionalAccumulator node a handle comes from (through Identity), or None."""
    return resource_source(out, ACCUMULATOR_OPS)


def _source_of(node):
    src = accumulator_source(node.inputs[0])
    if src is None:
        raise ShapeError("input 0 must be an accumulator handle made by ConditionalAccumulator "
                         "or SparseConditionalAccumulator", node)
    return src


def _is_sparse(src) -> bool:
    return src.op == "SparseConditionalAccumulator"


def _source_of_kind(node, sparse: bool):
    src = _source_of(node)
    if _is_sparse(src) != sparse:
        want = "SparseConditionalAccumulator" if sparse else "ConditionalAccumulator"
        raise ShapeError(f"input 0 is a {src.op} handle; {node.op} takes a {want}'s", node)
    return src


def _declared_shape(src):
    shape = src.attrs.get("shape")
    return None if shape is None else tuple(shape)


# --- shape functions -----------------------------------------------------------------------
def _accumulator_shape(ctx):
    if ctx.attr("max_accumulated") < 0:
        raise ctx.error(f"max_accumulated must be >= 0 (0: no limit), got "
                        f"{ctx.attr('max_accumulated')}")
    return [TensorType(DType.resource, ())]


def _check_dtype(ctx, src) -> None:
    if ctx.attr("dtype") is not src.attrs["dtype"]:
        raise ctx.error(f"the accumulator holds {src.attrs['dtype'].ir_name} gradients; this op "
                        f"says {ctx.attr('dtype').ir_name}")


def _apply_shape(ctx):
    src = _source_of_kind(ctx.node, sparse=False)
    _check_dtype(ctx, src)
    step = ctx.input_shape(1)
    if step is not None and len(step) != 0:
        raise ctx.error(f"local_step must be a scalar, got shape {shape_str(step)}")
    want, got = _declared_shape(src), ctx.input_shape(2)
    if want is not None and got is not None and (len(want) != len(got) or any(
            a is not None and b is not None and a != b for a, b in zip(want, got))):
        raise ctx.error(f"the gradient has shape {shape_str(got)}; the accumulator holds "
                        f"{shape_str(want)}")
    return []


def _check_num_required(ctx, src) -> None:
    n = ctx.input_value(1)
    if n is not None and int(n) < 1:
        raise ctx.error(f"num_required must be at least 1, got {int(n)}")
    limit = src.attrs.get("max_accumulated", 0)
    if n is not None and 0 < limit < int(n):
        raise ctx.error(f"the accumulator keeps at most {limit} gradients a step; taking "
                        f"{int(n)} would wait forever")


def _take_shape(ctx):
    src = _source_of_kind(ctx.node, sparse=False)
    _check_dtype(ctx, src)
    _check_num_required(ctx, src)
    return [TensorType(src.attrs["dtype"], _declared_shape(src))]


def _sparse_apply_shape(ctx):
    src = _source_of_kind(ctx.node, sparse=True)
    _check_dtype(ctx, src)
    step, idx, vals = ctx.input_shape(1), ctx.input_shape(2), ctx.input_shape(3)
    if step is not None and len(step) != 0:
        raise ctx.error(f"local_step must be a scalar, got shape {shape_str(step)}")
    if idx is not None and len(idx) != 1:
        raise ctx.error(f"gradient_indices must be a vector, got shape {shape_str(idx)}")
    want = _declared_shape(src)
    if vals is not None and want is not None and (len(vals) != len(want) or any(
            a is not None and b is not None and a != b for a, b in zip(want[1:], vals[1:]))):
        raise ctx.error(f"gradient_values have shape {shape_str(vals)}; the accumulator holds "
                        f"rows of {shape_str(want)}")
    if vals is not None and idx is not None and vals and idx[0] is not None and \
            vals[0] is not None and idx[0] != vals[0]:
        raise ctx.error(f"{idx[0]} indices for {vals[0]} rows of values")
    return []


def _sparse_take_shape(ctx):
    src = _source_of_kind(ctx.node, sparse=True)
    _check_dtype(ctx, src)
    _check_num_required(ctx, src)
    want = _declared_shape(src)
    rows = None if want is None else (None,) + tuple(want[1:])
    rank = None if want is None else len(want)
    return [TensorType(DType.i64, (None,)), TensorType(src.attrs["dtype"], rows),
            TensorType(DType.i64, None if rank is None else (rank,))]


def _handle_only_shape(outputs):
    def fn(ctx):
        _source_of(ctx.node)
        return [TensorType(d, ()) for d in outputs]
    return fn


def _set_step_shape(ctx):
    _source_of(ctx.node)
    step = ctx.input_shape(1)
    if step is not None and len(step) != 0:
        raise ctx.error(f"new_global_step must be a scalar, got shape {shape_str(step)}")
    return []


# --- reference kernels -----------------------------------------------------------------------
def _acc(ctx):
    src = _source_of(ctx.node)
    return accumulator(ctx.state, accumulator_key(src), src.attrs["dtype"], _declared_shape(src),
                       src.attrs.get("max_accumulated", 0), _is_sparse(src))


def _timeout(ctx) -> int:
    getter = getattr(ctx.state, "step_timeout_ms", None)
    return getter() if getter else 0


def _naming_node(fn):
    """Runtime errors keep their type and gain the node's name and source location."""
    def kernel(ctx, *args):
        try:
            return fn(ctx, *args)
        except OpError as e:
            raise e.add_node(ctx.node.name, ctx.node.location, ctx.node.op) from None
    return kernel


class AccumulatorHandle:
    def __init__(self, name: str):
        self.name = name


def _accumulator_kernel(ctx):
    return [np.array(AccumulatorHandle(accumulator_key(ctx.node)), dtype=object)]


@_naming_node
def _apply_kernel(ctx, handle, local_step, gradient):
    _acc(ctx).apply(int(local_step), gradient)
    return []


@_naming_node
def _take_kernel(ctx, handle, num_required):
    return [_acc(ctx).take(int(num_required), _timeout(ctx))]


@_naming_node
def _sparse_apply_kernel(ctx, handle, local_step, indices, values):
    _acc(ctx).apply_sparse(int(local_step), indices, values)
    return []


@_naming_node
def _sparse_take_kernel(ctx, handle, num_required):
    return list(_acc(ctx).take(int(num_required), _timeout(ctx)))


@_naming_node
def _num_accumulated_kernel(ctx, handle):
    return [np.array(_acc(ctx).num_accumulated(), np.int32)]


@_naming_node
def _set_step_kernel(ctx, handle, step):
    _acc(ctx).set_global_step(int(step))
    return []


@_naming_node
def _counts_kernel(ctx, handle):
    dropped, stale = _acc(ctx).counts()
    return [np.array(dropped, np.int64), np.array(stale, np.int64)]


@_naming_node
def _close_kernel(ctx, handle):
    _acc(ctx).close()
    return []


# --- registrations ---------------------------------------------------------------------------
register_op("ConditionalAccumulator", outputs=["handle: resource"],
            attrs=[f"dtype: {_GRAD_TYPES}", "shape: shape", "container: string = ''",
                   "shared_name: string = ''", "max_accumulated: int = 0"],
            shape=_accumulator_shape, kernel=_accumulator_kernel, stateful=True, group="source",
            half_native=True,
            doc="A handle to the gradient accumulator ``shared_name`` (the node's name); "
                "``max_accumulated`` > 0 keeps only the first that many fresh gradients a step.")

register_op("SparseConditionalAccumulator", outputs=["handle: resource"],
            attrs=[f"dtype: {_GRAD_TYPES}", "shape: shape", "container: string = ''",
                   "shared_name: string = ''", "max_accumulated: int = 0"],
            shape=_accumulator_shape, kernel=_accumulator_kernel, stateful=True, group="source",
            half_native=True,
            doc="A handle to the sparse gradient accumulator ``shared_name`` (rows of a tensor "
                "of ``shape``); the other Accumulator* ops work on it too.")

register_op("SparseAccumulatorApplyGradient",
            inputs=["handle: resource", "local_step: i64", "gradient_indices: i64",
                    "gradient_values: dtype"],
            attrs=[f"dtype: {_GRAD_TYPES}"], shape=_sparse_apply_shape,
            kernel=_sparse_apply_kernel, stateful=True, half_native=True,
            doc="Add the rows ``gradient_indices`` with slices ``gradient_values`` under the "
                "rules of AccumulatorApplyGradient.")

register_op("SparseAccumulatorTakeGradient", inputs=["handle: resource", "num_required: i32"],
            outputs=["indices: i64", "values: dtype", "shape: i64"],
            attrs=[f"dtype: {_GRAD_TYPES}"], shape=_sparse_take_shape,
            kernel=_sparse_take_kernel, stateful=True, half_native=True,
            doc="Wait for ``num_required`` gradients; return each touched row once (increasing) "
                "with its summed slices divided by the number of gradients taken, and the "
                "dense shape.")

register_op("AccumulatorApplyGradient",
            inputs=["handle: resource", "local_step: i64", "gradient: dtype"],
            attrs=[f"dtype: {_GRAD_TYPES}"], shape=_apply_shape, kernel=_apply_kernel,
            stateful=True, half_native=True,
            doc="Add ``gradient`` unless it is stale (``local_step`` below the accumulator's "
                "global step) or beyond ``max_accumulated``; either drop is counted.")

register_op("AccumulatorTakeGradient", inputs=["handle: resource", "num_required: i32"],
            outputs=["average: dtype"], attrs=[f"dtype: {_GRAD_TYPES}"], shape=_take_shape,
            kernel=_take_kernel, stateful=True, half_native=True,
            doc="Wait (within the step's deadline) for ``num_required`` gradients; return their "
                "mean, empty the accumulator and advance its global step.")

register_op("AccumulatorNumAccumulated", inputs=["handle: resource"],
            outputs=["num_accumulated: i32"], shape=_handle_only_shape([DType.i32]),
            kernel=_num_accumulated_kernel,
            stateful=True, doc="How many gradients the accumulator holds for this step.")

register_op("AccumulatorSetGlobalStep", inputs=["handle: resource", "new_global_step: i64"],
            shape=_set_step_shape, kernel=_set_step_kernel, stateful=True,
            doc="Set the accumulator's global step (gradients of earlier steps become stale).")

register_op("AccumulatorDropCounts", inputs=["handle: resource"],
            outputs=["dropped: i64", "stale: i64"],
            shape=_handle_only_shape([DType.i64, DType.i64]), kernel=_counts_kernel,
            stateful=True,
            doc="Gradients dropped since creation: beyond ``max_accumulated``, and stale.")

register_op("AccumulatorClose", inputs=["handle: resource"], shape=_handle_only_shape([]),
            kernel=_close_kernel, stateful=True,
            doc="Close the accumulator: a waiting or later take fails with OutOfRangeError, a "
                "later apply with AbortedError (the end-of-input signal).")
