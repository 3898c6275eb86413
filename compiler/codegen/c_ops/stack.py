"""The C lowering of the stack ops (``compiler/ops/stack.py``): ``StackV2``, ``StackPushV2``,
``StackPopV2`` and ``StackCloseV2``.

The C stack (``codegen_templates/c/stack.c.j2``) keeps the elements' bytes in one buffer that
grows by doubling, so N pushes cost O(N) copying, not the O(N^2) of a concatenated
accumulator. ``StackV2`` owns the stack it allocates (released by ``flowc_stack_destroy``);
a pop owns the element it returns, or copies it into the buffer a loop allocated at its entry
(``c_fills_static_outputs``).
"""
from __future__ import annotations

from compiler.codegen.kernel_context import KernelContext
from compiler.ir.op_registry import set_c_kernel


def _helpers(kc: KernelContext) -> None:
    kc.module.add_global(kc.render("stack.c.j2"))


def _s(kc: KernelContext) -> str:
    return f"((flowc_stack *){kc.inputs[0].var}.data)"


def _stack_c(kc: KernelContext) -> str:
    _helpers(kc)
    o = kc.out
    return "\n".join([
        "flowc_stack *s = (flowc_stack *)calloc(1, sizeof(flowc_stack));",
        "if (!s) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED"),
        f"s->max_size = (int64_t){kc.inputs[0].data}[0];",
        f"{o.var}.rank = 0; {o.var}.dtype = {o.dtype.code}; {o.var}.data = s;"])


def _push_c(kc: KernelContext) -> str:
    _helpers(kc)
    e = kc.inputs[1]
    return "\n".join([
        f"int rc = flowc_stack_push({_s(kc)}, &{e.var}, sizeof({e.ctype}));",
        "if (rc == 1) " + kc.fail("the stack is full (max_size %lld)",
                                   f"(long long){_s(kc)}->max_size"),
        "if (rc == 2) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED")])


def _push_dims(kc: KernelContext):
    return [kc.inputs[1].dims]


def _pop_c(kc: KernelContext) -> str:
    _helpers(kc)
    o = kc.out
    if o.static:
        return _pop_static_c(kc) + "\n} else {\n" + _pop_allocating_c(kc) + "\n}"
    return _pop_allocating_c(kc)


def _pop_static_c(kc: KernelContext) -> str:
    """A pop of a static shape whose buffer is already there (a loop allocated it at its
    entry): copy the element into it, no allocation."""
    o = kc.out
    dims = ", ".join(str(d) for d in o.shape) or "0"
    shape = "[" + ",".join(str(d) for d in o.shape) + "]"
    return "\n".join([
        f"if ({o.var}.data) {{",
        f"static const int64_t want[] = {{{dims}}};",
        f"{o.var}.rank = {o.rank}; {o.var}.dtype = {o.dtype.code};",
        *[f"{o.var}.dims[{d}] = {dim};" for d, dim in enumerate(o.shape)],
        f"int rc = flowc_stack_pop_into({_s(kc)}, &{o.var}, sizeof({o.ctype}), want, {o.rank});",
        "if (rc == 1) " + kc.fail("pop from an empty stack"),
        "if (rc == 3) " + kc.fail(f"the top element's shape is not the {shape} the pop expects")])


def _pop_allocating_c(kc: KernelContext) -> str:
    o = kc.out
    lines = [f"if (flowc_stack_top_rank({_s(kc)}) != -1 && flowc_stack_top_rank({_s(kc)}) != "
             f"{o.rank}) " + kc.fail(f"the top element has rank %d; the pop expects {o.rank}",
                                     f"(int)flowc_stack_top_rank({_s(kc)})"),
             f"int rc = flowc_stack_pop({_s(kc)}, &{o.var}, sizeof({o.ctype}), {o.dtype.code});",
             "if (rc == 1) " + kc.fail("pop from an empty stack"),
             "if (rc == 2) " + kc.fail("out of memory", code="FLOWC_RESOURCE_EXHAUSTED")]
    for d, dim in enumerate(o.shape):
        if dim is not None:
            lines.append(f"if ({o.var}.dims[{d}] != {dim}) {{ free({o.var}.data); "
                         f"{o.var}.data = NULL; "
                         + kc.fail(f"popped an element with dim {d} = %lld; the pop expects {dim}",
                                   f"(long long){o.var}.dims[{d}]") + " }")
    return "\n".join(lines)


def _close_c(kc: KernelContext) -> str:
    _helpers(kc)
    return f"flowc_stack_release({_s(kc)});"


set_c_kernel("StackV2", _stack_c, c_owns_outputs=True, c_release="flowc_stack_destroy")

set_c_kernel("StackPushV2", _push_c, _push_dims)

set_c_kernel("StackPopV2", _pop_c, c_owns_outputs=True, c_fills_static_outputs=True)

set_c_kernel("StackCloseV2", _close_c)
