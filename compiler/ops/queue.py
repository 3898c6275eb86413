"""FIFO queues as graph ops (TensorFlow's ``FIFOQueueV2`` family).

``FIFOQueueV2`` makes a handle to a queue that lives in the runtime (keyed by its shared
name, the node name when empty); ``QueueEnqueueV2``/``QueueEnqueueManyV2`` add elements,
``QueueDequeueV2``/``QueueDequeueManyV2``/``QueueDequeueUpToV2`` take them, ``QueueCloseV2``
and ``QueueSizeV2`` close and measure it. Enqueue blocks while the queue is full, dequeue while
it is empty, both within the step's deadline (``RunOptions(timeout_in_ms=...)``); a dequeue
from a closed, empty queue is an ``OutOfRangeError``. The C side is ``flowc_queue`` in
``flowc_rt.h``; the interpreter uses ``runtime.queues.PyQueue`` with the same rules.

Components have the dtypes ``component_types`` and, for the C backend, the static
``shapes`` given to the queue (checked on enqueue; dequeued tensors have them).
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np

from compiler.codegen.kernel_context import KernelContext, c_string
from compiler.errors import ExecutionError, ShapeError
from compiler.ir.types import TensorType, shape_str
from compiler.ops.handles import resource_source
from compiler.ir.op_registry import register_op
from runtime.dtypes import DType
from runtime.errors import FlowcError


def queue_key(node) -> str:
    return node.attrs.get("shared_name") or node.name


def queue_source(out):
    """The FIFOQueueV2 node a handle comes from (through Identity), or None."""
    return resource_source(out, ("FIFOQueueV2",))


def _queue_of(ctx_node) -> "Node":  # noqa: F821
    src = queue_source(ctx_node.inputs[0])
    if src is None:
        raise ShapeError("input 0 must be a queue handle made by FIFOQueueV2", ctx_node)
    return src


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


def _enqueue_kernel(ctx, handle, *components):
    _pyqueue(ctx, handle).put([components], _timeout(ctx))
    return []


def _enqueue_many_kernel(ctx, handle, *components):
    n = {c.shape[0] if c.ndim else None for c in components}
    if len(n) != 1 or None in n:
        raise ExecutionError(f"enqueue_many components must share a leading dim, got "
                             f"{[list(c.shape) for c in components]}", ctx.node)
    rows = n.pop()
    _pyqueue(ctx, handle).put([tuple(c[i] for c in components) for i in range(rows)],
                              _timeout(ctx))
    return []


def _dequeue_kernel(ctx, handle):
    (elem,) = _pyqueue(ctx, handle).take(1, timeout_ms=_timeout(ctx))
    return list(elem)


def _dequeue_n_kernel(allow_fewer: bool):
    def kernel(ctx, handle, n):
        elems = _pyqueue(ctx, handle).take(int(n), allow_fewer, _timeout(ctx))
        types = ctx.attrs["component_types"]
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


def _close_kernel(ctx, handle):
    _pyqueue(ctx, handle).close(ctx.attrs["cancel_pending_enqueues"])
    return []


def _size_kernel(ctx, handle):
    return [np.array(_pyqueue(ctx, handle).size(), np.int32)]


# --- C ---------------------------------------------------------------------------------------
def _q(kc: KernelContext) -> str:
    return f"((flowc_queue *){kc.inputs[0].var}.data)"


def _queue_c(kc: KernelContext) -> str:
    node = kc.node
    k = kc.module.queue_index(queue_key(node), len(node.attrs["component_types"]),
                              node.attrs["capacity"])
    return f"{kc.out.var}.data = flowc_rt->queues[{k}];"


def _enqueue_c(many: bool):
    def emit(kc: KernelContext) -> str:
        q = _queue_of(kc.node)
        comps = kc.inputs[1:]
        lines = [f"flowc_tensor comps[{len(comps)}] = {{{', '.join(c.var for c in comps)}}};",
                 f"const size_t sizes[{len(comps)}] = "
                 f"{{{', '.join(f'sizeof({c.ctype})' for c in comps)}}};"]
        for k, (c, want) in enumerate(zip(comps, _component_shapes(q))):
            dims = c.shape[1:] if many else c.shape
            if want is None:
                continue
            for d, w in enumerate(want):
                if w is not None and dims[d] is None:
                    e = c.dim(d + 1 if many else d)
                    kc.check(f"{e} == {w}", f"component {k} dim {d} is %lld; the queue holds {w}",
                             f"(long long)({e})")
        if many:
            lead = comps[0].dim(0)
            for k, c in enumerate(comps[1:], 1):
                kc.check_dims_equal(c.dim(0), lead, f"enqueue_many component {k} leading dim")
            lines.append(f"for (int64_t row = 0; row < {lead}; row++)")
            lines.append(f"    if (flowc_queue_put({_q(kc)}, comps, sizes, row, flowc_rt->timeout_ms, "
                         "flowc_node, flowc_loc, st)) goto fail;")
        else:
            lines.append(f"if (flowc_queue_put({_q(kc)}, comps, sizes, -1, flowc_rt->timeout_ms, "
                         "flowc_node, flowc_loc, st)) goto fail;")
        return "\n".join(lines)
    return emit


def _shape_checks(kc: KernelContext, k: int, ref, var: str, lead: int) -> List[str]:
    """Checks that element component ``k`` (at ``var``) has the output's static dims."""
    out = []
    for d, dim in enumerate(ref.shape[lead:]):
        if dim is not None:
            out.append(f"if ({var}.rank != {ref.rank - lead} || {var}.dims[{d}] != {dim}) "
                       f"{{ flowc_fail(st, FLOWC_INVALID_ARGUMENT, flowc_node, flowc_loc, "
                       f"\"component {k}: an element of another shape (dim {d}: %lld, expected "
                       f"{dim})\", (long long){var}.dims[{d}]); goto release; }}")
    return out


def _dequeue_c(kc: KernelContext) -> str:
    n = len(kc.outputs)
    lines = [f"flowc_tensor elem[{n}];", "int64_t got = 0;",
             f"if (flowc_queue_take({_q(kc)}, 1, 0, elem, &got, flowc_rt->timeout_ms, flowc_node, "
             "flowc_loc, st)) goto fail;"]
    for k, o in enumerate(kc.outputs):
        lines += _shape_checks(kc, k, o, f"elem[{k}]", 0)
    lines += [f"{o.var} = elem[{k}];" for k, o in enumerate(kc.outputs)]
    lines += ["if (0) {", "release:",
              f"    for (int c = 0; c < {n}; c++) free(elem[c].data);", "    goto fail;", "}"]
    return "\n".join(lines)


def _dequeue_n_c(allow_fewer: bool):
    def emit(kc: KernelContext) -> str:
        n = len(kc.outputs)
        count = f"{kc.inputs[1].data}[0]"
        lines = [f"const int64_t want = (int64_t){count};",
                 "if (want < 0) " + kc.fail("cannot dequeue %lld elements", "(long long)want"),
                 f"flowc_tensor *elems = (flowc_tensor *)calloc((size_t)(want > 0 ? want : 1) * {n}, "
                 "sizeof(flowc_tensor));",
                 "if (!elems) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
                 "int64_t got = 0;",
                 f"if (want > 0 && flowc_queue_take({_q(kc)}, want, {int(allow_fewer)}, elems, &got, "
                 "flowc_rt->timeout_ms, flowc_node, flowc_loc, st)) { free(elems); goto fail; }"]
        for k, o in enumerate(kc.outputs):
            inner = " * ".join(str(d) for d in o.shape[1:]) or "1"
            if any(d is None for d in o.shape[1:]):
                raise kc.error("dequeue_many/dequeue_up_to need a queue with static component "
                               "shapes (give the queue shapes=...)")
            lines += [f"for (int64_t i = 0; i < got; i++) {{",
                      *["    " + c for c in _shape_checks(kc, k, o, f"elems[i * {n} + {k}]", 1)],
                      "}"]
            lines += [f"{o.var}.rank = {o.rank}; {o.var}.dtype = {o.dtype.code}; "
                      f"{o.var}.dims[0] = got;"]
            lines += [f"{o.var}.dims[{d}] = {dim};" for d, dim in enumerate(o.shape) if d > 0]
            lines += [f"{o.var}.data = flowc_alloc((size_t)got * {inner} * sizeof({o.ctype}));",
                      f"if (!{o.var}.data) {{ flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, flowc_node, "
                      "flowc_loc, \"out of memory\"); goto release; }",
                      f"for (int64_t i = 0; i < got; i++) memcpy(({o.ctype} *){o.var}.data + i * {inner}, "
                      f"elems[i * {n} + {k}].data, {inner} * sizeof({o.ctype}));"]
        lines += [f"for (int64_t i = 0; i < got * {n}; i++) free(elems[i].data);", "free(elems);",
                  "if (0) {", "release:",
                  f"    for (int64_t i = 0; i < got * {n}; i++) free(elems[i].data);",
                  "    free(elems);", "    goto fail;", "}"]
        return "\n".join(lines)
    return emit


def _close_c(kc: KernelContext) -> str:
    return f"flowc_queue_close({_q(kc)}, {int(kc.attr('cancel_pending_enqueues'))});"


def _size_c(kc: KernelContext) -> str:
    return f"{kc.out.data}[0] = (int32_t)flowc_queue_count({_q(kc)});"


# --- registrations ---------------------------------------------------------------------------
register_op("FIFOQueueV2", outputs=["handle: resource"],
            attrs=["component_types: list(type)", "shapes: list(shape) = []",
                   "capacity: int = -1", "container: string = ''", "shared_name: string = ''"],
            shape=_queue_shape, kernel=_queue_kernel, c_kernel=_queue_c, stateful=True,
            group="source", doc="A handle to the FIFO queue ``shared_name`` (the node's name).")

for _name, _many in (("QueueEnqueueV2", False), ("QueueEnqueueManyV2", True)):
    register_op(_name, inputs=["handle: resource", "components: Tcomponents"],
                attrs=["Tcomponents: list(type)", "timeout_ms: int = -1"],
                shape=_enqueue_shape(_many),
                kernel=_enqueue_many_kernel if _many else _enqueue_kernel,
                c_kernel=_enqueue_c(_many), stateful=True,
                doc=("Enqueue one element per row of the components" if _many else
                     "Enqueue one element") + "; blocks while the queue is full.")

register_op("QueueDequeueV2", inputs=["handle: resource"], outputs=["components: component_types"],
            attrs=["component_types: list(type)", "timeout_ms: int = -1"],
            shape=_dequeue_shape("one"), kernel=_dequeue_kernel, c_kernel=_dequeue_c,
            stateful=True, c_owns_outputs=True,
            doc="Take one element; blocks while the queue is empty.")

for _name, _fewer in (("QueueDequeueManyV2", False), ("QueueDequeueUpToV2", True)):
    register_op(_name, inputs=["handle: resource", "n: i32"],
                outputs=["components: component_types"],
                attrs=["component_types: list(type)", "timeout_ms: int = -1"],
                shape=_dequeue_shape("upto" if _fewer else "many"), kernel=_dequeue_n_kernel(_fewer),
                c_kernel=_dequeue_n_c(_fewer), stateful=True, c_owns_outputs=True,
                doc=f"Take n elements, batched along a new leading dim"
                    + (" (fewer once the queue is closed)." if _fewer else "."))

register_op("QueueCloseV2", inputs=["handle: resource"],
            attrs=["cancel_pending_enqueues: bool = false"],
            shape=lambda ctx: [], kernel=_close_kernel, c_kernel=_close_c, stateful=True,
            doc="Close the queue: enqueues fail, dequeues drain what is left.")

register_op("QueueSizeV2", inputs=["handle: resource"], outputs=["size: int32"],
            shape=lambda ctx: [TensorType(DType.i32, ())], kernel=_size_kernel, c_kernel=_size_c,
            stateful=True, doc="The number of elements in the queue.")
