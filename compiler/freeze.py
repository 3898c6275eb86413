"""Baking trained weights into a graph: ``flowc compile/export --checkpoint`` and
``fl.graph_util.convert_variables_to_constants``.

``freeze_variables`` does what TensorFlow's ``convert_variables_to_constants`` does to
resource variables: each variable handle (``VarHandleOp``) becomes a ``Const`` of the
variable's value with the handle's name, each ``ReadVariableOp`` of it an ``Identity`` of that
constant, each ``ResourceGather`` a ``GatherV2`` and ``VarIsInitializedOp`` the constant true.
A graph that also writes the variable (an optimizer's update, an initializer) cannot freeze it:
that is an error naming the writers. Freeze a graph cut to what its fetches need (a step
graph after ``prune``, or ``extract_subgraph``): nothing there initializes variables.

``initialize_variables`` keeps the variables and sets each one's initial value (the value its
initializer, ``<var>/Assign``, assigns) to its checkpoint value: the graph as built, whose init
op now restores the trained weights (``flowc export --format graphdef --keep-variables``).

``checkpoint_values`` reads the values from a checkpoint prefix or folder; a checkpoint that
does not match the variables is one error naming the model and the checkpoint.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from compiler.ir.construct import make_node
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.reachability import needed_nodes
from compiler.ir.types import TensorType
from compiler.passes.prune import is_removable
from runtime.checkpoint import CheckpointError, read_checkpoint
from runtime.checkpoint_state import resolve_checkpoint
from runtime.dtypes import DType
from runtime.errors import FlowcError

__all__ = ["FreezeError", "variable_key", "variables_of", "checkpoint_values",
           "freeze_variables", "initialize_variables", "extract_subgraph"]


class FreezeError(FlowcError):
    """Variables cannot become constants as asked: a checkpoint that does not match them, or
    a graph that writes a variable it reads."""


def variable_key(node: Node) -> str:
    """The name a variable has in the runtime and in checkpoints (its ``shared_name``, or the
    handle's node name)."""
    return node.attrs.get("shared_name") or node.name


def variables_of(graph: Graph) -> List[Node]:
    """The graph's variable handles (``VarHandleOp``), in graph order."""
    return [n for n in graph if n.op == "VarHandleOp"]


def checkpoint_values(checkpoint: str, variables: Sequence[Node], model: str
                      ) -> Dict[str, np.ndarray]:
    """The values of ``variables`` in ``checkpoint`` (a prefix, or a folder: its latest
    checkpoint), by variable key, each checked against the variable's dtype and shape.
    Any problem is one ``FreezeError`` naming ``model`` and the checkpoint, and every
    variable that is missing or does not match."""
    try:
        prefix = resolve_checkpoint(checkpoint)
    except CheckpointError as e:
        raise FreezeError(f"{model}: --checkpoint {checkpoint}: {_message(e)}") from None
    keys = [variable_key(v) for v in variables]
    try:
        values = read_checkpoint(prefix, keys, [v.attrs["dtype"] for v in variables],
                                 [_declared(v) for v in variables])
    except CheckpointError as e:
        problems = getattr(e, "mismatches", None)
        if problems:
            raise FreezeError(f"checkpoint {prefix} does not match model {model}: "
                              + "; ".join(problems)) from None
        raise FreezeError(f"{model}: --checkpoint {checkpoint}: {_message(e)}") from None
    return dict(zip(keys, values))


def _message(err: FlowcError) -> str:
    return getattr(err, "message", None) or str(err)


def _declared(v: Node) -> Optional[tuple]:
    shape = v.attrs.get("shape")
    return None if shape is None else tuple(shape)


def extract_subgraph(graph: Graph, outputs: Iterable[Output], targets: Iterable[Node] = ()
                     ) -> Graph:
    """A copy of ``graph`` holding only what ``outputs`` and ``targets`` need (TensorFlow's
    ``extract_sub_graph``), in the same order, with the same names."""
    outputs, targets = list(outputs), list(targets)
    keep = needed_nodes(outputs, targets, set())
    copy, mapping = graph.copy()
    dead = [mapping[n] for n in graph if n not in keep]
    for n in dead:
        n.set_inputs([])
        n.set_control_inputs([])
    for n in dead:
        copy.erase_node(n)
    return copy


def _handle_users(handle: Node) -> List[Node]:
    """Every node that takes ``handle``'s resource, through ``Identity`` nodes of it."""
    found, stack, seen = [], [handle], set()
    while stack:
        node = stack.pop()
        for user in list(node.users):
            if user in seen or not any(i.node is node for i in user.inputs):
                continue
            seen.add(user)
            if user.op == "Identity" and user.output_types \
                    and user.output_types[0].dtype is DType.resource:
                stack.append(user)
            found.append(user)
    return found


_READS = ("ReadVariableOp", "ResourceGather", "VarIsInitializedOp", "Identity")


def freeze_variables(graph: Graph, values: Dict[str, np.ndarray],
                     variables: Optional[Sequence[Node]] = None, keep_reads: bool = True
                     ) -> List[str]:
    """Turn ``variables`` (default: every variable of ``graph`` that ``values`` has, by
    key) into constants of their values, in place; the keys frozen, in graph order.
    ``keep_reads``: each read becomes an ``Identity`` of the constant (TensorFlow's frozen
    form); without it, a read with no control edges is replaced by the constant itself (a
    step graph, so an ONNX initializer has the variable's name). A variable the graph also
    writes is an error naming the writers (nothing changes)."""
    chosen = [v for v in (variables if variables is not None else variables_of(graph))
              if variable_key(v) in values]
    writers = []
    for v in chosen:
        for user in _handle_users(v):
            if user.op not in _READS:
                writers.append(f"'{variable_key(v)}' by {user.name} ({user.op})")
    if writers:
        raise FreezeError("cannot make variables constants in a graph that writes them: "
                          + ", ".join(writers) + " (a training step keeps its variables: give "
                          "the checkpoint at run time, e.g. flowc run --checkpoint)")
    for v in chosen:
        _freeze_one(graph, v, values[variable_key(v)], keep_reads)
    return [variable_key(v) for v in chosen]


def _freeze_one(graph: Graph, handle: Node, value: np.ndarray, keep_reads: bool) -> None:
    dtype: DType = handle.attrs["dtype"]
    value = np.array(value, dtype=dtype.np, copy=True)
    users = _handle_users(handle)
    name = handle.name
    with graph.inserting_before(handle):
        const = make_node(graph, "Const", [], {"value": value, "dtype": dtype},
                          name=f"{name}/frozen", device=handle.device, location=handle.location,
                          output_types=[TensorType(dtype, value.shape)])
    const.assigned_device = handle.assigned_device
    value_out = const.output(0)
    for user in users:
        if user.op == "ReadVariableOp" and not keep_reads and not user.control_inputs \
                and not any(user in u.control_inputs for u in user.users):
            graph.replace_all_uses_with(user.output(0), value_out)
            user.set_inputs([])
            graph.erase_node(user)
        elif user.op == "ReadVariableOp":         # a copy of the value: the constant
            user.op, user.attrs = "Identity", {"T": dtype}
            user.set_inputs([value_out])
        elif user.op == "ResourceGather":
            batch_dims = int(user.attrs.get("batch_dims", 0))
            with graph.inserting_before(user):
                axis = make_node(graph, "Const", [], {"value": np.array(batch_dims, np.int32),
                                                      "dtype": DType.i32},
                                 name=f"{user.name}/axis", device=user.device,
                                 location=user.location, output_types=[TensorType(DType.i32, ())])
            indices = user.inputs[1]
            user.op = "GatherV2"
            user.attrs = {"batch_dims": batch_dims, "Tparams": dtype,
                          "Tindices": indices.dtype, "Taxis": DType.i32}
            user.set_inputs([value_out, indices, axis.output(0)])
        elif user.op == "VarIsInitializedOp":
            user.op, user.attrs = "Const", {"value": np.array(True), "dtype": DType.bool}
            user.set_inputs([])
    for user in reversed(users):                  # the Identity nodes of the handle
        if user.op == "Identity" and user.output_types[0].dtype is DType.resource \
                and not user.users:
            graph.erase_node(user)
    for user in list(handle.users):               # control uses wait for the constant
        user.remove_control_input(handle)
        user.add_control_input(const)
    graph.erase_node(handle)
    graph.rename(const, name)


# --- initial values -----------------------------------------------------------------------------
_RANDOM_PREFIXES = ("Random", "TruncatedNormal", "Multinomial", "StatelessRandom")


def _initializer(handle: Node) -> Optional[Node]:
    """The ``AssignVariableOp`` that initializes ``handle``'s variable: ``<var>/Assign`` (the
    name ``fl.Variable`` gives it), or the only assignment of the variable."""
    assigns = [u for u in _handle_users(handle) if u.op == "AssignVariableOp"]
    named = [a for a in assigns if a.name == f"{handle.name}/Assign"]
    if named:
        return named[0]
    return assigns[0] if len(assigns) == 1 else None


def initialize_variables(graph: Graph, values: Dict[str, np.ndarray],
                         variables: Optional[Sequence[Node]] = None) -> List[str]:
    """Make each variable's initializer assign its value from ``values`` (by key) instead of
    its initial value, in place; the old initial value's ops leave the graph. The keys
    changed, in graph order; a variable without one clear initializer is an error."""
    chosen = [v for v in (variables if variables is not None else variables_of(graph))
              if variable_key(v) in values]
    inits = {}
    for v in chosen:
        init = _initializer(v)
        if init is None:
            raise FreezeError(f"variable '{variable_key(v)}' has no initializer to give its "
                              f"checkpoint value (no AssignVariableOp '{v.name}/Assign')")
        inits[v] = init
    for v in chosen:
        init = inits[v]
        dtype: DType = v.attrs["dtype"]
        value = np.array(values[variable_key(v)], dtype=dtype.np, copy=True)
        old = init.inputs[1].node
        with graph.inserting_before(init):
            const = make_node(graph, "Const", [], {"value": value, "dtype": dtype},
                              name=f"{v.name}/Initializer/checkpoint_value", device=init.device,
                              location=init.location,
                              output_types=[TensorType(dtype, value.shape)])
        init.set_input(1, const.output(0))
        _erase_unused(graph, [old])
    return [variable_key(v) for v in chosen]


def _erase_unused(graph: Graph, nodes: Iterable[Node]) -> None:
    """Erase each of ``nodes`` nothing uses that is removable or a random generator (an old
    initial value), then their inputs likewise."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node not in graph or node.users:
            continue
        if not (is_removable(node) or node.op.startswith(_RANDOM_PREFIXES)):
            continue
        producers = [i.node for i in node.inputs] + list(node.control_inputs)
        graph.erase_node(node)
        stack.extend(producers)
