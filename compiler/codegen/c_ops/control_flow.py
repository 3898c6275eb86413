"""The C lowering of the control-flow primitives (``compiler/ops/control_flow.py``: ``Switch``,
``Merge``, ``Enter``, ``Exit``, ``NextIteration``, ``LoopCond``). The C emitter recovers
``if``/``while`` blocks from them (``compiler/codegen/control_flow.py``); their per-node kernel
only refuses a node that is outside those structures."""
from __future__ import annotations

from compiler.ir.op_registry import set_c_kernel


def _c_kernel(kc):
    """The C emitter turns control-flow nodes into C blocks (compiler/codegen/control_flow.py);
    a node reaching the per-node path is outside the structures it recovers."""
    from compiler.errors import CodegenError
    raise CodegenError(f"{kc.node.op} outside the control-flow structure the C emitter "
                       "recovers (build it with fl.cond / fl.while_loop)", kc.node)


for _name in ("Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"):
    set_c_kernel(_name, _c_kernel)
