"""The builder's ambient state: the default graph and the scopes ops are created under
(name scope, device, control dependencies), as in TensorFlow 1.x."""
from __future__ import annotations

import contextlib
import threading
from typing import Iterable, List, Optional

from compiler.ir.graph import Graph as _IRGraph


class Graph(_IRGraph):
    """A dataflow graph being built. ``with g.as_default():`` makes it the target of new ops."""

    def __init__(self, name: str = "main"):
        super().__init__(name)
        self._name_stack: List[str] = []
        self._device_stack: List[str] = []
        self._control_stack: List[list] = []
        self.collections: dict = {}

    @contextlib.contextmanager
    def as_default(self):
        _state.stack.append(self)
        try:
            yield self
        finally:
            _state.stack.pop()

    def get_operation_by_name(self, name: str):
        from dsl.tensor import Operation
        return Operation(self.node(name))

    def get_tensor_by_name(self, name: str):
        from dsl.tensor import Tensor
        return Tensor(self.output(name))

    def get_operations(self):
        from dsl.tensor import Operation
        return [Operation(n) for n in self]

    def add_to_collection(self, name: str, value) -> None:
        self.collections.setdefault(name, []).append(value)

    def get_collection(self, name: str) -> list:
        return list(self.collections.get(name, []))

    @property
    def current_name_scope(self) -> str:
        return "/".join(self._name_stack)

    @property
    def current_device(self) -> str:
        return self._device_stack[-1] if self._device_stack else ""

    def current_control_inputs(self) -> list:
        seen, out = set(), []
        for group in self._control_stack:
            for n in group:
                if n not in seen:
                    seen.add(n)
                    out.append(n)
        return out


class _State(threading.local):
    def __init__(self):
        self.stack: List[Graph] = []


_state = _State()
_global_default: List[Graph] = [Graph()]


def get_default_graph() -> Graph:
    return _state.stack[-1] if _state.stack else _global_default[0]


def reset_default_graph() -> None:
    if _state.stack:
        raise RuntimeError("reset_default_graph() inside a 'with g.as_default()' block")
    _global_default[0] = Graph()


@contextlib.contextmanager
def name_scope(name: Optional[str]):
    """Prefix the names of ops created inside with ``name/``. ``None`` or "" resets nothing."""
    g = get_default_graph()
    if not name:
        yield g.current_name_scope
        return
    name = name.rstrip("/")
    g._name_stack.append(name)
    try:
        yield g.current_name_scope
    finally:
        g._name_stack.pop()


@contextlib.contextmanager
def device(spec):
    """Request a device for ops created inside (recorded on nodes; placement decides)."""
    g = get_default_graph()
    g._device_stack.append(spec or "")
    try:
        yield
    finally:
        g._device_stack.pop()


@contextlib.contextmanager
def control_dependencies(control_inputs: Optional[Iterable]):
    """Ops created inside run only after ``control_inputs`` (tensors or operations).

    ``None`` clears the dependencies of the enclosing blocks, as in TensorFlow.
    """
    from dsl.tensor import as_node
    g = get_default_graph()
    saved = g._control_stack
    if control_inputs is None:
        g._control_stack = []
        try:
            yield
        finally:
            g._control_stack = saved
        return
    g._control_stack = saved + [[as_node(c) for c in control_inputs]]
    try:
        yield
    finally:
        g._control_stack = saved
