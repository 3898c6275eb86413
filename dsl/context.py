"""The builder's ambient state: the default graph and the scopes ops are created under
(name scope, device, control dependencies), as in TensorFlow 1.x."""
from __future__ import annotations

import contextlib
import re
import threading
from typing import Callable, Iterable, List, Optional, Union

from compiler.errors import GraphError
from compiler.ir.graph import Graph as _IRGraph
from compiler.ir.graph import Node, check_node_name


class _ControlGroup:
    """One ``control_dependencies`` block: its inputs and the nodes created inside it."""

    __slots__ = ("inputs", "created")

    def __init__(self, inputs: List[Node]):
        self.inputs = inputs
        self.created: set = set()


DeviceSpec = Union[str, Callable, None]


class Graph(_IRGraph):
    """A dataflow graph being built. ``with g.as_default():`` makes it the target of new ops."""

    def __init__(self, name: str = "main"):
        super().__init__(name)
        self._name_stack: List[str] = []
        self._device_stack: List[DeviceSpec] = []
        self._control_stack: List[_ControlGroup] = []
        self.collections: dict = {}
        self._gradient_override_stack: List[dict] = []
        self._gradient_overrides: dict = {}   # Node -> op type whose gradient it uses

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
        if ":" not in name:
            raise ValueError(f"'{name}' names an operation, not a tensor; tensor names look "
                             f"like '{name}:0'")
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
        """The scope new ops are named under, without a trailing slash ("" at the top)."""
        return self._name_stack[-1] if self._name_stack else ""

    @property
    def current_device(self) -> str:
        """The device spec of the innermost string ``device`` block ("" when none)."""
        return device_for(self, None)

    def current_control_inputs(self, inputs: Iterable[Node] = ()) -> List[Node]:
        """Control inputs for a new op reading ``inputs`` (TensorFlow's rule: a block whose
        ops already feed the new op, and the block's own inputs, add nothing)."""
        input_nodes = set(inputs)
        seen, out = set(), []
        for group in self._control_stack:
            if input_nodes & group.created:
                continue                      # an input was made inside: it already waits
            for n in group.inputs:
                if n not in seen and n not in input_nodes:
                    seen.add(n)
                    out.append(n)
        return out

    def _record_created(self, node: Node) -> None:
        for group in self._control_stack:
            group.created.add(node)
        for mapping in reversed(self._gradient_override_stack):
            if node.op in mapping:
                self._gradient_overrides[node] = mapping[node.op]
                break

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict):
        """Ops created inside whose type is a key use the gradient registered for its value."""
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()):
            raise TypeError("gradient_override_map takes a dict of op type names to op type names")
        self._gradient_override_stack.append(dict(op_type_map))
        try:
            yield
        finally:
            self._gradient_override_stack.pop()


class _State(threading.local):
    def __init__(self):
        self.stack: List[Graph] = []


_state = _State()
_global_default: List[Graph] = [Graph()]


def get_default_graph() -> Graph:
    return _state.stack[-1] if _state.stack else _global_default[0]


def reset_default_graph() -> None:
    """Replace the global default graph by a new empty one (not inside ``as_default``)."""
    if _state.stack:
        raise RuntimeError("reset_default_graph() inside a 'with g.as_default()' block")
    _global_default[0] = Graph()


@contextlib.contextmanager
def name_scope(name: Optional[str]):
    """Prefix the names of ops created inside with ``scope/`` and yield ``"scope/"``.

    As in TensorFlow: a scope entered again gets a unique name (``layer``, ``layer_1``); a name
    ending in ``/`` re-enters that exact scope; ``None`` or "" goes back to the top level.
    """
    g = get_default_graph()
    if not name:
        scope = ""
    elif name.endswith("/"):
        scope = name.rstrip("/")
    else:
        outer = g.current_name_scope
        scope = g.unique_name(check_node_name(f"{outer}/{name}" if outer else name))
    if scope:
        check_node_name(scope)
    g._name_stack.append(scope)
    try:
        yield scope + "/" if scope else ""
    finally:
        g._name_stack.pop()


# --- devices -----------------------------------------------------------------------------------
_DEVICE_FIELDS = ("job", "replica", "task", "device")
_LEGACY_DEVICE = re.compile(r"^(cpu|gpu|CPU|GPU)(:(\d+|\*))?$")


def parse_device_spec(spec: str) -> dict:
    """``/job:ps/task:0/device:CPU:0`` (or ``/cpu:0``) into its fields; raises GraphError."""
    fields: dict = {}
    for part in spec.strip().split("/"):
        if not part:
            continue
        m = _LEGACY_DEVICE.match(part)
        if m:
            fields["device"] = f"{m.group(1).upper()}:{m.group(3) or '*'}"
            continue
        key, sep, value = part.partition(":")
        if not sep or key not in _DEVICE_FIELDS or not value:
            raise GraphError(f"bad device spec '{spec}': '{part}' is not job:NAME, replica:N, "
                             "task:N or device:TYPE:N")
        if key == "device":
            dtype, _, index = value.partition(":")
            value = f"{dtype.upper() if dtype.lower() in ('cpu', 'gpu') else dtype}:{index or '*'}"
        fields[key] = value
    return fields


def merge_device_specs(outer: str, inner: str) -> str:
    """``inner`` refined by ``outer``: fields the inner spec leaves out come from outside."""
    fields = parse_device_spec(outer) if outer else {}
    fields.update(parse_device_spec(inner))
    return "".join(f"/{k}:{fields[k]}" for k in _DEVICE_FIELDS if k in fields)


class PendingOp:
    """What a device function sees of an op about to be created (``type`` and ``name``)."""

    __slots__ = ("type", "name")

    def __init__(self, op_type: str, name: str):
        self.type = op_type
        self.name = name


def device_for(g: Graph, op: Optional[PendingOp]) -> str:
    """The device an op created now gets, from the stack of ``device`` blocks."""
    spec = ""
    for entry in g._device_stack:
        if entry is None:
            spec = ""
        elif callable(entry):
            if op is None:
                continue
            got = entry(op)
            if got:
                spec = merge_device_specs(spec, str(got))
        elif entry:
            spec = merge_device_specs(spec, entry)
    return spec


@contextlib.contextmanager
def device(spec: DeviceSpec):
    """Request a device for ops created inside (recorded on nodes; placement decides).

    A partial spec refines the enclosing one (``/job:ps`` then ``/task:1`` is
    ``/job:ps/task:1``); "" changes nothing; ``None`` clears it; a function of the op
    (``op.type``, ``op.name``) returns a spec.
    """
    g = get_default_graph()
    if isinstance(spec, str) and spec:
        parse_device_spec(spec)                  # a typo fails here, where it was written
    elif spec is not None and not callable(spec) and spec != "":
        raise TypeError(f"device() takes a spec string, a function or None, got {spec!r}")
    g._device_stack.append(spec)
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
    else:
        nodes = [as_node(c) for c in control_inputs]
        for n in nodes:
            if n.graph is not g:
                raise GraphError(f"control input '{n.name}' is from another graph than the "
                                 "default graph")
        g._control_stack = saved + [_ControlGroup(nodes)]
    try:
        yield
    finally:
        g._control_stack = saved
