"""Compiled steps around a ``tf.py_func`` whose results have unknown rank.

Generated C needs every rank when it is compiled; a ``py_func``'s results have a rank only
once the function has returned (unless the graph ``set_shape``s them). A step that needs such
results is run as two compiled steps with the function called between them, in the session,
as the host call of a compiled ``PyFunc`` would:

1. the part of the step the ``PyFunc`` node depends on (its ancestors, through data and
   control inputs): it computes the function's inputs and every value of that part that the
   rest of the step uses (other than resource handles, which the second part looks up again);
2. the function, called with those inputs (``runtime.py_funcs.call_py_func``: the same
   checks of its results' count and dtypes, errors in TensorFlow's classes naming the node);
3. the rest of the step, fed with the function's results (compiled per ranks fed, as a
   placeholder without a shape is: ``dsl/rank_specialized.py``) and the first part's values.

Nothing runs twice: the first part's values reach the second as feeds. A step where some
node of the rest waits on a node of the first part by a control edge alone cannot be cut that
way and keeps the compiler's error. A step with several such ``py_func``s is cut at each.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Dict, List, Sequence

import numpy as np

from compiler.errors import StaticValueNeeded
from compiler.ir.graph import Node, Output
from compiler.ir.reachability import needed_nodes
from runtime.dtypes import DType
from runtime.errors import OpError
from runtime.feeds import FeedCheck
from runtime.py_funcs import call_py_func

PY_FUNC_OPS = ("PyFunc", "PyFuncStateless")


def split_step(graph, feeds: List[Output], plan, error: StaticValueNeeded,
               rank_step: Callable):
    """A ``PyFuncSplitStep`` for the step, when ``error`` is a py_func's result of unknown
    rank and the step can be cut there; None otherwise."""
    node = getattr(error, "node", None)
    if node is None or node.op not in PY_FUNC_OPS or "unknown rank" not in str(error):
        return None
    try:
        p = graph.node(node.name)
    except Exception:
        return None
    fed = set(feeds)
    first = needed_nodes((), [p], fed)
    first_inputs = first - {p}
    rest = needed_nodes(plan.outputs, plan.targets, fed) - first
    cut: List[Output] = []
    for n in rest:
        if any(c in first for c in n.control_inputs):
            return None                     # a control edge alone: cannot be cut here
        for i in n.inputs:
            if i.node in first and i.node is not p and i not in fed and i not in cut:
                if i.type.dtype is DType.resource:
                    continue                # looked up again by the rest
                cut.append(i)
    wanted_first = [o for o in plan.outputs if o.node in first_inputs and o not in fed]
    a_fetches = list(dict.fromkeys([i for i in p.inputs if i not in fed] + cut + wanted_first))
    return PyFuncSplitStep(p, feeds, a_fetches, cut, plan, rank_step)


class PyFuncSplitStep:
    """The ``Executable`` interface ``Session`` uses (``feed_checks``, ``checks_feeds``,
    ``call``) over the two steps of a step cut at the ``PyFunc`` node ``p``."""

    checks_feeds = False

    def __init__(self, p: Node, feeds: List[Output], a_fetches: List[Output],
                 cut: List[Output], plan, rank_step: Callable):
        self.feed_checks = [FeedCheck(f.name, f.dtype, f.type.shape) for f in feeds]
        self._p = p
        self._feeds = list(feeds)
        self._a_fetches = a_fetches
        self._first = rank_step(self._feeds, SimpleNamespace(outputs=a_fetches, targets=[])) \
            if a_fetches else None
        self._results = list(p.outputs)
        self._b_feeds = list(dict.fromkeys(self._feeds + cut + self._results))
        self._outputs = list(plan.outputs)
        known = set(a_fetches) | set(self._feeds) | set(self._results)
        self._b_outputs = [o for o in plan.outputs if o not in known]
        b_targets = [t for t in plan.targets if t is not p and t not in
                     {i.node for i in a_fetches}]
        self._second = rank_step(self._b_feeds, SimpleNamespace(outputs=self._b_outputs,
                                                                targets=b_targets)) \
            if (self._b_outputs or b_targets) else None

    def call(self, arrays: Sequence[np.ndarray], store=None, timeout_ms: int = 0):
        values: Dict[Output, np.ndarray] = dict(zip(self._feeds, arrays))
        if self._first is not None:
            got = self._first.call(list(arrays), store=store, timeout_ms=timeout_ms)
            values.update(zip(self._a_fetches, got))
        p = self._p
        try:
            results = call_py_func(p.attrs["token"], [values[i] for i in p.inputs],
                                   p.attrs["Tout"])
        except OpError as e:
            where = f"{p.location}: " if getattr(p, "location", None) else ""
            raise type(e)(f"{where}node '{p.name}' ({p.op}): {e}", p.name,
                          str(p.location) if getattr(p, "location", None) else None) from None
        values.update(zip(self._results, results))
        if self._second is not None:
            b_arrays = [values[f] for f in self._b_feeds]
            got = self._second.call(b_arrays, store=store, timeout_ms=timeout_ms)
            values.update(zip(self._b_outputs, got))
        return [values[o] for o in self._outputs]
