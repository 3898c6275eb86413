"""The builder's ambient state: the default graph and the scopes ops are created under
(name scope, device, control dependencies), as in TensorFlow 1.x."""
from __future__ import annotations

import contextlib
import re
import threading
from typing import Callable, Iterable, List, Optional, Union

from compiler.devices import merge_device_specs, parse_device_spec  # noqa: F401  (re-exported)
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
        self._colocation_stack: List[List[str]] = []  # node names ops created inside go with
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

    def as_graph_def(self, from_version=None, add_shapes: bool = False):
        """The graph as a TensorFlow ``GraphDef`` (flowc's ``tf_formats`` message; see
        ``compiler/interop/graphdef.py``); ``fl.import_graph_def`` reads it back."""
        from compiler.interop.graphdef import graph_to_graphdef
        return graph_to_graphdef(self)

    def get_operations(self):
        from dsl.tensor import Operation
        return [Operation(n) for n in self]

    def add_to_collection(self, name: str, value) -> None:
        self.collections.setdefault(name, []).append(value)

    def get_collection(self, name: str, scope: Optional[str] = None) -> list:
        """A copy of collection ``name``; with ``scope``, only the items that have a ``name``
        matched at its start by the regular expression ``scope`` (TensorFlow's rule)."""
        items = list(self.collections.get(name, []))
        if scope is None:
            return items
        regex = re.compile(scope)
        out = []
        for item in items:
            item_name = getattr(item, "name", None)
            if isinstance(item_name, str) and regex.match(item_name):
                out.append(item)
        return out

    def get_collection_ref(self, name: str) -> list:
        """Collection ``name`` itself, made empty if missing (changes to it are kept)."""
        return self.collections.setdefault(name, [])

    def get_all_collection_keys(self) -> list:
        return sorted(self.collections)

    def clear_collection(self, name: str) -> None:
        self.collections.pop(name, None)

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

    @contextlib.contextmanager
    def lifted(self):
        """Ops created inside go to the start of the graph, outside every name scope, device
        block, colocation, control dependency and ``cond``/``while_loop`` being built (what
        TensorFlow's ``init_scope`` does for control flow): they run once per step, whatever
        construct first asked for them. They may read only each other (a switch such as
        the ``.flow`` built-in ``training``)."""
        saved = (self._name_stack, self._device_stack, self._control_stack,
                 self._colocation_stack, self._insert_at)
        self._name_stack, self._device_stack, self._control_stack = [], [], []
        self._colocation_stack = []
        self._insert_at = 0
        lifted = self.__dict__.setdefault("_lifted_nodes", set())
        before = set(self._nodes)
        try:
            yield
        finally:
            lifted.update(n for n in self._nodes[:self._insert_at] if n not in before)
            (self._name_stack, self._device_stack, self._control_stack,
             self._colocation_stack, self._insert_at) = saved
            if saved[4] is not None:              # an enclosing insertion point moved on
                self._insert_at = saved[4] + len(self._nodes) - len(before)

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
class PendingOp:
    """What a device function sees of an op about to be created: ``type``, ``name`` and the
    attrs it was given (``get_attr``; a variable's ``dtype`` and ``shape``, for instance)."""

    __slots__ = ("type", "name", "attrs")

    def __init__(self, op_type: str, name: str, attrs: Optional[dict] = None):
        self.type = op_type
        self.name = name
        self.attrs = dict(attrs or {})

    def get_attr(self, name: str):
        try:
            return self.attrs[name]
        except KeyError:
            raise ValueError(f"op '{self.name}' ({self.type}) has no attr '{name}'") from None


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
def colocate_with(op, ignore_existing: bool = False):
    """Ops created inside are placed on the same device as ``op`` (an operation, tensor or
    variable): they get a ``_class = ["loc:@<op name>"]`` attr, which the place pass honours
    over any ``device`` block. ``ignore_existing`` drops enclosing colocations."""
    from dsl.tensor import as_node
    g = get_default_graph()
    handle = getattr(op, "handle", None)          # a variable: colocate with its handle
    node = as_node(handle if handle is not None else op)
    if node.graph is not g:
        raise GraphError(f"cannot colocate with '{node.name}': it is from another graph")
    names = [] if ignore_existing or not g._colocation_stack else list(g._colocation_stack[-1])
    target = node.attrs.get("_class") or [f"loc:@{node.name}"]
    for entry in target:
        if entry not in names:
            names.append(entry)
    g._colocation_stack.append(names)
    # As in TF, the colocated op decides: enclosing device blocks no longer apply, and ops made
    # inside ask for the device ``node`` asked for. Placement would join them anyway, but only
    # in steps that keep ``node`` (a step may prune it away and still run the colocated ops).
    g._device_stack.extend([None, node.device or None])
    try:
        yield
    finally:
        del g._device_stack[-2:]
        g._colocation_stack.pop()


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
