"""Queues as graph ops (TensorFlow's ``FIFOQueueV2``, ``PaddingFIFOQueueV2`` and
``RandomShuffleQueueV2`` family).

``FIFOQueueV2`` makes a handle to a queue that lives in the runtime (keyed by its shared
name, the node name when empty); ``QueueEnqueueV2``/``QueueEnqueueManyV2`` add elements,
``QueueDequeueV2``/``QueueDequeueManyV2``/``QueueDequeueUpToV2`` take them, ``QueueCloseV2``
and ``QueueSizeV2`` close and measure it. Enqueue blocks while the queue is full, dequeue while
it is empty, both within the step's deadline (``RunOptions(timeout_in_ms=...)``); a dequeue
from a closed, empty queue is an ``OutOfRangeError``. A ``RandomShuffleQueueV2`` is the same
queue with dequeues that wait (until it is closed) for ``min_after_dequeue`` elements to
remain and take random elements (a splitmix64 generator seeded from ``seed``/``seed2``, the
same numbers in both backends). The interpreter uses
``runtime.queues.PyQueue``; the C side (``compiler/codegen/c_ops/queue.py``) has the same rules.

Components have the dtypes ``component_types`` and, for the C backend, the static
``shapes`` given to the queue (checked on enqueue; dequeued tensors have them).

A ``PaddingFIFOQueueV2`` is a FIFO queue whose ``shapes`` (required, of known rank) may have
unknown dims (-1): elements of any size there are enqueued, and ``QueueDequeueManyV2`` /
``QueueDequeueUpToV2`` pad each component of the batch with zeros to the largest size in that
batch, dim by dim (TensorFlow's ``PaddingFIFOQueue``).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.errors import ExecutionError, ShapeError
from compiler.ir.graph import Node
from compiler.ir.types import TensorType, shape_str
from compiler.ops.handles import resource_source
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType
from runtime.errors import FlowcError


def queue_key(node) -> str:
    return node.attrs.get("shared_name") or node.name


QUEUE_OPS = ("FIFOQueueV2", "RandomShuffleQueueV2", "PaddingFIFOQueueV2")


def queue_source(out):
    """The queue node (FIFOQueueV2, RandomShuffleQueueV2, PaddingFIFOQueueV2) a handle comes
    from (through Identity), or None."""
    return resource_source(out, QUEUE_OPS)


def _queue_of(ctx_node) -> Node:
    src = queue_source(ctx_node.inputs[0])
    if src is None:
        raise ShapeError("input 0 must be a queue handle made by FIFOQueueV2, "
                         "PaddingFIFOQueueV2 or RandomShuffleQueueV2", ctx_node)
    return src


def pads(queue_node: Node) -> bool:
    """Whether batches dequeued from ``queue_node`` are padded (a PaddingFIFOQueueV2)."""
    return queue_node.op == "PaddingFIFOQueueV2"


def shuffle_of(queue_node: Node) -> Optional[tuple]:
    """``(min_after_dequeue, seed, seed2)`` of a RandomShuffleQueueV2, None for a FIFO queue."""
    if queue_node.op != "RandomShuffleQueueV2":
        return None
    a = queue_node.attrs
    return (int(a.get("min_after_dequeue", 0)), int(a.get("seed", 0)), int(a.get("seed2", 0)))


def _component_shapes(queue_node) -> List[Optional[tuple]]:
    types = queue_node.attrs["component_types"]
    shapes = queue_node.attrs.get("shapes") or []
    if not shapes:
        return [None] * len(types)
    return [tuple(s) if s is not None else None for s in shapes]


# --- shape functions -----------------------------------------------------------------------
def _queue_shape(ctx):
    types, shapes = ctx.attr("component_types"), ctx.attr("shapes") or []
    if not types:
        raise ctx.error("a queue needs at least one component type")
    if shapes and len(shapes) != len(types):
        raise ctx.error(f"{len(shapes)} shapes for {len(types)} component types")
    if ctx.node.op == "PaddingFIFOQueueV2":
        if len(shapes) != len(types):
            raise ctx.error(f"a PaddingFIFOQueue needs a shape for each of its {len(types)} "
                            f"components (of known rank; -1 for a dim to pad), got "
                            f"{len(shapes)}")
        if any(sh is None for sh in shapes):
            raise ctx.error("a PaddingFIFOQueue needs shapes of known rank")
    if ctx.node.op == "RandomShuffleQueueV2":
        low, cap = ctx.attr("min_after_dequeue"), ctx.attr("capacity")
        if low < 0:
            raise ctx.error(f"min_after_dequeue must be >= 0, got {low}")
        if cap > 0 and low >= cap:
            raise ctx.error(f"min_after_dequeue {low} must be < capacity {cap}")
    return [TensorType(DType.resource, ())]


def _enqueue_shape(many: bool):
    def fn(ctx):
        q = _queue_of(ctx.node)
        types = q.attrs["component_types"]
        got = ctx.attr("Tcomponents")
        if list(got) != list(types):
            raise ctx.error(f"the queue takes components of types "
                            f"({', '.join(t.ir_name for t in types)}), got "
                            f"({', '.join(t.ir_name for t in got)})")
        for k, (want, t) in enumerate(zip(_component_shapes(q), ctx.input_types[1:])):
            shape = t.shape
            if shape is not None and many:
                if len(shape) == 0:
                    raise ctx.error(f"component {k} of enqueue_many must have a leading dim")
                shape = shape[1:]
            if want is None or shape is None:
                continue
            if len(want) != len(shape) or any(a is not None and b is not None and a != b
                                               for a, b in zip(want, shape)):
                raise ctx.error(f"component {k} has shape {shape_str(shape)}; the queue holds "
                                f"{shape_str(want)}")
        return []
    return fn


def _dequeue_shape(lead: str):
    def fn(ctx):
        q = _queue_of(ctx.node)
        if list(ctx.attr("component_types")) != list(q.attrs["component_types"]):
            raise ctx.error("component_types differ from the queue's")
        out = []
        n = None
        if lead == "many":
            v = ctx.input_value(1)
            n = int(v) if v is not None else None
        for t, shape in zip(q.attrs["component_types"], _component_shapes(q)):
            if lead == "one":
                out.append(TensorType(t, shape))
            else:
                out.append(TensorType(t, None if shape is None else (n,) + tuple(shape)))
        return out
    return fn


# --- reference kernels -----------------------------------------------------------------------
class QueueHandle:
    def __init__(self, name: str, components: int, capacity: int):
        self.name, self.components, self.capacity = name, components, capacity


def _pyqueue(ctx, handle):
    h = handle[()] if isinstance(handle, np.ndarray) else handle
    if not isinstance(h, QueueHandle):
        raise ExecutionError("input 0 is not a queue handle", ctx.node)
    try:
        return ctx.state.py_queue(h.name, h.components, h.capacity)
    except FlowcError as e:
        raise ExecutionError(str(e), ctx.node) from None


def _timeout(ctx) -> int:
    getter = getattr(ctx.state, "step_timeout_ms", None)
    return getter() if getter else 0


def _queue_kernel(ctx):
    return [np.array(QueueHandle(queue_key(ctx.node), len(ctx.attrs["component_types"]),
                                 ctx.attrs["capacity"]), dtype=object)]


def _check_element(ctx, components, lead: bool) -> None:
    """Each component fits the queue's shape for it (its rank, and its known dims)."""
    for k, (c, want) in enumerate(zip(components, _component_shapes(_queue_of(ctx.node)))):
        have = np.shape(c)[1:] if lead else np.shape(c)
        if want is not None and (len(have) != len(want) or any(
                w is not None and w != h for w, h in zip(want, have))):
            raise ExecutionError(f"component {k} has shape {shape_str(have)}; the queue holds "
                                 f"{shape_str(want)}", ctx.node)


def _enqueue_kernel(ctx, handle, *components):
    _check_element(ctx, components, False)
    _pyqueue(ctx, handle).put([components], _timeout(ctx))
    return []


def _enqueue_many_kernel(ctx, handle, *components):
    n = {c.shape[0] if c.ndim else None for c in components}
    if len(n) != 1 or None in n:
        raise ExecutionError(f"enqueue_many components must share a leading dim, got "
                             f"{[list(c.shape) for c in components]}", ctx.node)
    rows = n.pop()
    _check_element(ctx, components, True)
    _pyqueue(ctx, handle).put([tuple(c[i] for c in components) for i in range(rows)],
                              _timeout(ctx))
    return []


def _dequeue_kernel(ctx, handle):
    (elem,) = _pyqueue(ctx, handle).take(1, timeout_ms=_timeout(ctx),
                                         shuffle=shuffle_of(_queue_of(ctx.node)))
    return list(elem)


def _dequeue_n_kernel(allow_fewer: bool):
    def kernel(ctx, handle, n):
        if np.size(n) != 1:
            raise ExecutionError(f"n must be a scalar, got shape {list(np.shape(n))}", ctx.node)
        elems = _pyqueue(ctx, handle).take(int(np.reshape(n, -1)[0]), allow_fewer,
                                           _timeout(ctx), shuffle_of(_queue_of(ctx.node)))
        types = ctx.attrs["component_types"]
        queue = _queue_of(ctx.node)
        if pads(queue):
            return [_padded(parts, t, want) for parts, t, want in
                    zip(zip(*elems) if elems else [()] * len(types), types,
                        _component_shapes(queue))]
        out = []
        for k, t in enumerate(types):
            parts = [e[k] for e in elems]
            if len({p.shape for p in parts}) > 1:
                raise ExecutionError(f"component {k}: elements of different shapes "
                                     f"{sorted({p.shape for p in parts})} cannot be batched",
                                     ctx.node)
            out.append(np.stack(parts).astype(t.np) if parts else np.zeros((0,), t.np))
        return out
    return kernel


def _padded(parts, dtype: DType, want) -> np.ndarray:
    """``parts`` stacked along a new leading dim, each padded with zeros at the end of every
    dim to the largest size among them (a PaddingFIFOQueue's batch)."""
    dims = [max((p.shape[d] for p in parts), default=0) if w is None else w
            for d, w in enumerate(want)]
    out = np.zeros([len(parts)] + dims, dtype.np)
    for i, p in enumerate(parts):
        out[(i,) + tuple(slice(0, n) for n in p.shape)] = p
    return out


def _close_kernel(ctx, handle):
    _pyqueue(ctx, handle).close(ctx.attrs["cancel_pending_enqueues"])
    return []


def _size_kernel(ctx, handle):
    return [np.array(_pyqueue(ctx, handle).size(), np.int32)]


# --- registrations ---------------------------------------------------------------------------
register_op("FIFOQueueV2", outputs=["handle: resource"],
            attrs=["component_types: list(type)", "shapes: list(shape) = []",
                   "capacity: int = -1", "container: string = ''", "shared_name: string = ''"],
            shape=_queue_shape, kernel=_queue_kernel, stateful=True,
            group="source", half_native=True,
            doc="A handle to the FIFO queue ``shared_name`` (the node's name).")

register_op("PaddingFIFOQueueV2", outputs=["handle: resource"],
            attrs=["component_types: list(type)", "shapes: list(shape) = []",
                   "capacity: int = -1", "container: string = ''", "shared_name: string = ''"],
            shape=_queue_shape, kernel=_queue_kernel, stateful=True,
            group="source", half_native=True,
            doc="A handle to the FIFO queue ``shared_name`` (the node's name) whose batches "
                "are padded with zeros to the largest element in each unknown dim.")

register_op("RandomShuffleQueueV2", outputs=["handle: resource"],
            attrs=["component_types: list(type)", "shapes: list(shape) = []",
                   "capacity: int = -1", "min_after_dequeue: int = 0", "seed: int = 0",
                   "seed2: int = 0", "container: string = ''", "shared_name: string = ''"],
            shape=_queue_shape, kernel=_queue_kernel, stateful=True,
            group="source", half_native=True,
            doc="A handle to the queue ``shared_name`` (the node's name) whose dequeues take "
                "random elements, once ``min_after_dequeue`` would remain (until it is "
                "closed); seeded from ``seed``/``seed2`` (both 0: nondeterministically).")

for _name, _many in (("QueueEnqueueV2", False), ("QueueEnqueueManyV2", True)):
    register_op(_name, inputs=["handle: resource", "components: Tcomponents"],
                attrs=["Tcomponents: list(type)", "timeout_ms: int = -1"],
                shape=_enqueue_shape(_many),
                kernel=_enqueue_many_kernel if _many else _enqueue_kernel, stateful=True,
                half_native=True,
                doc=("Enqueue one element per row of the components" if _many else
                     "Enqueue one element") + "; blocks while the queue is full.")

register_op("QueueDequeueV2", inputs=["handle: resource"], outputs=["components: component_types"],
            attrs=["component_types: list(type)", "timeout_ms: int = -1"],
            shape=_dequeue_shape("one"), kernel=_dequeue_kernel, stateful=True,
            doc="Take one element; blocks while the queue is empty.", half_native=True)

for _name, _fewer in (("QueueDequeueManyV2", False), ("QueueDequeueUpToV2", True)):
    register_op(_name, inputs=["handle: resource", "n: i32"],
                outputs=["components: component_types"],
                attrs=["component_types: list(type)", "timeout_ms: int = -1"],
                shape=_dequeue_shape("upto" if _fewer else "many"), kernel=_dequeue_n_kernel(_fewer),
                stateful=True, half_native=True,
                doc=f"Take n elements, batched along a new leading dim"
                    + (" (fewer once the queue is closed)." if _fewer else "."))

register_op("QueueCloseV2", inputs=["handle: resource"],
            attrs=["cancel_pending_enqueues: bool = false"],
            shape=lambda ctx: [], kernel=_close_kernel, stateful=True,
            doc="Close the queue: enqueues fail, dequeues drain what is left.")

register_op("QueueSizeV2", inputs=["handle: resource"], outputs=["size: int32"],
            shape=lambda ctx: [TensorType(DType.i32, ())], kernel=_size_kernel,
            stateful=True, doc="The number of elements in the queue.")
