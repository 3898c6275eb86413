"""Writing TF1 SavedModels TensorFlow loads: ``tf.saved_model.Builder`` (``SavedModelBuilder``),
``simple_save``, and the signature helpers (``build_tensor_info``, ``predict_signature_def``,
``build_signature_def``).

A SavedModel is ``saved_model.pb`` (a ``SavedModel`` holding one ``MetaGraphDef`` per tag set)
and ``variables/variables.{index,data-00000-of-00001}``, the session's variables in
TensorFlow's tensor-bundle format (``runtime/checkpoint.py``). Each MetaGraphDef holds:

- the graph as a TensorFlow GraphDef (``compiler/interop/graphdef.py``: flowc's ops are
  TensorFlow's): what the signatures' tensors, the variables and their initializers need,
  without flowc's own ``Saver`` ops and without flowc's source locations;
- a TensorFlow V2 saver in ``save/`` (``save/Const`` the file name, ``SaveV2`` of a read of
  every variable, ``RestoreV2`` assigned to them in ``save/restore_all``), named by the
  ``saver_def``: TensorFlow's loader runs it to restore ``variables/``;
- the signatures, and the ``variables``/``trainable_variables`` collections as
  ``VariableDef``s (resource variables).

The folder is written under a temporary name and renamed into place when complete.
"""
from __future__ import annotations

import os
import shutil
from typing import Dict, List, Optional, Sequence

__all__ = ["SavedModelBuilder", "Builder", "simple_save", "build_tensor_info",
           "predict_signature_def", "build_signature_def"]

_SAVER_OPS = ("SaveV2", "RestoreV2")
_DT_STRING = 7


def _pb():
    from compiler.interop.protos import tf_protos
    return tf_protos()


def build_tensor_info(tensor):
    """The ``TensorInfo`` of a tensor: its name, dtype and static shape."""
    from compiler.interop.graphdef import _shape_proto, tf_dtype
    from dsl.tensor import static_shape
    pb = _pb()
    info = pb.TensorInfo(name=tensor.name, dtype=tf_dtype(tensor.dtype))
    info.tensor_shape.CopyFrom(_shape_proto(static_shape(tensor), pb))
    return info


def build_signature_def(inputs=None, outputs=None, method_name: Optional[str] = None):
    """A ``SignatureDef`` of ``TensorInfo`` maps (``signature_def_utils.build_signature_def``)."""
    sig = _pb().SignatureDef(method_name=method_name or "")
    for key, info in (inputs or {}).items():
        sig.inputs[key].CopyFrom(info)
    for key, info in (outputs or {}).items():
        sig.outputs[key].CopyFrom(info)
    return sig


def predict_signature_def(inputs: dict, outputs: dict):
    """A predict ``SignatureDef`` of tensors by key (``predict_signature_def``)."""
    if not inputs:
        raise ValueError("Prediction inputs cannot be None or empty.")
    if not outputs:
        raise ValueError("Prediction outputs cannot be None or empty.")
    from dsl.saved_model.signature_constants import PREDICT_METHOD_NAME
    return build_signature_def({k: build_tensor_info(t) for k, t in inputs.items()},
                               {k: build_tensor_info(t) for k, t in outputs.items()},
                               PREDICT_METHOD_NAME)


# --- the graph ------------------------------------------------------------------------------
def _string_const(gd, name: str, values: List[bytes], scalar: bool = False):
    nd = gd.node.add(name=name, op="Const")
    nd.attr["dtype"].type = _DT_STRING
    t = nd.attr["value"].tensor
    t.dtype = _DT_STRING
    if not scalar:
        t.tensor_shape.dim.add().size = len(values)
    t.string_val.extend(values)
    return nd


def _variable_def(v) -> bytes:
    """The variable's ``VariableDef`` (a resource variable): its handle, initializer,
    snapshot (read) and initial value."""
    from runtime.tensor_bundle import encode_message
    d = v.to_proto()
    return encode_message([(1, v.name), (2, d["initializer"]), (3, d["snapshot"]), (5, True),
                           (6, d["initial_value"]), (7, bool(v.trainable))])


def _graph_def(graph, variables, signature_map: dict, clear_devices: bool):
    """The GraphDef of what the signatures and variables need, with a TF saver in ``save/``;
    returns (graph_def, saver_def, {variable: read tensor name})."""
    from compiler.interop.graphdef import ASSIGNED_ATTR, LOCATION_ATTR, graph_to_graphdef, tf_dtype
    pb = _pb()
    roots = set()
    for sig in signature_map.values():
        for info in list(sig.inputs.values()) + list(sig.outputs.values()):
            roots.add(info.name.split(":")[0])
    for v in variables:
        d = v.to_proto()
        roots.update((d["handle"], d["initializer"], d["snapshot"].split(":")[0],
                      d["initial_value"].split(":")[0]))
    full = graph_to_graphdef(graph)
    nodes = {nd.name: nd for nd in full.node}
    keep, todo = set(), [r for r in roots if r in nodes]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        todo.extend(i.lstrip("^").split(":")[0] for i in nodes[name].input)
    bad = sorted(n for n in keep if nodes[n].op in _SAVER_OPS)
    if bad:
        raise ValueError(f"the SavedModel's signatures need the checkpoint op(s) "
                         f"{', '.join(bad)}; leave them out of the signatures")
    gd = pb.GraphDef()
    gd.versions.CopyFrom(full.versions)
    for nd in full.node:
        if nd.name in keep:
            out = gd.node.add()
            out.CopyFrom(nd)
            for attr in (LOCATION_ATTR, ASSIGNED_ATTR):
                if attr in out.attr:
                    del out.attr[attr]
            if clear_devices:
                out.device = ""
    scope = "save"
    k = 0
    while any(n == scope or n.startswith(scope + "/") for n in keep):
        k += 1
        scope = f"save_{k}"
    ordered = sorted(variables, key=lambda v: v.op.name)
    fn = _string_const(gd, f"{scope}/filename/input", [b"model"], scalar=True)
    for name, src in ((f"{scope}/filename", fn.name), (f"{scope}/Const", f"{scope}/filename")):
        p = gd.node.add(name=name, op="PlaceholderWithDefault", input=[src])
        p.attr["dtype"].type = _DT_STRING
        p.attr["shape"].shape.SetInParent()
    prefix = f"{scope}/Const"
    names = [v.op.name.encode() for v in ordered]
    dtypes = [tf_dtype(v.dtype) for v in ordered]
    reads = []
    for i, v in enumerate(ordered):
        rd = gd.node.add(name=f"{scope}/Read_{i}/ReadVariableOp", op="ReadVariableOp",
                         input=[v.op.name], device="" if clear_devices else v.op.node.device or "")
        rd.attr["dtype"].type = tf_dtype(v.dtype)
        reads.append(rd.name)
    for what in ("SaveV2", "RestoreV2"):
        _string_const(gd, f"{scope}/{what}/tensor_names", names)
        _string_const(gd, f"{scope}/{what}/shape_and_slices", [b""] * len(names))
    save = gd.node.add(name=f"{scope}/SaveV2", op="SaveV2",
                       input=[prefix, f"{scope}/SaveV2/tensor_names",
                              f"{scope}/SaveV2/shape_and_slices"] + reads)
    save.attr["dtypes"].list.type.extend(dtypes)
    dep = gd.node.add(name=f"{scope}/control_dependency", op="Identity",
                      input=[prefix, f"^{save.name}"])
    dep.attr["T"].type = _DT_STRING
    restore = gd.node.add(name=f"{scope}/RestoreV2", op="RestoreV2",
                          input=[prefix, f"{scope}/RestoreV2/tensor_names",
                                 f"{scope}/RestoreV2/shape_and_slices"])
    restore.attr["dtypes"].list.type.extend(dtypes)
    assigns = []
    for i, v in enumerate(ordered):
        a = gd.node.add(name=f"{scope}/AssignVariableOp_{i}", op="AssignVariableOp",
                        input=[v.op.name, f"{restore.name}:{i}" if i else restore.name],
                        device="" if clear_devices else v.op.node.device or "")
        a.attr["dtype"].type = tf_dtype(v.dtype)
        assigns.append(a.name)
    gd.node.add(name=f"{scope}/restore_all", op="NoOp", input=["^" + a for a in assigns])
    saver_def = pb.SaverDef(filename_tensor_name=prefix + ":0",
                            save_tensor_name=f"{scope}/control_dependency:0",
                            restore_op_name=f"{scope}/restore_all", max_to_keep=5,
                            keep_checkpoint_every_n_hours=10000.0, version=2)
    return gd, saver_def, dict(zip(ordered, reads))


class SavedModelBuilder:
    """``tf.saved_model.Builder(export_dir)``: ``add_meta_graph_and_variables`` once (the
    graph and the session's variables), ``add_meta_graph`` for more tag sets of the same
    graph, then ``save``. ``export_dir`` must not exist yet (or be empty)."""

    def __init__(self, export_dir: str):
        export_dir = os.fspath(export_dir)
        if os.path.exists(export_dir) and (not os.path.isdir(export_dir)
                                           or os.listdir(export_dir)):
            raise AssertionError(f"Export directory already exists, and isn't empty. Please "
                                 f"choose a different export directory, or delete all the "
                                 f"contents of the specified directory: {export_dir}")
        self._export_dir = export_dir
        self._meta_graphs = []
        self._values: Optional[Dict[str, object]] = None
        self._graph = None

    def _add(self, graph, tags, signature_def_map, clear_devices, main_op):
        from dsl.variables import GraphKeys
        if not tags:
            raise ValueError("a MetaGraphDef needs at least one tag")
        if any(set(tags) == set(mg.meta_info_def.tags) for mg in self._meta_graphs):
            raise AssertionError(f"a MetaGraphDef with tags {sorted(tags)} was added already")
        variables = graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
        signature_def_map = dict(signature_def_map or {})
        gd, saver_def, _ = _graph_def(graph, variables, signature_def_map, clear_devices)
        pb = _pb()
        mg = pb.MetaGraphDef()
        mg.meta_info_def.tags.extend(tags)
        mg.graph_def.CopyFrom(gd)
        mg.saver_def.CopyFrom(saver_def)
        for key, sig in signature_def_map.items():
            mg.signature_def[key].CopyFrom(sig)
        trainable = {id(v) for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES)}
        for v in variables:
            raw = _variable_def(v)
            mg.collection_def["variables"].bytes_list.value.append(raw)
            if id(v) in trainable:
                mg.collection_def["trainable_variables"].bytes_list.value.append(raw)
        if main_op is not None:
            mg.collection_def["saved_model_main_op"].node_list.value.append(main_op.name)
        self._meta_graphs.append(mg)

    def add_meta_graph_and_variables(self, sess, tags: Sequence[str], signature_def_map=None,
                                     assets_collection=None, legacy_init_op=None,
                                     clear_devices: bool = False, main_op=None,
                                     strip_default_attrs: bool = False, saver=None):
        """The session's graph under ``tags``, with the current values of its variables."""
        from dsl.variables import GraphKeys
        if self._values is not None:
            raise AssertionError("Graph state including variables and assets has already "
                                 "been saved. Please invoke `add_meta_graph()` instead.")
        if assets_collection:
            raise NotImplementedError("SavedModel assets are not supported")
        variables = sess.graph.get_collection(GraphKeys.GLOBAL_VARIABLES)
        values = sess.run(variables) if variables else []
        self._values = {v.op.name: val for v, val in zip(variables, values)}
        self._graph = sess.graph
        self._add(sess.graph, list(tags), signature_def_map, clear_devices,
                  main_op or legacy_init_op)

    def add_meta_graph(self, tags: Sequence[str], signature_def_map=None,
                       assets_collection=None, legacy_init_op=None, clear_devices: bool = False,
                       main_op=None, strip_default_attrs: bool = False, saver=None):
        """The same graph under more ``tags`` (the variables are saved once)."""
        if self._values is None:
            raise AssertionError("Graph state including variables and assets has not been "
                                 "saved yet. Please invoke `add_meta_graph_and_variables()` "
                                 "first.")
        from dsl.context import get_default_graph
        self._add(get_default_graph(), list(tags), signature_def_map, clear_devices,
                  main_op or legacy_init_op)

    def save(self, as_text: bool = False) -> bytes:
        """Write the folder; returns the path of ``saved_model.pb`` (as bytes, as TF does)."""
        from runtime.checkpoint import _fsync_dir, write_checkpoint
        if self._values is None:
            raise AssertionError("nothing to save: call add_meta_graph_and_variables() first")
        pb = _pb()
        sm = pb.SavedModel(saved_model_schema_version=1)
        for mg in self._meta_graphs:
            sm.meta_graphs.add().CopyFrom(mg)
        parent = os.path.dirname(os.path.abspath(self._export_dir))
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(self._export_dir)}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            os.makedirs(os.path.join(tmp, "variables"))
            write_checkpoint(os.path.join(tmp, "variables", "variables"), self._values)
            name = "saved_model.pbtxt" if as_text else "saved_model.pb"
            if as_text:
                from google.protobuf import text_format
                data = text_format.MessageToString(sm).encode()
            else:
                data = sm.SerializeToString(deterministic=True)
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(tmp)
            if os.path.isdir(self._export_dir):
                os.rmdir(self._export_dir)               # empty (checked at construction)
            os.replace(tmp, self._export_dir)
            _fsync_dir(parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return os.path.join(self._export_dir, name).encode()


Builder = SavedModelBuilder


def simple_save(session, export_dir: str, inputs: dict, outputs: dict, legacy_init_op=None):
    """A SavedModel for serving (``tf.saved_model.simple_save``): tag ``serve`` and the
    predict signature ``serving_default`` of ``inputs`` and ``outputs``."""
    from dsl.saved_model.signature_constants import DEFAULT_SERVING_SIGNATURE_DEF_KEY
    from dsl.saved_model.tag_constants import SERVING
    builder = SavedModelBuilder(export_dir)
    builder.add_meta_graph_and_variables(
        session, [SERVING],
        signature_def_map={DEFAULT_SERVING_SIGNATURE_DEF_KEY:
                           predict_signature_def(inputs, outputs)},
        main_op=legacy_init_op)
    builder.save()
