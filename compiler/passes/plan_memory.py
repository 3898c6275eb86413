"""plan-memory: each device module gets one arena for its buffers of static size, with buffers
whose lifetimes do not overlap sharing memory and elementwise kernels writing in place over an
input that dies there (``compiler/codegen/memory_plan.py``).

The plan is made at code generation, per device module, where the buffers are known (storage
roots, views, what is handed to the caller); this pass leaves the graph unchanged and is the
pipeline's switch for it. ``--disable-passes=plan-memory`` compiles every buffer into memory of
its own (small ones in a per-step arena, big ones allocated and freed per step), for comparison.
"""
from __future__ import annotations

from compiler.ir.graph import Graph
from compiler.passes.manager import Pass, PassContext, register_pass


@register_pass("plan-memory")
class PlanMemory(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        return False
