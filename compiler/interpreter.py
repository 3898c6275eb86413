"""The numpy reference interpreter: the oracle every compiled kernel and pass is tested against.

It runs the nodes the fetches and targets need, in graph order, with each op's numpy kernel.
Subclasses can override ``run_node`` to build analyses on top of it (the torch.fx pattern).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Set

import numpy as np

from compiler.errors import ExecutionError, CompileError
from compiler.ir.construct import run_reference
from compiler.ir.graph import Graph, Node, Output
from runtime.errors import FeedError, FlowcError
from runtime.feeds import check_feed


def needed_nodes(fetches: Iterable[Output], targets: Iterable[Node], fed: Set[Output]) -> Set[Node]:
    """Nodes that must run to produce ``fetches`` and run ``targets`` (fed outputs cut the walk)."""
    need: Set[Node] = set()
    stack = [f.node for f in fetches if f not in fed] + list(targets)
    while stack:
        n = stack.pop()
        if n in need:
            continue
        need.add(n)
        for i in n.inputs:
            if i not in fed:
                stack.append(i.node)
        stack.extend(n.control_inputs)
    return need


class Interpreter:
    def __init__(self, graph: Graph, state=None):
        from runtime.resources import ResourceStore
        self.graph = graph
        self.state = state if state is not None else ResourceStore()

    def run(self, fetches: Sequence[Output], feeds: Optional[Dict[Output, object]] = None,
            targets: Sequence[Node] = ()) -> List[np.ndarray]:
        feeds = dict(feeds or {})
        env: Dict[Output, np.ndarray] = {}
        for out, value in feeds.items():
            env[out] = check_feed(out.node.name if out.index == 0 else out.name, value,
                                  out.dtype, out.shape)
        need = needed_nodes(fetches, targets, set(feeds))
        for node in self.graph:
            if node not in need:
                continue
            if all(o in env for o in node.outputs) and node.outputs:
                continue
            if node.op == "Placeholder":
                raise FeedError(f"you must feed a value for placeholder '{node.name}' "
                                f"({node.output_types[0]})" + (f", defined at {node.location}" if node.location else ""))
            values = [env[i] for i in node.inputs]
            results = self.run_node(node, values)
            if len(results) != node.num_outputs:
                raise ExecutionError(f"the reference kernel returned {len(results)} values for "
                                     f"{node.num_outputs} outputs", node)
            for i, r in enumerate(results):
                env.setdefault(Output(node, i), r)       # a fed output keeps its fed value
        return [env[f] for f in fetches]

    def run_node(self, node: Node, values: List[np.ndarray]) -> List[np.ndarray]:
        try:
            with np.errstate(all="ignore"):
                return run_reference(node, values, self.state)
        except FlowcError:
            raise
        except Exception as e:
            raise ExecutionError(f"{type(e).__name__}: {e}", node) from e
