"""TensorFlow SavedModel directories as flowc models (``flowc compile DIR --signature NAME``).

A SavedModel is a folder with ``saved_model.pb`` (or ``saved_model.pbtxt``): a ``SavedModel``
message holding one ``MetaGraphDef`` per tag set (``serve``, ``train``, ...), each with its
graph, its function library, its ``SignatureDef``s and, for TF2, the saved object graph; and
``variables/`` (``variables.index`` + ``variables.data-*``): the weights, a tensor bundle
(``compiler/interop/tensor_bundle.py``). Loading one, as TensorFlow's loaders do:

1. the ``MetaGraphDef`` of the tag set asked for (``--tag``; by default ``serve``, or the only
   one) and its signature (``--signature``; by default ``serving_default``, or the only one);
   the artifact's feeds and fetches are named by the signature's input and output keys;
2. attrs that hold their op's default were stripped at save time (``stripped_default_attrs``):
   they are put back from the op definitions the file carries (``stripped_op_list``), for the
   ops flowc lowers away (calls, functional control flow) and for the attrs flowc's ops
   declare (the others hold TensorFlow's default, which is what flowc's op computes);
3. the graph is cut to what the signature's outputs need (the saver's functions, initializers
   and other signatures go), its function calls are inlined and control flow lowered
   (``compiler/interop/tf_functions.py``);
4. each variable the signature reads is matched to its checkpoint key. TF2
   (``tf.saved_model.save``, Keras): a call's captured inputs are the trailing inputs of its
   function, and ``SavedObjectGraph.concrete_functions[f].bound_inputs`` gives the saved
   object behind each, in order; node k of the saved object graph is node k of the
   checkpoint's ``TrackableObjectGraph``, whose ``VARIABLE_VALUE`` attribute names the key
   (how ``tensorflow/python/saved_model/load.py`` restores them). TF1
   (``simple_save``, ``SavedModelBuilder``): the ``saver_def``'s restore op assigns each
   variable ``RestoreV2``'s output for a key; that assignment is read off the graph;
5. the variables become constants (inference weights, folded into the compiled code), as
   TensorFlow's ``convert_variables_to_constants_v2`` does: a handle becomes a ``Const`` of
   the value, ``ReadVariableOp`` an ``Identity``, ``ResourceGather`` a ``GatherV2``,
   ``VarIsInitializedOp`` true, and the loop and cond plumbing a handle travels through
   (``Enter``, ``Switch``, ``Identity``, ...) carries the value instead. A signature that
   assigns a variable is refused by name.

Every failure is a ``SavedModelError`` (or the GraphDef importer's / tensor bundle's error)
naming the file.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from compiler.interop.graphdef import (LOCATION_ATTR, _split_input, graphdef_to_graph,
                                       tensor_proto)
from compiler.interop.protos import tf_protos
from compiler.interop.tensor_bundle import TensorBundle, open_bundle
from compiler.ir.op_registry import get_op, has_op
from runtime.errors import FlowcError

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
VARIABLES_PREFIX = os.path.join("variables", "variables")
DEFAULT_TAGS = ("serve",)
DEFAULT_SIGNATURE = "serving_default"
INIT_OP_SIGNATURE = "__saved_model_init_op"
_SIGNATURE_OUTPUT = "_signature_output"            # Identity nodes naming the signature's outputs

DT_RESOURCE = 20
DT_BOOL = 10
_HANDLE_OPS = ("VarHandleOp",)
_REF_VARIABLE_OPS = ("VariableV2", "Variable")
# ops a handle (or a TF1 reference variable) passes through unchanged: their T becomes the
# value's dtype
_PASS_THROUGH = ("Identity", "Enter", "Exit", "Switch", "Merge", "NextIteration", "RefIdentity",
                 "RefEnter", "RefExit", "RefSwitch", "RefMerge", "RefNextIteration")
_ASSIGN_OPS = ("Assign", "AssignVariableOp")


class SavedModelError(FlowcError):
    """A SavedModel flowc cannot load as asked (no such tag set or signature, a variable with
    no value, a signature that changes its variables, ...)."""


# --- finding and reading the file ------------------------------------------------------------
def saved_model_file(path: str) -> Optional[str]:
    """The ``saved_model.pb`` (or ``.pbtxt``) of a SavedModel folder ``path``, else None."""
    if not os.path.isdir(path):
        return None
    for name in SAVED_MODEL_FILES:
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def read_saved_model(path: str):
    """The ``SavedModel`` message of folder ``path``, and the file it came from."""
    from google.protobuf import message, text_format
    file = saved_model_file(path)
    if file is None:
        raise SavedModelError(f"{path}: not a SavedModel folder (no "
                              f"{' or '.join(SAVED_MODEL_FILES)} in it)")
    sm = tf_protos().SavedModel()
    try:
        with open(file, "rb") as f:
            data = f.read()
        if file.endswith(".pbtxt"):
            text_format.Parse(data.decode("utf-8"), sm)
        else:
            sm.ParseFromString(data)
    except OSError as e:
        raise SavedModelError(f"{file}: cannot read: {e.strerror or e}") from None
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        raise SavedModelError(f"{file}: not a SavedModel: {e}") from None
    if not sm.meta_graphs:
        raise SavedModelError(f"{file}: the SavedModel holds no MetaGraphDef")
    return sm, file


def _tag_sets(sm) -> List[Tuple[str, ...]]:
    return [tuple(mg.meta_info_def.tags) for mg in sm.meta_graphs]


def _tags_text(tags: Sequence[str]) -> str:
    return ",".join(tags) or "(no tags)"


def select_meta_graph(sm, tags: Optional[Sequence[str]], file: str):
    """The MetaGraphDef whose tag set is ``tags`` (any order; ``serve`` when None and there
    are several), as ``saved_model_cli --tag_set serve,gpu`` chooses."""
    sets = _tag_sets(sm)
    if tags:
        want = set(t for tag in tags for t in tag.split(",") if t)
        for mg, have in zip(sm.meta_graphs, sets):
            if set(have) == want:
                return mg
        raise SavedModelError(f"{file}: no MetaGraphDef with the tag set "
                              f"'{_tags_text(sorted(want))}'; the SavedModel has: "
                              + "; ".join(_tags_text(s) for s in sets))
    if len(sm.meta_graphs) == 1:
        return sm.meta_graphs[0]
    for mg, have in zip(sm.meta_graphs, sets):
        if set(have) == set(DEFAULT_TAGS):
            return mg
    raise SavedModelError(f"{file}: {len(sets)} MetaGraphDefs and none tagged only 'serve'; "
                          "choose one with --tag: " + "; ".join(_tags_text(s) for s in sets))


def select_signature(mg, name: Optional[str], file: str) -> Tuple[str, object]:
    """The signature ``name`` (``serving_default`` when None and the graph has it, or its only
    signature)."""
    sigs = {k: v for k, v in mg.signature_def.items() if k != INIT_OP_SIGNATURE}
    have = ", ".join(sorted(sigs)) or "none"
    if name:
        if name not in sigs:
            raise SavedModelError(f"{file}: no signature '{name}' in the MetaGraphDef tagged "
                                  f"'{_tags_text(mg.meta_info_def.tags)}'; it has: {have}")
        return name, sigs[name]
    if DEFAULT_SIGNATURE in sigs:
        return DEFAULT_SIGNATURE, sigs[DEFAULT_SIGNATURE]
    if len(sigs) == 1:
        return next(iter(sigs.items()))
    raise SavedModelError(f"{file}: choose a signature with --signature: the MetaGraphDef "
                          f"has {have}")


# --- stripped default attrs -------------------------------------------------------------------
def restore_default_attrs(mg) -> None:
    """Put back the attrs ``tf.saved_model.save`` stripped because they held their default,
    from the op definitions in ``stripped_op_list``: every one for ops flowc lowers away (the
    lowering reads TensorFlow's attrs), the ones flowc's op declares for the others (an attr
    flowc's op lacks is correct at TensorFlow's default)."""
    if not mg.meta_info_def.stripped_default_attrs:
        return
    defaults: Dict[str, List[Tuple[str, object]]] = {}
    for op in mg.meta_info_def.stripped_op_list.op:
        defaults[op.name] = [(a.name, a.default_value) for a in op.attr
                             if a.HasField("default_value")]

    def restore(nd) -> None:
        wanted = defaults.get(nd.op)
        if not wanted:
            return
        declared = get_op(nd.op).attrs if has_op(nd.op) else None
        for name, value in wanted:
            if name in nd.attr or (declared is not None and name not in declared):
                continue
            nd.attr[name].CopyFrom(value)

    for nd in mg.graph_def.node:
        restore(nd)
    for fn in mg.graph_def.library.function:
        for nd in fn.node_def:
            restore(nd)


# --- cutting the graph to the signature ------------------------------------------------------
def _node_of(tensor: str) -> str:
    return _split_input(tensor)[0]


def prune_graph_def(gd, keep: Sequence[str]):
    """A copy of ``gd`` with only the nodes ``keep`` need (data and control inputs), in their
    order, each located at its place in ``gd`` (``file:N:0``), and the whole function
    library."""
    by_name = {nd.name: k for k, nd in enumerate(gd.node)}
    need, todo = set(), list(keep)
    while todo:
        name = todo.pop()
        if name in need or name not in by_name:
            continue
        need.add(name)
        todo.extend(_node_of(i) for i in gd.node[by_name[name]].input)
    out = type(gd)()
    out.versions.CopyFrom(gd.versions)
    out.library.CopyFrom(gd.library)
    for nd in gd.node:
        if nd.name in need:
            out.node.add().CopyFrom(nd)
    return out


def _locate(gd, file: str) -> None:
    """Give every node its position in the file's graph, which import errors show."""
    for k, nd in enumerate(gd.node):
        if LOCATION_ATTR not in nd.attr:
            nd.attr[LOCATION_ATTR].s = f"{file}:{k + 1}:0".encode()


# --- variables and their checkpoint keys -------------------------------------------------------
def _variable_nodes(gd) -> List[object]:
    return [nd for nd in gd.node if nd.op in _HANDLE_OPS + _REF_VARIABLE_OPS]


def _through_identity(gd_nodes: Dict[str, object], tensor: str) -> Tuple[str, int]:
    name, idx, _ = _split_input(tensor)
    seen = set()
    while name in gd_nodes and gd_nodes[name].op in ("Identity", "RefIdentity") \
            and name not in seen:
        seen.add(name)
        name, idx, _ = _split_input(gd_nodes[name].input[0])
    return name, idx


def tf2_variable_keys(mg, gd, object_graph, file: str) -> Dict[str, str]:
    """Variable node -> checkpoint key, for the handles the graph's calls capture: a captured
    input is bound (``bound_inputs``, in order) to a saved object, whose node in the
    checkpoint's object graph names the key of its ``VARIABLE_VALUE``."""
    saved = mg.object_graph_def
    nodes = {nd.name: nd for nd in gd.node}
    keys: Dict[str, str] = {}
    if object_graph is None or not saved.nodes:
        return keys
    for nd in gd.node:
        if nd.op not in ("StatefulPartitionedCall", "PartitionedCall"):
            continue
        fn = nd.attr["f"].func.name
        if fn not in saved.concrete_functions:
            continue
        bound = list(saved.concrete_functions[fn].bound_inputs)
        data = [i for i in nd.input if not i.startswith("^")]
        if not bound or len(bound) > len(data):
            continue
        for tensor, node_id in zip(data[len(data) - len(bound):], bound):
            var, _ = _through_identity(nodes, tensor)
            if var not in nodes or nodes[var].op not in _HANDLE_OPS:
                continue
            if not 0 <= node_id < len(saved.nodes) or node_id >= len(object_graph.nodes):
                raise SavedModelError(f"{file}: call '{nd.name}' binds '{var}' to saved object "
                                      f"{node_id}, which the object graphs do not have")
            kind = saved.nodes[node_id].WhichOneof("kind")
            if kind != "variable":
                raise SavedModelError(f"{file}: '{var}' captured by '{nd.name}' is a saved "
                                      f"{kind or 'object'} (node {node_id}), not a variable; "
                                      "flowc restores variables only")
            attrs = {a.name: a.checkpoint_key for a in object_graph.nodes[node_id].attributes}
            if "VARIABLE_VALUE" not in attrs:
                raise SavedModelError(f"{file}: variable '{var}' (saved object {node_id}) has "
                                      "no value in the checkpoint")
            keys[var] = attrs["VARIABLE_VALUE"]
    return keys


def tf1_variable_keys(mg, file: str) -> Dict[str, str]:
    """Variable node -> checkpoint key, read off the ``saver_def``'s restore op: each
    ``Assign``/``AssignVariableOp`` it runs takes output k of a ``RestoreV2`` whose
    ``tensor_names`` constant names the key."""
    restore = mg.saver_def.restore_op_name
    gd = mg.graph_def
    nodes = {nd.name: nd for nd in gd.node}
    keys: Dict[str, str] = {}
    if not restore or _node_of(restore) not in nodes:
        return keys
    seen, todo = set(), [_node_of(restore)]
    while todo:
        name = todo.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        nd = nodes[name]
        if nd.op in _ASSIGN_OPS and len(nd.input) >= 2:
            var, _ = _through_identity(nodes, nd.input[0])
            src, idx = _through_identity(nodes, nd.input[1])
            if src in nodes and nodes[src].op == "RestoreV2" and len(nodes[src].input) >= 2:
                names = _string_constant(nodes, nodes[src].input[1])
                if names is not None and idx < len(names):
                    keys[var] = names[idx]
            continue
        todo.extend(_node_of(i) for i in nd.input)
    return keys


def _string_constant(nodes: Dict[str, object], tensor: str) -> Optional[List[str]]:
    name, _ = _through_identity(nodes, tensor)
    nd = nodes.get(name)
    if nd is None or nd.op != "Const" or "value" not in nd.attr:
        return None
    return [s.decode("utf-8", errors="replace") for s in nd.attr["value"].tensor.string_val]


def variable_values(mg, gd, folder: str, file: str) -> Dict[str, np.ndarray]:
    """The value of every variable node of ``gd`` (the pruned graph), from ``variables/``."""
    variables = _variable_nodes(gd)
    if not variables:
        return {}
    prefix = os.path.join(folder, VARIABLES_PREFIX)
    bundle: TensorBundle = open_bundle(prefix)
    keys = tf2_variable_keys(mg, gd, bundle.object_graph(), file)
    missing = [nd for nd in variables if nd.name not in keys]
    if missing:
        tf1 = tf1_variable_keys(mg, file)
        keys.update({nd.name: tf1[nd.name] for nd in missing if nd.name in tf1})
    values: Dict[str, np.ndarray] = {}
    unknown = []
    for nd in variables:
        key = keys.get(nd.name)
        if key is None:
            unknown.append(nd.name)
            continue
        value = bundle.read(key)
        declared = nd.attr["shape"].shape if "shape" in nd.attr else None
        if declared is not None and not declared.unknown_rank:
            dims = [d.size for d in declared.dim]
            if len(dims) != value.ndim or any(d >= 0 and d != v for d, v in zip(dims, value.shape)):
                raise SavedModelError(f"{file}: variable '{nd.name}' is declared "
                                      f"{dims} but its checkpoint value '{key}' in "
                                      f"{bundle.index_path} has shape {list(value.shape)}")
        values[nd.name] = value
    if unknown:
        raise SavedModelError(f"{file}: no checkpoint key found for the variable(s) "
                              + ", ".join(f"'{v}'" for v in unknown)
                              + " (neither the saved object graph nor the saver's restore op "
                              "assigns them)")
    return values


# --- variables to constants ---------------------------------------------------------------------
def freeze_variables(gd, values: Dict[str, np.ndarray], file: str) -> None:
    """Rewrite ``gd`` in place so that the variables of ``values`` are constants (see the
    module docstring, step 5)."""
    from runtime.dtypes import as_dtype
    from compiler.interop.graphdef import tf_dtype
    pb = tf_protos()
    by_name = {nd.name: nd for nd in gd.node}
    users: Dict[str, List[object]] = {}
    for nd in gd.node:
        for text in nd.input:
            if not text.startswith("^"):
                users.setdefault(_node_of(text), []).append(nd)
    dtype_of: Dict[str, int] = {}          # node carrying a frozen value -> its DataType
    todo: List[str] = []
    for name, value in values.items():
        nd = by_name[name]
        dtype = as_dtype(value.dtype)
        location = nd.attr[LOCATION_ATTR].s if LOCATION_ATTR in nd.attr else None
        nd.op = "Const"
        nd.ClearField("attr")
        nd.attr["dtype"].type = tf_dtype(dtype)
        nd.attr["value"].tensor.CopyFrom(tensor_proto(value, dtype, pb))
        if location is not None:
            nd.attr[LOCATION_ATTR].s = location
        nd.device = ""
        dtype_of[name] = tf_dtype(dtype)
        todo.append(name)
    extra = []
    while todo:
        name = todo.pop()
        dt = dtype_of[name]
        for user in users.get(name, ()):
            if user.name in dtype_of and user.op != "Merge":
                continue
            op = user.op
            if op in _PASS_THROUGH:
                if op.startswith("Ref"):
                    user.op = op[3:]
                if "T" in user.attr:
                    user.attr["T"].type = dt
                if user.name not in dtype_of:
                    dtype_of[user.name] = dt
                    todo.append(user.name)
            elif op == "ReadVariableOp":
                user.op = "Identity"
                user.ClearField("device")
                del user.attr["dtype"]
                user.attr["T"].type = dt
                dtype_of[user.name] = dt
                todo.append(user.name)
            elif op == "ResourceGather":
                extra.append(_gather_of(user, dt, pb))
            elif op in ("VarIsInitializedOp", "IsVariableInitialized"):
                user.op = "Const"
                data = [i for i in user.input if not i.startswith("^")]
                keep = [i for i in user.input if i.startswith("^")]
                keep += ["^" + _node_of(d) for d in data]
                del user.input[:]
                user.input.extend(keep)
                user.ClearField("attr")
                user.attr["dtype"].type = DT_BOOL
                user.attr["value"].tensor.dtype = DT_BOOL
                user.attr["value"].tensor.bool_val.append(True)
            elif op in _ASSIGN_OPS or "Assign" in op or op.startswith(("Resource", "Scatter")):
                raise SavedModelError(f"{file}: node '{user.name}' ({op}) changes variable "
                                      f"'{name}'; flowc compiles a signature with its variables "
                                      "as constants, so it must only read them")
            elif _takes_handle(user):
                raise SavedModelError(f"{file}: node '{user.name}' ({op}) takes the handle of "
                                      f"variable '{name}'; flowc turns variables into constants "
                                      "and knows ReadVariableOp, ResourceGather and "
                                      "VarIsInitializedOp")
    for nd in extra:
        gd.node.add().CopyFrom(nd)


def _takes_handle(nd) -> bool:
    return any(v.WhichOneof("value") == "type" and v.type == DT_RESOURCE
               for v in nd.attr.values())


def _gather_of(nd, dt: int, pb):
    """``ResourceGather(handle, indices)`` as ``GatherV2(value, indices, 0)`` (in place);
    returns the axis constant it reads."""
    batch_dims = nd.attr["batch_dims"].i if "batch_dims" in nd.attr else 0
    tindices = nd.attr["Tindices"].type if "Tindices" in nd.attr else 3
    location = nd.attr[LOCATION_ATTR].s if LOCATION_ATTR in nd.attr else None
    axis = pb.NodeDef(name=f"{nd.name}/_flowc_axis", op="Const")
    axis.attr["dtype"].type = 3
    axis.attr["value"].tensor.dtype = 3
    axis.attr["value"].tensor.int_val.append(batch_dims)
    axis.attr["value"].tensor.tensor_shape.SetInParent()
    data = [i for i in nd.input if not i.startswith("^")]
    ctrl = [i for i in nd.input if i.startswith("^")]
    if data:
        axis.input.append("^" + _node_of(data[0]))   # in the reader's frame and cond branch
    nd.op = "GatherV2"
    del nd.input[:]
    nd.input.extend(data[:2] + [axis.name] + ctrl)
    nd.ClearField("attr")
    nd.attr["Tparams"].type = dt
    nd.attr["Tindices"].type = tindices
    nd.attr["Taxis"].type = 3
    nd.attr["batch_dims"].i = batch_dims
    if location is not None:
        nd.attr[LOCATION_ATTR].s = location
        axis.attr[LOCATION_ATTR].s = location
    return axis


# --- the model loader -----------------------------------------------------------------------------
def load_saved_model(path: str, signature: Optional[str] = None,
                     tags: Optional[Sequence[str]] = None):
    """The ``Model`` of SavedModel folder ``path``: one signature of one MetaGraphDef, its
    variables frozen to constants, feeds and fetches named by the signature's keys."""
    from compiler.model_loader import Model
    from compiler.interop.tf_functions import import_functional, needs_lowering
    sm, file = read_saved_model(path)
    mg = select_meta_graph(sm, tags, file)
    sig_name, sig = select_signature(mg, signature, file)
    restore_default_attrs(mg)
    gd = mg.graph_def
    _locate(gd, file)
    names = {nd.name for nd in gd.node}
    inputs = sorted(sig.inputs.items())
    outputs = sorted(sig.outputs.items())
    for kind, items in (("input", inputs), ("output", outputs)):
        for key, info in items:
            if info.WhichOneof("encoding") != "name":
                raise SavedModelError(f"{file}: signature '{sig_name}' {kind} '{key}' is not a "
                                      "dense tensor (sparse and composite tensors are not "
                                      "supported)")
            if _node_of(info.name) not in names:
                raise SavedModelError(f"{file}: signature '{sig_name}' {kind} '{key}' names "
                                      f"'{info.name}', which is not a node of the graph")
    if not outputs:
        raise SavedModelError(f"{file}: signature '{sig_name}' has no outputs")
    position = {nd.name: k for k, nd in enumerate(gd.node)}
    out_nodes = []
    for k, (key, info) in enumerate(outputs):
        name = f"{_SIGNATURE_OUTPUT}_{k}"
        while name in names:
            name += "_"
        names.add(name)
        nd = gd.node.add(name=name, op="Identity")    # located where its tensor is made
        nd.input.append(info.name)
        nd.attr[LOCATION_ATTR].s = f"{file}:{position[_node_of(info.name)] + 1}:0".encode()
        out_nodes.append(name)
    feeds = [_node_of(info.name) for _, info in inputs]
    gd = prune_graph_def(gd, out_nodes + feeds)
    values = variable_values(mg, gd, path, file)
    graph_name = _graph_name(path, sig_name)

    def freeze(flat) -> None:
        freeze_variables(flat, values, file)

    if needs_lowering(gd):
        graph = import_functional(gd, file, graph_name, rewrite=freeze)
    else:
        freeze(gd)
        graph = graphdef_to_graph(gd, file, graph_name)
    try:
        feed_outputs = [graph.output(info.name) for _, info in inputs]
        fetches = [graph.node(n).output(0) for n in out_nodes]
    except Exception as e:               # noqa: BLE001  (a name the import did not keep)
        raise SavedModelError(f"{file}: signature '{sig_name}': {e}") from None
    return Model(path, graph, graph, fetches, [key for key, _ in outputs], feed_outputs,
                 feed_names=[key for key, _ in inputs])


def _graph_name(path: str, signature: str) -> str:
    base = os.path.basename(os.path.normpath(path)) or "saved_model"
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in f"{base}_{signature}")
    return ident if ident and not ident[0].isdigit() else "g_" + ident
