"""Meta graphs and graph import (TensorFlow 1.x's ``tf.train.export_meta_graph``,
``tf.train.import_meta_graph`` and ``tf.import_graph_def``).

``import_graph_def(graph_def, input_map=, return_elements=, name=)`` copies a graph into the
default graph, its node names under the prefix ``name`` ("import" by default, made unique as a
name scope is; "" for none). ``graph_def`` is a TensorFlow ``GraphDef`` (flowc's
``tf_formats`` message, TensorFlow's own, or its serialized bytes), a flowc graph (an
``fl.Graph`` or an IR graph) or IR text. ``input_map`` replaces uses of the imported tensors
it names (``"x:0"``, ``"x"`` for ``"x:0"``, ``"^op"`` for a control input) by tensors of the
default graph; ``return_elements`` names the imported tensors (``"y:0"``) and operations
(``"train"``) to return.

A *meta graph* is a graph plus what the Python program knows about it: its collections
(``train_op``, the variables, the queue runners, whatever ``add_to_collection`` put there)
and the ``Saver`` that saves its variables. flowc writes one as JSON::

    {"format": "flowc.meta_graph", "version": 1,
     "graph": "<the graph's IR text>",
     "collections": {"train_op": [{"operation": "Adam"}], "variables": [{"variable": {...}}]},
     "saver_def": {...} | null, "gradient_overrides": {...}}

Collection items are kept by kind: ``{"tensor": name}``, ``{"operation": name}``,
``{"variable": {handle, initializer, snapshot, initial_value, trainable}}`` (one Python
variable per handle, in every collection it was in), ``{"queue_runner": {...}}`` and plain
JSON values (strings, numbers, booleans); items of other kinds are left out, as TensorFlow
leaves out what it cannot serialize. ``import_meta_graph(path)`` imports the graph into the
default graph, restores the collections and returns a ``Saver`` over the saver ops the meta
graph names (a new one when it names none but has variables; None when it has no variables),
so ``saver.restore(sess, prefix)`` continues a trained model in a fresh program.
``Saver.save`` writes ``<checkpoint>.meta`` beside each checkpoint (``write_meta_graph``).
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence

from compiler.ir.graph import Graph as _IRGraph
from compiler.ir.graph import Node, Output
from dsl.context import get_default_graph, name_scope
from dsl.tensor import Operation, Tensor

__all__ = ["import_graph_def", "export_meta_graph", "import_meta_graph", "MetaGraph"]

META_FORMAT = "flowc.meta_graph"
META_VERSION = 1


# --- import_graph_def ----------------------------------------------------------------------
def _as_ir_graph(graph_def) -> _IRGraph:
    """An IR graph for what ``import_graph_def`` takes."""
    if isinstance(graph_def, _IRGraph):
        return graph_def
    if isinstance(graph_def, str):
        from compiler.ir.parser import parse_graph
        return parse_graph(graph_def, "<graph_def>")
    data = None
    if isinstance(graph_def, (bytes, bytearray)):
        data = bytes(graph_def)
    elif type(graph_def).__name__ == "GraphDef" and hasattr(graph_def, "SerializeToString"):
        data = graph_def.SerializeToString()
    if data is None:
        raise TypeError(f"graph_def must be a GraphDef, a flowc graph or IR text, got "
                        f"{type(graph_def).__name__}")
    from compiler.interop.graphdef import graphdef_to_graph
    from compiler.interop.protos import tf_protos
    gd = tf_protos().GraphDef()
    gd.ParseFromString(data)
    return graphdef_to_graph(gd, "<graph_def>", name="imported")


def _map_key(key) -> str:
    key = key.name if isinstance(key, (Tensor, Operation)) else str(key)
    if key.startswith("^") or ":" in key:
        return key
    return key + ":0"


def _as_output(value, key: str, graph) -> Output:
    from dsl.ops import convert_to_tensor
    t = convert_to_tensor(value)
    if t.graph is not graph:
        raise ValueError(f"input_map[{key!r}] is a tensor of another graph")
    return t.output


def _prefixed_class(attrs: dict, prefix: str) -> dict:
    """Colocation constraints (``_class = ["loc:@op"]``) follow the renamed ops."""
    cls = attrs.get("_class")
    if prefix and isinstance(cls, (list, tuple)):
        attrs["_class"] = [f"loc:@{prefix}{c[5:]}" if isinstance(c, str) and c.startswith("loc:@")
                           else c for c in cls]
    return attrs


def _copy_nodes(ir: _IRGraph, g, prefix: str, input_map: Dict[str, Output],
                control_map: Dict[str, Node], clear_devices: bool = False) -> Dict[str, Node]:
    """Add ``ir``'s nodes to ``g`` (names prefixed); returns old name -> new node."""
    for n in ir:
        if g.get(prefix + n.name) is not None:
            raise ValueError(f"cannot import node '{n.name}' as '{prefix + n.name}': the graph "
                             f"has a node of that name (give import_graph_def another name=)")
    mapping: Dict[str, Node] = {}
    late = []
    used = set()
    for n in ir:
        inputs: List[Optional[Output]] = []
        for i in n.inputs:
            ref = f"{i.node.name}:{i.index}"
            if ref in input_map:
                used.add(ref)
                mapped = input_map[ref]
                if mapped.dtype is not i.dtype:
                    raise ValueError(f"input_map[{ref!r}] is {mapped.dtype.ir_name}; node "
                                     f"'{n.name}' takes {i.dtype.ir_name} there")
                inputs.append(mapped)
            elif i.node.name in mapping:
                inputs.append(Output(mapping[i.node.name], i.index))
            else:
                inputs.append(None)                 # a back edge (NextIteration), set below
        late.extend((n, k) for k, i in enumerate(inputs) if i is None)
        stand_in = next((i for i in inputs if i is not None), None)
        controls = []
        for c in n.control_inputs:
            if "^" + c.name in control_map:
                used.add("^" + c.name)
                controls.append(control_map["^" + c.name])
            else:
                controls.append(mapping[c.name])
        name = prefix + n.name
        m = g.add_node(n.op, [stand_in if i is None else i for i in inputs],
                       _prefixed_class(dict(n.attrs), prefix), name=name, exact_name=True,
                       output_types=n.output_types, device="" if clear_devices else n.device,
                       location=n.location, control_inputs=controls)
        mapping[n.name] = m
        parts = name.split("/")
        for k in range(1, len(parts)):              # the scopes are taken, as in TensorFlow
            g._name_counts.setdefault("/".join(parts[:k]), 1)
    for n, k in late:
        src = n.inputs[k]
        mapping[n.name].set_input(k, Output(mapping[src.node.name], src.index))
    missing = sorted((set(input_map) | set(control_map)) - used)
    if missing:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: "
                         f"[{', '.join(missing)}]")
    return mapping


def _element(name: str, mapping: Dict[str, Node], prefix: str):
    base, sep, index = name.partition(":")
    node = mapping.get(base)
    if node is None:
        raise ValueError(f"Requested return_element {name!r} not found in graph_def.")
    if not sep:
        return Operation(node)
    if not index.isdigit() or int(index) >= node.num_outputs:
        raise ValueError(f"Requested return_element {name!r} not found in graph_def: "
                         f"'{base}' has {node.num_outputs} output(s)")
    return Tensor(Output(node, int(index)))


def _import_prefix(name: Optional[str]) -> str:
    if name == "":
        return ""
    with name_scope(name or "import") as scope:
        return scope


def import_graph_def(graph_def, input_map: Optional[dict] = None,
                     return_elements: Optional[Sequence[str]] = None,
                     name: Optional[str] = None, op_dict=None, producer_op_list=None):
    """Import ``graph_def`` into the default graph (``tf.import_graph_def``); returns the
    ``return_elements`` (tensors and operations) in order, or None when not asked."""
    del op_dict, producer_op_list                   # deprecated in TensorFlow too
    g = get_default_graph()
    ir = _as_ir_graph(graph_def)
    input_map = dict(input_map or {})
    outs: Dict[str, Output] = {}
    controls: Dict[str, Node] = {}
    for key, value in input_map.items():
        k = _map_key(key)
        if k.startswith("^"):
            op = value.op if isinstance(value, Tensor) else value
            if not isinstance(op, Operation):
                raise TypeError(f"input_map[{k!r}] must be an Operation")
            controls[k] = op.node
        else:
            outs[k] = _as_output(value, k, g)
    prefix = _import_prefix(name)
    mapping = _copy_nodes(ir, g, prefix, outs, controls)
    if return_elements is None:
        return None
    return [_element(str(e), mapping, prefix) for e in return_elements]


# --- collections -----------------------------------------------------------------------------
def _item_def(item):
    """The JSON form of a collection item, or None for kinds a meta graph does not keep."""
    from dsl.queues import QueueRunner
    from dsl.variables import Variable
    if isinstance(item, Variable):
        return {"variable": item.to_proto()}
    if isinstance(item, Tensor):
        return {"tensor": item.name}
    if isinstance(item, Operation):
        return {"operation": item.name}
    if isinstance(item, QueueRunner):
        return {"queue_runner": item.to_proto()}
    if isinstance(item, bytes):
        try:
            return {"bytes": item.decode("utf-8")}
        except UnicodeDecodeError:
            return None
    if isinstance(item, (str, int, float, bool)):
        return {"value": item}
    return None


def _collections_def(graph, collection_list=None) -> dict:
    keys = collection_list if collection_list is not None else graph.get_all_collection_keys()
    out = {}
    for key in keys:
        if not isinstance(key, str):
            continue
        items = [_item_def(i) for i in graph.get_collection(key)]
        items = [i for i in items if i is not None]
        if items:
            out[key] = items
    return out


def _rebuild_item(d: dict, g, prefix: str, variables: Dict[str, object], runners: dict):
    from dsl.queues import QueueRunner
    from dsl.variables import Variable
    if "variable" in d:
        handle = prefix + d["variable"]["handle"]
        if handle not in variables:
            variables[handle] = Variable.from_proto(d["variable"], import_scope=prefix, graph=g)
        return variables[handle]
    if "tensor" in d:
        return Tensor(g.output(prefix + d["tensor"]))
    if "operation" in d:
        return Operation(g.node(prefix + d["operation"]))
    if "queue_runner" in d:
        key = json.dumps(d["queue_runner"], sort_keys=True)
        if key not in runners:
            runners[key] = QueueRunner.from_proto(d["queue_runner"], import_scope=prefix,
                                                  graph=g)
        return runners[key]
    if "bytes" in d:
        return d["bytes"].encode("utf-8")
    return d.get("value")


class MetaGraph(dict):
    """A meta graph as ``export_meta_graph`` returns it: the JSON object it writes."""


def export_meta_graph(filename: Optional[str] = None, meta_info_def=None, graph_def=None,
                      saver_def=None, collection_list=None, as_text: bool = False, graph=None,
                      export_scope=None, clear_devices: bool = False,
                      clear_extraneous_savers: bool = False, strip_default_attrs: bool = False,
                      save_debug_info: bool = False, **kwargs) -> MetaGraph:
    """The meta graph of ``graph`` (the default graph), written to ``filename`` when given
    (``tf.train.export_meta_graph``). ``saver_def``: a ``Saver``'s ``as_saver_def()``."""
    from compiler.ir.printer import print_graph
    del meta_info_def, as_text, clear_extraneous_savers, strip_default_attrs, save_debug_info
    if export_scope:
        raise NotImplementedError("export_meta_graph(export_scope=...) is not supported")
    if graph_def is not None:
        raise NotImplementedError("export_meta_graph(graph_def=...) is not supported: flowc "
                                  "exports the graph itself")
    g = graph if graph is not None else get_default_graph()
    text = print_graph(g)
    if clear_devices:
        ir = _as_ir_graph(text)
        for n in ir:
            n.device = ""
        text = print_graph(ir)
    overrides = {n.name: op for n, op in getattr(g, "_gradient_overrides", {}).items()
                 if g.get(n.name) is n}
    meta = MetaGraph(format=META_FORMAT, version=META_VERSION, graph=text,
                     collections=_collections_def(g, collection_list),
                     saver_def=dict(saver_def) if saver_def is not None else None,
                     gradient_overrides=overrides)
    if filename:
        from runtime.checkpoint import write_file_atomically
        folder = os.path.dirname(os.fspath(filename))
        if folder:
            os.makedirs(folder, exist_ok=True)
        write_file_atomically(os.fspath(filename), json.dumps(meta, indent=1).encode(),
                              "meta graph")
    return meta


def read_meta_graph_file(filename: str) -> MetaGraph:
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        from runtime.errors import NotFoundError
        raise NotFoundError(f"meta graph file '{filename}' does not exist") from None
    try:
        meta = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError(f"'{filename}' is not a flowc meta graph (JSON written by "
                         f"export_meta_graph or Saver.save); TensorFlow's binary .meta files "
                         f"are not read: import their GraphDef with fl.import_graph_def") from None
    if not isinstance(meta, dict) or meta.get("format") != META_FORMAT:
        raise ValueError(f"'{filename}' is not a flowc meta graph")
    if meta.get("version", 0) > META_VERSION:
        raise ValueError(f"'{filename}' is a meta graph of version {meta.get('version')}; "
                         f"this flowc reads version {META_VERSION}")
    return MetaGraph(meta)


def import_meta_graph(meta_graph_or_file, clear_devices: bool = False,
                      import_scope: Optional[str] = None, **kwargs):
    """Import a meta graph (a file ``export_meta_graph``/``Saver.save`` wrote, or what
    ``export_meta_graph`` returned) into the default graph and restore its collections;
    returns a ``Saver`` for its variables, or None when it has none
    (``tf.train.import_meta_graph``)."""
    from dsl.saver import Saver
    meta = meta_graph_or_file
    if not isinstance(meta, dict):
        meta = read_meta_graph_file(os.fspath(meta_graph_or_file))
    g = get_default_graph()
    ir = _as_ir_graph(meta["graph"])
    prefix = _import_prefix(import_scope) if import_scope else ""
    _copy_nodes(ir, g, prefix, {}, {}, clear_devices=clear_devices)
    for name, op in (meta.get("gradient_overrides") or {}).items():
        node = g.get(prefix + name)
        if node is not None:
            g._gradient_overrides[node] = op
    variables: Dict[str, object] = {}
    runners: dict = {}
    for key, items in (meta.get("collections") or {}).items():
        for d in items:
            g.add_to_collection(key, _rebuild_item(d, g, prefix, variables, runners))
    saver_def = meta.get("saver_def")
    if saver_def:
        return Saver(saver_def=saver_def, import_scope=prefix)
    from dsl.variables import GraphKeys
    if g.get_collection(GraphKeys.GLOBAL_VARIABLES):
        return Saver()
    return None
