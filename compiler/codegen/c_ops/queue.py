"""The C lowering of the queue ops (``compiler/ops/queue.py``): the kernels of
``FIFOQueueV2``, ``RandomShuffleQueueV2``, ``QueueEnqueueV2``/``QueueEnqueueManyV2``, ``QueueDequeueV2``/
``QueueDequeueManyV2``/``QueueDequeueUpToV2``, ``QueueCloseV2`` and ``QueueSizeV2``.

The C side is ``flowc_queue`` in ``flowc_rt.h``: a queue lives in the runtime (one per
``queue_index`` of the module), enqueue and dequeue block within the step's deadline
(``flowc_rt->timeout_ms``). Enqueues check the components against the static ``shapes`` given
to the queue; dequeues own the tensors they return (``c_owns_outputs``).
"""
from __future__ import annotations

from typing import List

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel
from compiler.ops.queue import _component_shapes, _queue_of, pads, queue_key, shuffle_of


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


def _take_args(kc: KernelContext) -> str:
    """The shuffle arguments of ``flowc_queue_take_ex`` for the queue the op dequeues from."""
    sh = shuffle_of(_queue_of(kc.node))
    if sh is None:
        return "0, 0, 0, 0"
    low, seed, seed2 = sh
    return f"1, {low}LL, {seed}LL, {seed2}LL"


def _dequeue_c(kc: KernelContext) -> str:
    n = len(kc.outputs)
    lines = [f"flowc_tensor elem[{n}];", "int64_t got = 0;",
             f"if (flowc_queue_take_ex({_q(kc)}, 1, 0, elem, &got, flowc_rt->timeout_ms, "
             f"{_take_args(kc)}, flowc_node, flowc_loc, st)) goto fail;"]
    for k, o in enumerate(kc.outputs):
        lines += _shape_checks(kc, k, o, f"elem[{k}]", 0)
    lines += [f"{o.var} = elem[{k}];" for k, o in enumerate(kc.outputs)]
    lines += ["if (0) {", "release:",
              f"    for (int c = 0; c < {n}; c++) free(elem[c].data);", "    goto fail;", "}"]
    return "\n".join(lines)


def _dequeue_n_c(allow_fewer: bool):
    def emit(kc: KernelContext) -> str:
        n = len(kc.outputs)
        kc.check_scalar(1, "n")
        count = f"{kc.inputs[1].data}[0]"
        lines = [f"const int64_t want = (int64_t){count};",
                 "if (want < 0) " + kc.fail("cannot dequeue %lld elements", "(long long)want"),
                 f"flowc_tensor *elems = (flowc_tensor *)calloc((size_t)(want > 0 ? want : 1) * {n}, "
                 "sizeof(flowc_tensor));",
                 "if (!elems) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
                 "int64_t got = 0;",
                 f"if (want > 0 && flowc_queue_take_ex({_q(kc)}, want, {int(allow_fewer)}, elems, "
                 f"&got, flowc_rt->timeout_ms, {_take_args(kc)}, flowc_node, flowc_loc, st)) "
                 "{ free(elems); goto fail; }"]
        padding = pads(_queue_of(kc.node))
        for k, o in enumerate(kc.outputs):
            inner = " * ".join(str(d) for d in o.shape[1:]) or "1"
            if any(d is None for d in o.shape[1:]):
                if not padding:
                    raise kc.error("dequeue_many/dequeue_up_to need a queue with static "
                                   "component shapes (give the queue shapes=..., or use a "
                                   "PaddingFIFOQueue)")
                lines += _padded_batch_c(kc, k, o, n)
                continue
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


def _padded_batch_c(kc: KernelContext, k: int, o, n: int) -> List[str]:
    """Output ``o`` (component ``k``) of a PaddingFIFOQueue's batch: every element of the
    queue's rank, its static dims as the queue says; each unknown dim the largest among the
    ``got`` elements; the batch zeroed, then each element copied to the start of its row."""
    r = o.rank - 1
    e = f"elems[i * {n} + {k}]"
    lines = [f"int64_t pd{k}[{max(r, 1)}];"]
    lines += [f"pd{k}[{d}] = {dim if dim is not None else 0};" for d, dim in
              enumerate(o.shape[1:])]
    lines += ["for (int64_t i = 0; i < got; i++) {",
              f"    if ({e}.rank != {r}) {{ flowc_fail(st, FLOWC_INVALID_ARGUMENT, flowc_node, "
              f"flowc_loc, \"component {k}: an element of rank %d; the queue holds rank {r}\", "
              f"(int){e}.rank); goto release; }}"]
    lines += ["    " + c for c in _shape_checks(kc, k, o, e, 1)]
    lines += [f"    if ({e}.dims[{d}] > pd{k}[{d}]) pd{k}[{d}] = {e}.dims[{d}];"
              for d, dim in enumerate(o.shape[1:]) if dim is None]
    lines.append("}")
    inner = " * ".join(f"pd{k}[{d}]" for d in range(r)) or "1"
    lines += [f"{o.var}.rank = {o.rank}; {o.var}.dtype = {o.dtype.code}; {o.var}.dims[0] = got;"]
    lines += [f"{o.var}.dims[{d + 1}] = pd{k}[{d}];" for d in range(r)]
    lines += [f"const int64_t inner{k} = {inner};",
              f"{o.var}.data = flowc_alloc((size_t)(got * inner{k} > 0 ? got * inner{k} : 1) "
              f"* sizeof({o.ctype}));",
              f"if (!{o.var}.data) {{ flowc_fail(st, FLOWC_RESOURCE_EXHAUSTED, flowc_node, "
              "flowc_loc, \"out of memory\"); goto release; }",
              f"memset({o.var}.data, 0, (size_t)(got * inner{k}) * sizeof({o.ctype}));",
              "for (int64_t i = 0; i < got; i++) {",
              f"    const {o.ctype} *src = (const {o.ctype} *){e}.data;",
              f"    {o.ctype} *dst = ({o.ctype} *){o.var}.data + i * inner{k};",
              "    int64_t count = 1;"]
    lines += [f"    count *= {e}.dims[{d}];" for d in range(r)]
    lines += ["    for (int64_t j = 0; j < count; j++) {",
              "        int64_t rem = j, off = 0, stride = 1;"]
    for d in reversed(range(r)):
        lines += [f"        off += (rem % {e}.dims[{d}]) * stride; rem /= {e}.dims[{d}]; "
                  f"stride *= pd{k}[{d}];"]
    lines += ["        dst[off] = src[j];", "    }", "}"]
    return lines


def _close_c(kc: KernelContext) -> str:
    return f"flowc_queue_close({_q(kc)}, {int(kc.attr('cancel_pending_enqueues'))});"


def _size_c(kc: KernelContext) -> str:
    return f"{kc.out.data}[0] = (int32_t)flowc_queue_count({_q(kc)});"


set_c_kernel("FIFOQueueV2", _queue_c)
set_c_kernel("RandomShuffleQueueV2", _queue_c)
set_c_kernel("PaddingFIFOQueueV2", _queue_c)

for _name, _many in (("QueueEnqueueV2", False), ("QueueEnqueueManyV2", True)):
    set_c_kernel(_name, _enqueue_c(_many))

set_c_kernel("QueueDequeueV2", _dequeue_c, c_owns_outputs=True)

for _name, _fewer in (("QueueDequeueManyV2", False), ("QueueDequeueUpToV2", True)):
    set_c_kernel(_name, _dequeue_n_c(_fewer), c_owns_outputs=True)

set_c_kernel("QueueCloseV2", _close_c)

set_c_kernel("QueueSizeV2", _size_c)
