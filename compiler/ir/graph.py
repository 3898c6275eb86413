"""The graph IR: nodes in topological order, each knowing its users (the torch.fx model).

Rewrites go through ``replace_all_uses_with`` and ``erase_node``; nobody patches edges by hand.
"""
from __future__ import annotations

import contextlib
import functools
import re
from collections import Counter
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from compiler.errors import GraphError
from compiler.ir.location import SourceLocation
from compiler.ir.types import TensorType

# Ops whose inputs may come from later nodes (loop back-edges); topological order ignores them.
BACK_EDGE_OPS = frozenset({"NextIteration"})

# Node names as in TensorFlow (``scope/op_1``); graph names are one path component.
NODE_NAME_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/>]*$")
GRAPH_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


@functools.lru_cache(maxsize=4096)
def _is_node_name(name: str) -> bool:
    """Cached: a build names thousands of nodes after the same few ops and scopes."""
    return NODE_NAME_RE.match(name) is not None


def check_node_name(name: str, location: Optional[SourceLocation] = None) -> str:
    """Return ``name`` if it is a valid node name, else raise GraphError saying why."""
    if not isinstance(name, str) or not _is_node_name(name):
        raise GraphError(f"invalid node name {name!r}: names use letters, digits and _ . - / > "
                         "and do not start with - / or >", None, location)
    return name


class _Users(Counter):
    """A ``Counter`` made empty by every new node: ``dict``'s constructor, in C, instead of
    ``Counter.__init__`` (so a copy is made from a mapping of counts, not by counting)."""

    __init__ = dict.__init__


class NodeAttrs(dict):
    """A node's attrs: a ``dict`` whose every change bumps the graph's version, so a key or
    digest remembered per version (``compiler/step.py``) never outlives an edit. Reads are
    ``dict``'s own. A list value is kept as an ``AttrList`` (a copy of what is given) whose
    edits in place bump the version too; a constant's array is made read-only once the graph
    is hashed."""

    __slots__ = ("_node",)

    def _changed(self) -> None:
        node = getattr(self, "_node", None)
        if node is not None:
            node._changed()

    def __setitem__(self, key, value):
        dict.__setitem__(self, key, _attr_value(getattr(self, "_node", None), value))
        self._changed()

    def __delitem__(self, key):
        dict.__delitem__(self, key)
        self._changed()

    def __ior__(self, other):
        self.update(other)
        return self

    def update(self, *args, **kwargs):
        node = getattr(self, "_node", None)
        dict.update(self, {k: _attr_value(node, v) for k, v in dict(*args, **kwargs).items()})
        self._changed()

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    def pop(self, *args):
        had = args[0] in self
        value = dict.pop(self, *args)
        if had:
            self._changed()
        return value

    def popitem(self):
        item = dict.popitem(self)
        self._changed()
        return item

    def clear(self):
        dict.clear(self)
        self._changed()

    def __reduce__(self):               # copies and pickles are plain dicts
        return dict, (dict(self),)


class _NodeList(list):
    """A ``list`` that belongs to a node: every edit bumps the graph's version. ``_item``
    says what an element put in is kept as."""

    __slots__ = ("_node",)

    def _changed(self) -> None:
        node = getattr(self, "_node", None)
        if node is not None:
            node._changed()

    def _item(self, value):
        return value

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            value = [self._item(v) for v in value]
        else:
            value = self._item(value)
        list.__setitem__(self, index, value)
        self._changed()

    def __delitem__(self, index):
        list.__delitem__(self, index)
        self._changed()

    def __iadd__(self, other):
        list.extend(self, [self._item(v) for v in other])
        self._changed()
        return self

    def __imul__(self, n):
        list.__imul__(self, n)
        self._changed()
        return self

    def append(self, value):
        list.append(self, self._item(value))
        self._changed()

    def extend(self, values):
        list.extend(self, [self._item(v) for v in values])
        self._changed()

    def insert(self, index, value):
        list.insert(self, index, self._item(value))
        self._changed()

    def pop(self, index=-1):
        value = list.pop(self, index)
        self._changed()
        return value

    def remove(self, value):
        list.remove(self, value)
        self._changed()

    def clear(self):
        list.clear(self)
        self._changed()

    def sort(self, *args, **kwargs):
        list.sort(self, *args, **kwargs)
        self._changed()

    def reverse(self):
        list.reverse(self)
        self._changed()

    def __reduce__(self):               # copies and pickles are plain lists
        return list, (list(self),)


class OutputTypes(_NodeList):
    """A node's output types: a ``list`` whose every change bumps the graph's version (the
    same contract as ``NodeAttrs``)."""

    __slots__ = ()


class AttrList(_NodeList):
    """A list attr value (``strides``, ``perm``, ...): edits in place (``append``, an
    assignment into it) bump the graph's version like ``node.attrs[...] = ...`` does. Lists
    inside it are ``AttrList``s of the same node."""

    __slots__ = ()

    def _item(self, value):
        return _attr_value(getattr(self, "_node", None), value)


def _attr_value(node: Optional["Node"], value):
    """``value`` as a node's attrs keep it: a list becomes an ``AttrList`` of ``node`` (a
    copy, so the caller's list and another node's stay apart); anything else as is."""
    if not isinstance(value, list):
        return value
    a = AttrList(value)
    a._node = node
    for i, x in enumerate(a):
        if isinstance(x, list):
            list.__setitem__(a, i, _attr_value(node, x))
    return a


def _node_attrs(node: "Node", attrs) -> NodeAttrs:
    a = NodeAttrs(attrs)
    for k, v in a.items():
        if isinstance(v, list):
            dict.__setitem__(a, k, _attr_value(node, v))
    a._node = node
    return a


def _output_types(node: "Node", types) -> OutputTypes:
    t = OutputTypes(types)
    t._node = node
    return t


# What a node's text (and so a step's cache key) is made of: setting one bumps the version.
_set = object.__setattr__
_CONTENT_FIELDS = frozenset({"name", "op", "attrs", "output_types", "device",
                             "assigned_device", "location"})


class Output:
    """One output of a node: ``node:index``. Hashable; equal when node and index match."""

    __slots__ = ("node", "index")

    def __init__(self, node: "Node", index: int = 0):
        self.node = node
        self.index = index

    @property
    def type(self) -> TensorType:
        return self.node.output_types[self.index]

    @property
    def dtype(self):
        return self.type.dtype

    @property
    def shape(self):
        return self.type.shape

    @property
    def name(self) -> str:
        """TensorFlow-style tensor name ``node:index``."""
        return f"{self.node.name}:{self.index}"

    @property
    def ref(self) -> str:
        """IR operand text: ``%node`` or ``%node:1``."""
        return f"%{self.node.name}" + (f":{self.index}" if self.index else "")

    def __eq__(self, other) -> bool:
        return isinstance(other, Output) and other.node is self.node and other.index == self.index

    def __hash__(self) -> int:
        # no tuple: outputs are dict keys all through the passes and the emitter
        return id(self.node) ^ self.index

    def __repr__(self) -> str:
        return f"Output({self.name})"


class Node:
    """One operation in a graph. Create nodes with ``Graph.add_node``."""

    def __init__(self, graph: "Graph", name: str, op: str, attrs: Dict[str, Any],
                 output_types: List[TensorType], device: str = "",
                 location: Optional[SourceLocation] = None):
        # Past ``__setattr__`` (a new node changes no graph yet), and not through
        # ``self.__dict__``, which would make each node a dict of its own (slower to build,
        # more for the cyclic collector to walk).
        _set(self, "graph", graph)
        _set(self, "name", name)
        _set(self, "op", op)
        _set(self, "attrs", _node_attrs(self, attrs))
        _set(self, "output_types", _output_types(self, output_types))
        _set(self, "device", device)                 # requested device spec (may be partial)
        _set(self, "assigned_device", "")            # set by placement
        _set(self, "location", location)
        _set(self, "_inputs", ())                    # a tuple: ``inputs`` hands it out as is
        _set(self, "_control_inputs", [])
        _set(self, "users", _Users())                # user node -> number of edges (data + control)

    def __setattr__(self, key: str, value) -> None:
        """Setting what the node's text is made of (op, attrs, types, devices, location,
        name) bumps its graph's version; ``attrs`` and ``output_types`` are kept as
        ``NodeAttrs`` and ``OutputTypes`` (copies of what is given), whose edits bump it too."""
        if key in _CONTENT_FIELDS:
            if key == "attrs":
                value = _node_attrs(self, value)
            elif key == "output_types":
                value = _output_types(self, value)
            _set(self, key, value)
            self.graph._touch()
        else:
            _set(self, key, value)

    def _changed(self) -> None:
        self.graph._touch()

    # --- edges -------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple:
        return self._inputs

    @property
    def control_inputs(self) -> tuple:
        return tuple(self._control_inputs)

    def set_inputs(self, inputs: Sequence[Output]) -> None:
        for old in self._inputs:
            old.node._drop_user(self)
        self._inputs = tuple(inputs)
        for new in self._inputs:
            new.node.users[self] += 1
        self._changed()

    def set_input(self, i: int, value: Output) -> None:
        self._inputs[i].node._drop_user(self)
        self._inputs = self._inputs[:i] + (value,) + self._inputs[i + 1:]
        value.node.users[self] += 1
        self._changed()

    def set_control_inputs(self, nodes: Iterable["Node"]) -> None:
        for old in self._control_inputs:
            old._drop_user(self)
        self._control_inputs = []
        for n in nodes:
            self.add_control_input(n)
        self._changed()

    def add_control_input(self, node: "Node") -> None:
        if node not in self._control_inputs:
            self._control_inputs.append(node)
            node.users[self] += 1
            self._changed()

    def remove_control_input(self, node: "Node") -> None:
        if node in self._control_inputs:
            self._control_inputs.remove(node)
            node._drop_user(self)
            self._changed()

    def _drop_user(self, user: "Node") -> None:
        self.users[user] -= 1
        if self.users[user] <= 0:
            del self.users[user]

    # --- outputs -----------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        return len(self.output_types)

    def output(self, index: int = 0) -> Output:
        if not 0 <= index < len(self.output_types):
            raise GraphError(f"has {len(self.output_types)} outputs, no output {index}", self)
        return Output(self, index)

    @property
    def outputs(self) -> List[Output]:
        return [Output(self, i) for i in range(len(self.output_types))]

    def output_users(self, index: int) -> List["Node"]:
        """Nodes that read output ``index`` (as data)."""
        return [u for u in self.users if any(i.node is self and i.index == index for i in u._inputs)]

    def replace_all_uses_with(self, new: "Node") -> None:
        """Every data and control use of this node now refers to ``new`` (same output arity)."""
        for i in range(self.num_outputs):
            self.graph.replace_all_uses_with(Output(self, i), Output(new, i))
        for user in list(self.users):
            if self in user._control_inputs:
                user.remove_control_input(self)
                if user is not new:
                    user.add_control_input(new)

    @property
    def op_def(self):
        from compiler.ir.op_registry import get_op
        return get_op(self.op, self)

    def __repr__(self) -> str:
        return f"Node(%{self.name} = {self.op})"


class Graph:
    """An ordered list of nodes in topological order with unique names."""

    def __init__(self, name: str = "main"):
        if not isinstance(name, str) or not GRAPH_NAME_RE.match(name):
            raise GraphError(f"invalid graph name {name!r}: use letters, digits and _ . -")
        self._name = name
        self._nodes: List[Node] = []
        self._by_name: Dict[str, Node] = {}
        self._insert_at: Optional[int] = None
        self._name_counts: Dict[str, int] = {}     # base name -> next suffix to try
        self._version = 0
        # Counts every change and never goes back (``version`` may be set, to 0 by an
        # importer): what is remembered per graph content is remembered per revision.
        self.revision = 0
        self._memo: Dict[str, tuple] = {}          # what -> (revision, value): see ``remembered``

    # --- version -----------------------------------------------------------------------
    @property
    def version(self) -> int:
        """Bumped by every change to the graph: a node added, erased or renamed, an edge, an
        attr, a type, a device or a location changed (``Node.__setattr__``, ``NodeAttrs``)."""
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        self._version = value
        self.revision += 1

    def _touch(self) -> None:
        self._version += 1
        self.revision += 1

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str) or not GRAPH_NAME_RE.match(value):
            raise GraphError(f"invalid graph name {value!r}: use letters, digits and _ . -")
        self._name = value
        self._touch()

    def remembered(self, what: str, compute):
        """``compute()``, remembered until the graph next changes (a digest of its content)."""
        known = self._memo.get(what)
        revision = self.revision
        if known is not None and known[0] == revision:
            return known[1]
        value = compute()
        if self.revision != revision:           # ``compute`` changed the graph: keep nothing
            return value
        self._memo[what] = (revision, value)
        return value

    # --- access ------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Node]:
        return iter(list(self._nodes))

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node) -> bool:
        return isinstance(node, Node) and self._by_name.get(node.name) is node

    @property
    def nodes(self) -> List[Node]:
        return list(self._nodes)

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphError(f"no node named '{name}' in graph @{self.name}") from None

    def get(self, name: str) -> Optional[Node]:
        return self._by_name.get(name)

    def output(self, ref: str) -> Output:
        """Look up ``name`` or ``name:index`` (TensorFlow tensor-name form)."""
        name, sep, idx = ref[1:].rpartition(":") if ref.startswith("%") else ref.rpartition(":")
        if not sep:
            name, idx = idx, "0"
        if not idx.isdigit():
            raise GraphError(f"bad tensor name '{ref}': expected 'node' or 'node:index'")
        node = self.node(name)
        index = int(idx)
        if index >= node.num_outputs:
            raise GraphError(f"tensor '{ref}' does not exist: %{name} has "
                             f"{node.num_outputs} output(s)", node)
        return Output(node, index)

    # --- construction ------------------------------------------------------------------
    def unique_name(self, base: str) -> str:
        """``base`` if unused, else ``base_1``, ``base_2``, ... (TensorFlow's rule); reserves it."""
        base = base or "node"
        counts = self._name_counts
        if base not in self._by_name and not counts.get(base):
            counts[base] = 1
            return base
        while True:
            n = counts.get(base) or 1
            counts[base] = n + 1
            candidate = f"{base}_{n}"
            if candidate not in self._by_name and not counts.get(candidate):
                counts[candidate] = 1
                return candidate

    def add_node(self, op: str, inputs: Sequence[Output] = (), attrs: Optional[Dict[str, Any]] = None,
                 *, name: Optional[str] = None, output_types: Sequence[TensorType] = (),
                 control_inputs: Iterable[Node] = (), device: str = "",
                 location: Optional[SourceLocation] = None, exact_name: bool = False) -> Node:
        """Create a node at the insertion point (the end unless inside ``inserting_before``)."""
        if exact_name:
            check_node_name(name, location)
            if name in self._by_name:
                raise GraphError(f"duplicate node name '{name}'", name, location)
        else:
            check_node_name(name or op, location)
        inputs = list(inputs)
        control_inputs = list(control_inputs) if control_inputs else ()
        by_name = self._by_name
        for inp in inputs:
            if type(inp) is not Output and not isinstance(inp, Output):
                raise GraphError(f"input {inp!r} is not a node output", name or op, location)
            if inp.node.graph is not self or by_name.get(inp.node.name) is not inp.node:
                raise GraphError(f"input {inp.name} is not a node of graph @{self.name}",
                                 name or op, location)
        for c in control_inputs:
            if not isinstance(c, Node):
                raise GraphError(f"control input {c!r} is not a node", name or op, location)
            if c.graph is not self or self._by_name.get(c.name) is not c:
                raise GraphError(f"control input %{c.name} is not a node of graph @{self.name}",
                                 name or op, location)
        if exact_name:
            self._name_counts[name] = self._name_counts.get(name) or 1
        else:
            name = self.unique_name(name or op)
        node = Node(self, name, op, dict(attrs) if attrs else {}, output_types, device, location)
        _set(node, "_inputs", tuple(inputs))   # a new node: no old inputs to leave
        for new in inputs:
            users = new.node.users
            users[node] = users.get(node, 0) + 1
        for c in control_inputs:
            node.add_control_input(c)
        if self._insert_at is None:
            self._nodes.append(node)
        else:
            self._nodes.insert(self._insert_at, node)
            self._insert_at += 1
        self._by_name[name] = node
        self._touch()
        return node

    @contextlib.contextmanager
    def inserting_before(self, node: Node):
        saved = self._insert_at
        self._insert_at = self._nodes.index(node)
        try:
            yield
        finally:
            self._insert_at = saved

    @contextlib.contextmanager
    def inserting_after(self, node: Node):
        saved = self._insert_at
        self._insert_at = self._nodes.index(node) + 1
        try:
            yield
        finally:
            self._insert_at = saved

    # --- rewriting ---------------------------------------------------------------------
    def replace_all_uses_with(self, old: Output, new: Output) -> int:
        """Redirect every data use of ``old`` to ``new``; returns the number of edges changed."""
        changed = 0
        for user in list(old.node.users):
            if user is new.node:
                continue
            for i, inp in enumerate(user._inputs):
                if inp == old:
                    user.set_input(i, new)
                    changed += 1
        if changed:
            self._touch()
        return changed

    def erase_node(self, node: Node) -> None:
        if node.users:
            users = ", ".join(sorted(u.name for u in node.users))
            raise GraphError(f"cannot erase: still used by {users}", node)
        node.set_inputs([])
        node.set_control_inputs([])
        self._nodes.remove(node)
        del self._by_name[node.name]
        self._touch()

    def rename(self, node: Node, new_name: str) -> None:
        check_node_name(new_name, node.location)
        if new_name in self._by_name:
            raise GraphError(f"cannot rename to '{new_name}': name taken", node)
        del self._by_name[node.name]
        node.name = new_name
        self._by_name[new_name] = node
        self._touch()

    def topo_sort(self) -> None:
        """Reorder nodes topologically, keeping the current order where edges allow."""
        order = {n: i for i, n in enumerate(self._nodes)}
        if self._in_topological_order(order):      # what the sort would give back
            self._touch()
            return
        import networkx as nx
        dg = nx.DiGraph()
        dg.add_nodes_from(self._nodes)
        for n in self._nodes:
            for i in n._inputs:
                if i.node.op not in BACK_EDGE_OPS:
                    dg.add_edge(i.node, n)
            for c in n._control_inputs:
                if c.op not in BACK_EDGE_OPS:
                    dg.add_edge(c, n)
        try:
            self._nodes = list(nx.lexicographical_topological_sort(dg, key=order.__getitem__))
        except nx.NetworkXUnfeasible:
            cycle = nx.find_cycle(dg)
            raise GraphError("graph has a cycle: " + " -> ".join(f"%{a.name}" for a, _ in cycle)
                             + f" -> %{cycle[0][0].name}") from None
        self._touch()

    def _in_topological_order(self, order: Dict[Node, int]) -> bool:
        """Whether every edge (but back edges) already runs forward in ``order``."""
        for n, k in order.items():
            for i in n._inputs:
                if order.get(i.node, k) >= k and i.node.op not in BACK_EDGE_OPS:
                    return False
            for c in n._control_inputs:
                if order.get(c, k) >= k and c.op not in BACK_EDGE_OPS:
                    return False
        return True

    def copy(self, name: Optional[str] = None):
        """A deep copy of the structure; returns (graph, mapping old node -> new node).
        Nodes are made directly, not through ``add_node``: their names and edges are this
        graph's, checked when they were made (a third less time for a session's step copy,
        10,000 nodes for the dispatch chain)."""
        g = Graph(name or self.name)
        mapping: Dict[Node, Node] = {}
        back_edges = []                 # (new node, input index, old input): NextIteration
        nodes, by_name = g._nodes, g._by_name
        for n in self._nodes:
            inputs = [Output(mapping[i.node], i.index) if i.node in mapping else None
                      for i in n._inputs]
            late = [k for k, i in enumerate(inputs) if i is None]
            if late:                    # a back edge: wire a stand-in now, the real one below
                stand_in = next(i for i in inputs if i is not None)
                inputs = [stand_in if i is None else i for i in inputs]
            m = Node(g, n.name, n.op, n.attrs, n.output_types, n.device, n.location)
            _set(m, "_inputs", tuple(inputs))
            for i in inputs:
                users = i.node.users
                users[m] = users.get(m, 0) + 1
            for c in n._control_inputs:
                m.add_control_input(mapping[c])
            _set(m, "assigned_device", n.assigned_device)
            nodes.append(m)
            by_name[m.name] = m
            mapping[n] = m
            back_edges.extend((m, k, n._inputs[k]) for k in late)
        g.version += len(nodes)
        for m, k, src in back_edges:
            m.set_input(k, Output(mapping[src.node], src.index))
        g._name_counts = dict(self._name_counts)
        return g, mapping

    def __str__(self) -> str:
        from compiler.ir.printer import print_graph
        return print_graph(self)

