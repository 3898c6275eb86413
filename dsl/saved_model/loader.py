"""``tf.saved_model.loader.load(sess, tags, export_dir)``: a TF1 SavedModel's graph imported
into the session's graph, its variables set from ``variables/``, as TensorFlow's loader does;
returns the ``MetaGraphDef``, whose ``signature_def`` names the tensors to feed and fetch.

What the importer of ``compiler/interop/saved_model.py`` does for inference is done here for a
session, keeping variables variables (they can be trained and saved again):

1. the MetaGraphDef of ``tags`` (``select_meta_graph``), its stripped default attrs put back;
2. the graph without its saver's ops (TensorFlow's ``save/`` scope: string file names, which
   flowc's graph does not hold; ``Saver`` builds flowc's own) and what depends on them;
3. TF1 reference variables as resource variables (``compiler/interop/tf1_ref_variables.py``);
4. the graph imported (``import_scope``: a name prefix; none by default, as TensorFlow's);
   its ``variables``/``trainable_variables`` collections rebuilt as ``tf.Variable`` objects
   (``tf.global_variables()`` then lists them, optimizers train them);
5. each variable set to its checkpoint value (keys matched as the importer matches them);
6. the ``main_op``/``legacy_init_op`` run, where the SavedModel has one.

Every failure names the file (``SavedModelError``, or the GraphDef importer's / tensor
bundle's error).
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np

from dsl.context import control_dependencies, name_scope
from dsl.control_ops import group
from dsl.ops import apply_op, placeholder
from dsl.tensor import Tensor
from dsl.variables import GraphKeys, Variable

__all__ = ["load", "maybe_saved_model_directory"]

_MAIN_OP_KEYS = ("saved_model_main_op", "legacy_init_op")


def maybe_saved_model_directory(export_dir: str) -> bool:
    """Whether ``export_dir`` holds a ``saved_model.pb`` or ``saved_model.pbtxt``."""
    from compiler.interop.saved_model import saved_model_file
    return saved_model_file(os.fspath(export_dir)) is not None


_SAVER_OPS = ("SaveV2", "RestoreV2", "MergeV2Checkpoints", "Save", "SaveSlices", "Restore",
              "RestoreSlice")


def _without_saver(gd, scope: Optional[str]):
    """``gd`` without its savers' nodes and those that need them: the name scope of
    ``saver_def`` and of every other saver the graph holds (``save_1/`` of a MetaGraphDef
    added later), a scope being the first part of the name of a node running a saver op."""
    scopes = {scope} if scope else set()
    scopes |= {nd.name.split("/")[0] for nd in gd.node if nd.op in _SAVER_OPS and "/" in nd.name}
    if not scopes:
        return gd
    dropped = {nd.name for nd in gd.node if nd.name.split("/")[0] in scopes}
    changed = True
    while changed:
        changed = False
        for nd in gd.node:
            if nd.name in dropped:
                continue
            if any(i.lstrip("^").split(":")[0] in dropped for i in nd.input):
                dropped.add(nd.name)
                changed = True
    kept = [nd for nd in gd.node if nd.name not in dropped]
    del gd.node[:]
    gd.node.extend(kept)
    return gd


def _variable_defs(mg, key: str, file: str):
    """The ``VariableDef``s of collection ``key``: (variable, initializer, snapshot,
    initial value, trainable) names."""
    from runtime.tensor_bundle import decode_fields
    from compiler.interop.saved_model import SavedModelError
    if key not in mg.collection_def:
        return []
    out = []
    for raw in mg.collection_def[key].bytes_list.value:
        try:
            fields = decode_fields(raw, f"a VariableDef of collection '{key}'")
        except ValueError as e:
            raise SavedModelError(f"{file}: {e}") from None
        d = {"variable": "", "initializer": "", "snapshot": "", "initial_value": "",
             "trainable": True}
        names = {1: "variable", 2: "initializer", 3: "snapshot", 6: "initial_value"}
        for number, _, value in fields:
            if number in names and isinstance(value, bytes):
                d[names[number]] = value.decode("utf-8")
            elif number == 7:
                d["trainable"] = bool(value)
        out.append(d)
    return out


def _tensor_name(name: str) -> str:
    return name if ":" in name else name + ":0"


def load(sess, tags: Sequence[str], export_dir: str, import_scope: Optional[str] = None,
         **saver_kwargs):
    """Load the MetaGraphDef of ``tags`` from the SavedModel in ``export_dir`` into
    ``sess``'s graph and set its variables (``tf.saved_model.loader.load``); returns the
    MetaGraphDef."""
    from compiler.interop.saved_model import (SavedModelError, read_saved_model,
                                              restore_default_attrs, select_meta_graph,
                                              variable_values)
    from compiler.interop.tf1_ref_variables import ref_variables_to_resource
    from dsl.meta_graph import import_graph_def
    del saver_kwargs                                # TF passes them to its Saver: none here
    export_dir = os.fspath(export_dir)
    sm, file = read_saved_model(export_dir)
    mg = select_meta_graph(sm, list(tags) if tags is not None else None, file)
    restore_default_attrs(mg)
    gd = type(mg.graph_def)()
    gd.CopyFrom(mg.graph_def)
    scope = None
    if mg.HasField("saver_def") and mg.saver_def.restore_op_name:
        scope = mg.saver_def.restore_op_name.split("/")[0]
    _without_saver(gd, scope)
    values = variable_values(mg, gd, export_dir, file)
    ref_variables_to_resource(gd, file)
    g = sess.graph
    prefix = f"{import_scope}/" if import_scope else ""
    with g.as_default():
        import_graph_def(gd, name=import_scope or "")
        known = {v.op.name for v in g.get_collection(GraphKeys.GLOBAL_VARIABLES)}
        for key, collections in (("variables", [GraphKeys.GLOBAL_VARIABLES]),
                                 ("trainable_variables", [GraphKeys.TRAINABLE_VARIABLES])):
            for d in _variable_defs(mg, key, file):
                handle = d["variable"].split(":")[0]
                if key == "variables" and handle in known:
                    continue
                if not d["variable"] or prefix + handle not in {n.name for n in
                                                                 g.get_operations()}:
                    continue
                snapshot = d["snapshot"] or d["variable"]
                v = Variable.from_proto(
                    {"handle": handle, "initializer": d["initializer"] or handle,
                     "snapshot": _tensor_name(snapshot),
                     "initial_value": _tensor_name(d["initial_value"] or snapshot),
                     "trainable": d["trainable"]}, import_scope=prefix, graph=g)
                if key == "variables":
                    known.add(handle)
                    g.add_to_collection(GraphKeys.GLOBAL_VARIABLES, v)
                elif d["trainable"]:
                    g.add_to_collection(GraphKeys.TRAINABLE_VARIABLES, v)
        feeds, assigns = {}, []
        with control_dependencies(None), name_scope("saved_model_restore"):
            for name, value in sorted(values.items()):
                node = g.node(prefix + name)
                value = np.asarray(value)
                feed = placeholder(node.attrs["dtype"], list(value.shape), name="value")
                feeds[feed] = value.astype(node.attrs["dtype"].np, copy=False)
                assigns.append(apply_op("AssignVariableOp", [Tensor(g.output(prefix + name + ":0")),
                                                            feed],
                                        {"dtype": node.attrs["dtype"]}, name="assign"))
            restore = group(*assigns, name="restore_all") if assigns else None
    if restore is not None:
        sess.run(restore, feeds)
    for key in _MAIN_OP_KEYS:
        if key in mg.collection_def:
            ops = [prefix + n.split(":")[0] for n in mg.collection_def[key].node_list.value]
            try:
                targets = [g.node(n) for n in ops]
            except Exception:
                raise SavedModelError(f"{file}: its {key} ({', '.join(ops)}) is not in the "
                                      "loaded graph") from None
            from dsl.tensor import Operation
            sess.run([Operation(t) for t in targets])
            break
    return mg
