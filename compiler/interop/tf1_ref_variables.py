"""TF1 reference variables (``VariableV2``) of a GraphDef as resource variables, so that a
TF1 graph loaded into a session (``tf.saved_model.loader.load``) keeps its variables as
variables flowc runs, trains and saves.

flowc's variables are TensorFlow's resource variables (``VarHandleOp``); a reference
variable's output is the variable itself, read wherever it is used. The rewrite, node by node:

- ``VariableV2(shape, dtype)`` -> ``VarHandleOp(shape, dtype, shared_name=<its name>)``;
- ``Assign(ref, value)`` -> ``AssignVariableOp(handle, value)``, ``AssignAdd``/``AssignSub``
  -> ``AssignAddVariableOp``/``AssignSubVariableOp``; a node that used an assignment's output
  as a value reads the variable after it (``ReadVariableOp`` with a control input on it);
- ``Identity(ref)`` (the variable's ``read`` snapshot) -> ``ReadVariableOp``;
- any other use of the variable's value -> one ``ReadVariableOp`` of it (``<name>/_read``).

Ops that take a reference and have no resource form (``ScatterUpdate`` on a ``VariableV2``,
...) are refused by name, as is a ``VariableV2`` with ``container``/``shared_name`` set.
``VarHandleOp``'s ``debug_name`` (a TF 2.x annotation with no effect) is dropped.
"""
from __future__ import annotations

from typing import Dict, List

from runtime.errors import FlowcError

_ASSIGNS = {"Assign": "AssignVariableOp", "AssignAdd": "AssignAddVariableOp",
            "AssignSub": "AssignSubVariableOp"}


class RefVariableError(FlowcError):
    """A reference variable used in a way that has no resource-variable form."""


def _split(inp: str):
    if inp.startswith("^"):
        return inp[1:], None
    name, _, index = inp.partition(":")
    return name, int(index or 0)


def ref_variables_to_resource(gd, where: str = "<graph_def>") -> List[str]:
    """Rewrite ``gd`` (a GraphDef, in place) as described above; returns the names of the
    variables rewritten."""
    nodes = {nd.name: nd for nd in gd.node}
    refs = [nd for nd in gd.node if nd.op in ("VariableV2", "Variable")]
    for nd in gd.node:
        if nd.op == "VarHandleOp" and "debug_name" in nd.attr:
            del nd.attr["debug_name"]
    if not refs:
        return []
    ref_names = {nd.name for nd in refs}
    for nd in refs:
        if nd.attr["container"].s or nd.attr["shared_name"].s:
            raise RefVariableError(f"{where}: variable '{nd.name}' has a container or "
                                   "shared_name; flowc loads TF1 variables of the graph only")
        dtype, shape = nd.attr["dtype"].type, nd.attr["shape"]
        for key in list(nd.attr):
            del nd.attr[key]
        nd.op = "VarHandleOp"
        nd.attr["dtype"].type = dtype
        nd.attr["shape"].CopyFrom(shape)
        nd.attr["container"].s = b""
        nd.attr["shared_name"].s = nd.name.encode()
    dtypes = {nd.name: nd.attr["dtype"].type for nd in refs}
    reads: Dict[str, str] = {}
    assigned: Dict[str, str] = {}          # assignment node -> its variable
    new_nodes = []

    def read_of(var: str, after: str = None) -> str:
        key = var if after is None else f"{var}@{after}"
        if key not in reads:
            name = f"{var}/_read" if after is None else f"{after}/_read"
            while name in nodes:
                name += "_"
            rd = gd.node.add(name=name, op="ReadVariableOp", input=[var],
                             device=nodes[var].device)
            rd.attr["dtype"].type = dtypes[var]
            if after is not None:
                rd.input.append("^" + after)
            nodes[name] = rd
            new_nodes.append(rd)
            reads[key] = name
        return reads[key]

    # assignments and snapshots first: their outputs change meaning
    for nd in list(gd.node):
        if nd in new_nodes or not nd.input:
            continue
        src, index = _split(nd.input[0])
        if index is None or src not in ref_names:
            continue
        if nd.op in _ASSIGNS:
            dtype = nd.attr["T"].type
            for key in list(nd.attr):
                del nd.attr[key]
            nd.op = _ASSIGNS[nd.op]
            nd.attr["dtype"].type = dtype
            assigned[nd.name] = src
        elif nd.op == "Identity":
            dtype = nd.attr["T"].type
            del nd.attr["T"]
            nd.op = "ReadVariableOp"
            nd.attr["dtype"].type = dtype
    for nd in list(gd.node):
        if nd in new_nodes:
            continue
        for k, inp in enumerate(nd.input):
            src, index = _split(inp)
            if index is None:
                continue
            if src in assigned:                     # an assignment's value: read after it
                nd.input[k] = read_of(assigned[src], after=src)
            elif src in ref_names and not (k == 0 and (nd.op in _ASSIGNS.values() or
                                                       nd.op == "ReadVariableOp")):
                if nd.op.startswith(("Scatter", "Apply", "ResourceApply", "CountUpTo")):
                    raise RefVariableError(f"{where}: '{nd.name}' ({nd.op}) updates the TF1 "
                                           f"variable '{src}' in place; flowc has no "
                                           "resource form of it here")
                nd.input[k] = read_of(src)
    return sorted(ref_names)
