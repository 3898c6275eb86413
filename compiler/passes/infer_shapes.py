"""infer-shapes: recompute every node's output types from its inputs, in order.

Types only get more specific: a result that contradicts what the node already declares is a
ShapeError naming the node and its source location.
"""
from __future__ import annotations

from compiler.errors import ShapeError
from compiler.ir.construct import infer_types
from compiler.ir.graph import Graph
from compiler.ir.types import TensorType, merge_shapes
from compiler.passes.manager import Pass, PassContext, register_pass


@register_pass("infer-shapes")
class InferShapes(Pass):
    def run(self, graph: Graph, ctx: PassContext) -> bool:
        changed = False
        for node in graph:
            new = infer_types(node)
            old = node.output_types
            if len(old) != len(new) and old:
                raise ShapeError(f"declares {len(old)} outputs but the op produces {len(new)}", node)
            merged = []
            for i, t in enumerate(new):
                if i < len(old):
                    o = old[i]
                    if o.dtype != t.dtype:
                        raise ShapeError(f"output {i} is declared {o} but its inputs make it {t}", node)
                    try:
                        t = TensorType(t.dtype, merge_shapes(o.shape, t.shape))
                    except ValueError:
                        raise ShapeError(f"output {i} is declared {o} but its inputs make it {t}", node) from None
                merged.append(t)
            if merged != list(old):
                node.output_types = merged
                changed = True
        return changed
