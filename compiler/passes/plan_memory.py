"""plan-memory: each device module gets one arena for its buffers of static size, with buffers
whose lifetimes do not overlap sharing memory and elementwise kernels writing in place over an
input that dies there (``compiler/passes/memory_plan.py``).

Runs after ``partition``. For each device's nodes, in graph order (the order the emitter emits
them), it computes the storage roots (views share their input's buffer), the values handed to
the caller as fetches, and the arena plan, and records the plan as attrs on the nodes:
``_arena_offsets=[...]`` (each output's offset in the arena, -1 for one not planned) on every
node with a planned output, ``_arena_size=N`` (the device's arena size) on the device's first
planned node, and ``_arena_in_place_of=k`` on a node that writes over its dying input ``k``. A
device without planned buffers gets no attrs; neither does a GPU device (its emitter allocates
at run time) nor a device whose nodes have control flow (loops and conds allocate at run time).
The C emitter reads the plan back (``recorded_plan``) instead of planning itself; it plans
itself only for a graph the pass did not record a plan on (``emit_c`` called directly). The
pass must run last: a pass that changes the graph afterwards leaves a stale plan, which the
emitter rejects where it can tell.

``--disable-passes=plan-memory`` compiles every buffer into memory of its own (small ones in a
per-step arena, big ones allocated and freed per step), for comparison.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from compiler.ir.frames import has_control_flow
from compiler.ir.graph import Graph, Node
from compiler.passes.manager import Pass, PassContext, register_pass
from compiler.passes.memory_plan import clear_plan, module_roots, plan_fetches, \
    plan_step_memory, record_plan


def _is_gpu(device: Optional[str]) -> bool:
    return bool(device) and ("/device:GPU:" in device or device.upper().startswith("GPU:"))


@register_pass("plan-memory")
class PlanMemory(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        nodes = list(graph)
        changed = clear_plan(nodes)
        devices: Dict[Optional[str], List[Node]] = {}
        for n in nodes:
            devices.setdefault(n.assigned_device, []).append(n)
        for device, order in devices.items():
            if _is_gpu(device) or has_control_flow(order):
                continue
            retvals = sorted((n for n in order if n.op == "_Retval"),
                             key=lambda r: r.attrs["index"])
            root, copies = module_roots(order)
            _, transferred = plan_fetches(retvals, root, copies)
            plan = plan_step_memory(order, root, transferred)
            changed |= record_plan(order, plan, root)
        return changed
