"""Where a resource handle comes from: the node that made it (a variable, a queue, an
accumulator), followed back through ``Identity`` nodes."""
from __future__ import annotations

from typing import Collection, Optional

from compiler.ir.graph import Node, Output

_MAX_IDENTITIES = 64


def resource_source(out: Optional[Output], ops: Collection[str]) -> Optional[Node]:
    """The node of one of ``ops`` that ``out`` comes from through ``Identity`` nodes, or None
    (another producer, or a chain longer than any graph makes)."""
    for _ in range(_MAX_IDENTITIES):
        if out is None:
            return None
        n = out.node
        if n.op in ops:
            return n
        if n.op != "Identity" or not n.inputs:
            return None
        out = n.inputs[0]
    return None
