"""flowc IR <-> TensorFlow ``GraphDef``.

flowc's ops are TensorFlow's (same names, inputs, attrs), so the mapping is one to one: a
``NodeDef``'s name, op, attrs, device and inputs (``node``, ``node:1``, ``^control``) become
a node of the same name, op, attrs, device and operands, and back.

- Import (``graphdef_to_graph``, and the ``.pb``/``.pbtxt`` model loader): every node of the
  GraphDef is checked first; ops flowc lacks and attrs it does not know are reported together,
  with counts, in one ``GraphDefImportError``. Types and shapes come from flowc's shape
  functions (TensorFlow's ``_output_shapes`` are not trusted). A node's location is
  ``file:N:0``, N being its position in the GraphDef (1-based), so later errors point at it.
- Export (``graph_to_graphdef``): attrs by their op's declared kinds, plus ``_output_shapes``
  (TensorBoard shows them on the edges), ``_flowc_location`` (``file:line:col`` of the node's
  source) and ``_flowc_assigned_device`` (the device placement chose), which import reads back.
"""
from __future__ import annotations

import collections
import os
from typing import Dict, List, Optional, Sequence, Tuple

import networkx as nx
import numpy as np

from compiler.errors import CompileError
from compiler.ir.construct import infer_types
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.location import SourceLocation
from compiler.ir.types import TensorType
from compiler.ir.verifier import verify_node
from compiler.ir.op_registry import coerce_attr, get_op, has_op
from compiler.interop.protos import tf_protos
from compiler.interop.tf_attr_defaults import (default_note, format_attr_value, holds_tf_default,
                                               tf_attr_default)
from runtime.dtypes import DType
from runtime.errors import FlowcError

LOCATION_ATTR = "_flowc_location"
ASSIGNED_ATTR = "_flowc_assigned_device"      # where placement put the node (device: as asked)
SHAPES_ATTR = "_output_shapes"

# TensorFlow DataType enum values (types.proto) of flowc's dtypes.
_TF_DTYPE = {DType.f32: 1, DType.f64: 2, DType.i32: 3, DType.u8: 4, DType.i16: 5, DType.i8: 6,
             DType.i64: 9, DType.bool: 10, DType.bf16: 14, DType.u16: 17, DType.f16: 19,
             DType.resource: 20, DType.u32: 22, DType.u64: 23}
_FROM_TF = {v: k for k, v in _TF_DTYPE.items()}
_TF_NAME = {1: "DT_FLOAT", 2: "DT_DOUBLE", 3: "DT_INT32", 4: "DT_UINT8", 5: "DT_INT16",
            6: "DT_INT8", 7: "DT_STRING", 9: "DT_INT64", 10: "DT_BOOL", 14: "DT_BFLOAT16",
            17: "DT_UINT16", 19: "DT_HALF", 20: "DT_RESOURCE", 22: "DT_UINT32",
            23: "DT_UINT64"}

# TensorFlow's internal attrs (shape hints, grappler and XLA marks), dropped on import: they do
# not change what a node computes. Other attrs flowc's op lacks are dropped only when they hold
# TensorFlow's default (compiler/interop/tf_attr_defaults.py), and refused by name otherwise.
_IGNORABLE_ATTRS = {"_output_shapes", "_grappler",
                    "_XlaCompile", "_XlaScope", "_XlaSeparateCompiledGradients"}


class GraphDefImportError(FlowcError):
    """A GraphDef that flowc cannot take as it is (unknown ops or attrs, bad inputs)."""


class GraphDefExportError(FlowcError):
    """A flowc graph that has no GraphDef form."""


# --- dtypes, shapes, tensors ---------------------------------------------------------------
def tf_dtype(dtype: DType) -> int:
    try:
        return _TF_DTYPE[dtype]
    except KeyError:
        raise GraphDefExportError(f"dtype {dtype} has no TensorFlow DataType") from None


def flowc_dtype(enum_value: int, where: str) -> DType:
    try:
        return _FROM_TF[enum_value]
    except KeyError:
        name = _TF_NAME.get(enum_value, f"DataType {enum_value}")
        raise GraphDefImportError(f"{where}: dtype {name} is not supported by flowc") from None


def _shape_proto(shape, pb):
    proto = pb.tensor_shape_pb2.TensorShapeProto()
    if shape is None:
        proto.unknown_rank = True
        return proto
    for d in shape:
        proto.dim.add(size=-1 if d is None else int(d))
    return proto


def _shape_from_proto(proto) -> Optional[tuple]:
    if proto.unknown_rank:
        return None
    return tuple(None if d.size < 0 else int(d.size) for d in proto.dim)


def tensor_proto(value: np.ndarray, dtype: DType, pb):
    """A TensorProto holding ``value`` (raw little-endian ``tensor_content``)."""
    proto = pb.tensor_pb2.TensorProto(dtype=tf_dtype(dtype))
    proto.tensor_shape.CopyFrom(_shape_proto(value.shape, pb))
    proto.tensor_content = np.ascontiguousarray(value, dtype=dtype.np.newbyteorder("<")).tobytes()
    return proto


_VAL_FIELDS = {DType.f32: "float_val", DType.f64: "double_val", DType.i32: "int_val",
               DType.i16: "int_val", DType.i8: "int_val", DType.u8: "int_val",
               DType.u16: "int_val", DType.i64: "int64_val", DType.bool: "bool_val",
               DType.f16: "half_val", DType.bf16: "half_val"}
# TensorProto's uint32_val and uint64_val (name, field number): read from the message's unknown
# fields where the protobufs at hand predate them (tensorboardX's copy).
_UINT_VAL_FIELDS = {DType.u32: ("uint32_val", 16), DType.u64: ("uint64_val", 17)}


def _varints(data: bytes) -> List[int]:
    out, value, shift = [], 0, 0
    for b in data:
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            out.append(value)
            value, shift = 0, 0
    return out


def _unknown_varint_field(proto, number: int) -> List[int]:
    """The values of repeated varint field ``number`` the proto's schema does not know."""
    from google.protobuf.unknown_fields import UnknownFieldSet
    vals: List[int] = []
    for f in UnknownFieldSet(proto):
        if f.field_number == number:
            vals.extend(_varints(f.data) if f.wire_type == 2 else [f.data])
    return vals


def tensor_value(proto, where: str) -> Tuple[np.ndarray, DType]:
    """The numpy value of a TensorProto (``tensor_content`` or the typed ``*_val`` list, whose
    last value repeats to fill the shape, as TensorFlow reads it)."""
    dtype = flowc_dtype(proto.dtype, where)
    shape = _shape_from_proto(proto.tensor_shape)
    if shape is None or any(d is None for d in shape):
        raise GraphDefImportError(f"{where}: a constant needs a fully known shape")
    count = int(np.prod(shape, dtype=np.int64))
    if dtype is DType.resource:
        raise GraphDefImportError(f"{where}: constants of dtype {dtype} are not supported")
    if proto.tensor_content:
        raw = proto.tensor_content
        if len(raw) != count * dtype.itemsize:
            raise GraphDefImportError(f"{where}: tensor_content holds {len(raw)} bytes; "
                                      f"{dtype}{list(shape)} needs {count * dtype.itemsize}")
        return np.frombuffer(raw, dtype=dtype.np.newbyteorder("<")).astype(dtype.np).reshape(shape), dtype
    if dtype in _UINT_VAL_FIELDS:
        field, number = _UINT_VAL_FIELDS[dtype]
        if field in proto.DESCRIPTOR.fields_by_name:
            vals = list(getattr(proto, field))
        else:
            vals = _unknown_varint_field(proto, number)
    else:
        vals = list(getattr(proto, _VAL_FIELDS[dtype]))
    if dtype.is_half:                       # half_val holds the bits
        vals = list(np.array(vals, dtype=np.uint16).view(dtype.np))
    if len(vals) > count:
        raise GraphDefImportError(f"{where}: {len(vals)} values for a tensor of {count} elements")
    if count and not vals:
        vals = [0]
    flat = np.array(vals + [vals[-1]] * (count - len(vals)) if count else [], dtype=dtype.np)
    return flat.reshape(shape), dtype


# --- attrs -----------------------------------------------------------------------------------
def _attr_proto(value, kind: str, pb):
    a = pb.attr_value_pb2.AttrValue()
    if kind == "type":
        a.type = tf_dtype(value)
    elif kind == "int":
        a.i = int(value)
    elif kind == "float":
        a.f = float(value)
    elif kind == "bool":
        a.b = bool(value)
    elif kind == "string":
        a.s = str(value).encode()
    elif kind == "shape":
        a.shape.CopyFrom(_shape_proto(value, pb))
    elif kind == "tensor":
        arr = np.asarray(value)
        from runtime.dtypes import as_dtype
        a.tensor.CopyFrom(tensor_proto(arr, as_dtype(arr.dtype), pb))
    elif kind == "list(int)":
        a.list.i.extend(int(v) for v in value)
    elif kind == "list(float)":
        a.list.f.extend(float(v) for v in value)
    elif kind == "list(bool)":
        a.list.b.extend(bool(v) for v in value)
    elif kind == "list(string)":
        a.list.s.extend(str(v).encode() for v in value)
    elif kind == "list(type)":
        a.list.type.extend(tf_dtype(v) for v in value)
    elif kind == "list(shape)":
        for s in value:
            a.list.shape.add().CopyFrom(_shape_proto(s, pb))
    elif kind == "func":
        a.func.name = str(getattr(value, "name", value))
    else:
        return None
    return a


def _guess_kind(value) -> Optional[str]:
    """The attr kind of an extension attr (``_name``) from its Python value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, DType):
        return "type"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "list(string)"
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return "list(int)"
    return None


def _attr_from_proto(a, where: str):
    """The Python value of an AttrValue (kind from the proto's own oneof)."""
    which = a.WhichOneof("value")
    if which == "type":
        return flowc_dtype(a.type, where)
    if which in ("i", "f", "b"):
        return getattr(a, which)
    if which == "s":
        return a.s.decode("utf-8", errors="replace")
    if which == "shape":
        return _shape_from_proto(a.shape)
    if which == "tensor":
        return tensor_value(a.tensor, where)[0]
    if which == "func":
        return a.func.name
    if which == "list" or which is None:
        lst = a.list
        for field in ("i", "f", "b", "s", "type", "shape"):
            items = list(getattr(lst, field))
            if not items:
                continue
            if field == "s":
                return [s.decode("utf-8", errors="replace") for s in items]
            if field == "type":
                return [flowc_dtype(t, where) for t in items]
            if field == "shape":
                return [_shape_from_proto(s) for s in items]
            return items
        return []
    raise GraphDefImportError(f"{where}: attr value of kind '{which}' is not supported")


# --- export --------------------------------------------------------------------------------
def graph_to_graphdef(graph: Graph):
    """The GraphDef of ``graph`` (node order kept; inputs as TensorFlow writes them)."""
    pb = tf_protos()
    gd = pb.graph_pb2.GraphDef()
    gd.versions.producer = 27
    for n in graph:
        nd = gd.node.add(name=n.name, op=n.op, device=n.device or "")
        nd.input.extend(i.node.name if i.index == 0 else f"{i.node.name}:{i.index}"
                        for i in n.inputs)
        nd.input.extend("^" + c.name for c in n.control_inputs)
        op = get_op(n.op, n) if has_op(n.op) else None
        for key, value in n.attrs.items():
            adef = op.attrs.get(key) if op is not None else None
            kind = adef.kind if adef is not None else _guess_kind(value)
            if kind == "any" or kind is None:
                kind = _guess_kind(value)
            proto = _attr_proto(value, kind, pb) if kind else None
            if proto is None:
                raise GraphDefExportError(f"node '{n.name}' ({n.op}): attr '{key}' = {value!r} has "
                                          "no GraphDef form")
            nd.attr[key].CopyFrom(proto)
        if n.output_types:
            shapes = nd.attr[SHAPES_ATTR]
            for t in n.output_types:
                shapes.list.shape.add().CopyFrom(_shape_proto(t.shape, pb))
        if n.location is not None:
            nd.attr[LOCATION_ATTR].s = str(n.location).encode()
        if getattr(n, "assigned_device", None):
            nd.attr[ASSIGNED_ATTR].s = n.assigned_device.encode()
    return gd


def write_graphdef(graph: Graph, path: str) -> None:
    """Write ``graph`` as a binary GraphDef (``.pb``) or text (``.pbtxt``), atomically."""
    gd = graph_to_graphdef(graph)
    if path.endswith(".pbtxt"):
        from google.protobuf import text_format
        data = text_format.MessageToString(gd).encode()
    else:
        data = gd.SerializeToString()
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


# --- import --------------------------------------------------------------------------------
def read_graphdef(path: str):
    """Parse a binary (``.pb``) or text (``.pbtxt``) GraphDef file."""
    pb = tf_protos()
    from google.protobuf import message, text_format
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise GraphDefImportError(f"{path}: no such file") from None
    except OSError as e:
        raise GraphDefImportError(f"{path}: cannot read: {e.strerror or e}") from None
    gd = pb.graph_pb2.GraphDef()
    try:
        if path.endswith(".pbtxt"):
            text_format.Parse(data.decode("utf-8"), gd)
        else:
            gd.ParseFromString(data)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        kind = "text" if path.endswith(".pbtxt") else "binary"
        raise GraphDefImportError(f"{path}: not a {kind} GraphDef: {e}") from None
    except RuntimeWarning as e:  # pragma: no cover  (protobuf's pure-python decoder)
        raise GraphDefImportError(f"{path}: not a GraphDef: {e}") from None
    return gd


def _split_input(text: str) -> Tuple[str, int, bool]:
    if text.startswith("^"):
        return text[1:], 0, True
    name, sep, idx = text.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx), False
    return text, 0, False


def _check_nodes(gd, path: str) -> None:
    """Everything flowc cannot take, reported at once: unknown ops and attrs, with counts."""
    missing_ops = collections.Counter()
    bad_attrs = collections.Counter()
    other: List[str] = []
    names = set()
    for k, nd in enumerate(gd.node):
        if nd.name in names:
            other.append(f"node {k + 1} '{nd.name}': duplicate node name")
        names.add(nd.name)
        if not has_op(nd.op):
            missing_ops[nd.op] += 1
            continue
        op = get_op(nd.op)
        for key in nd.attr:
            if key in op.attrs or key.startswith("_") or key in _IGNORABLE_ATTRS:
                continue
            try:
                value = _attr_from_proto(nd.attr[key], f"{path}: node {k + 1} '{nd.name}'")
            except GraphDefImportError:
                value = "<unsupported value>"
            if holds_tf_default(nd.op, key, value):
                continue
            note = default_note(nd.op, key)
            bad_attrs[f"{nd.op}.{key}={format_attr_value(value)}"
                      + (f" ({note})" if note else "")] += 1
    for k, nd in enumerate(gd.node):
        for text in nd.input:
            src, _, _ = _split_input(text)
            if src not in names:
                other.append(f"node {k + 1} '{nd.name}': input '{text}' names no node")
    if not (missing_ops or bad_attrs or other):
        return
    lines = [f"{path}: flowc cannot import this GraphDef:"]
    if missing_ops:
        total = sum(missing_ops.values())
        lines.append(f"  {len(missing_ops)} op(s) flowc does not implement ({total} node(s)): "
                     + ", ".join(f"{op} x{c}" for op, c in sorted(missing_ops.items())))
    if bad_attrs:
        lines.append("  attrs flowc's ops do not have (or only at TensorFlow's default): "
                     + ", ".join(f"{a} x{c}" for a, c in sorted(bad_attrs.items())))
    lines.extend("  " + o for o in other[:20])
    if len(other) > 20:
        lines.append(f"  ... and {len(other) - 20} more")
    raise GraphDefImportError("\n".join(lines))


def graphdef_to_graph(gd, path: str = "<graphdef>", name: Optional[str] = None, *,
                      lowered: bool = False) -> Graph:
    """Build the flowc graph of a GraphDef (see the module docstring). One with functions,
    functional control flow or TensorLists is lowered first (``tf_functions.py``; ``lowered``:
    it was)."""
    if not lowered:
        from compiler.interop.tf_functions import import_functional, needs_lowering
        if needs_lowering(gd):
            return import_functional(gd, path, name)
    _check_nodes(gd, path)
    graph = Graph(name or _graph_name(path))
    by_name: Dict[str, Node] = {}
    order_index = {nd.name: k for k, nd in enumerate(gd.node)}
    deps = nx.DiGraph()
    deps.add_nodes_from(order_index)
    for nd in gd.node:
        for text in nd.input:
            src, _, _ = _split_input(text)
            if nd.op != "Merge" or text.startswith("^"):
                deps.add_edge(src, nd.name)
            elif gd.node[order_index[src]].op != "NextIteration":
                deps.add_edge(src, nd.name)       # a loop's back edge does not order nodes
    try:
        order = list(nx.lexicographical_topological_sort(deps, key=order_index.__getitem__))
    except nx.NetworkXUnfeasible:
        cycle = [u for u, _ in nx.find_cycle(deps)]
        raise GraphDefImportError(f"{path}: the GraphDef has a cycle outside a while loop: "
                                  + " -> ".join(cycle[:8])) from None
    for node_name in order:
        nd = gd.node[order_index[node_name]]
        by_name[nd.name] = _add_node(graph, nd, order_index[node_name], path)
    for node_name in order:
        nd = gd.node[order_index[node_name]]
        node = by_name[nd.name]
        data, ctrl = [], []
        for text in nd.input:
            src, idx, is_ctrl = _split_input(text)
            (ctrl if is_ctrl else data).append(by_name[src] if is_ctrl else Output(by_name[src], idx))
        node.set_inputs(data)
        for c in ctrl:
            node.add_control_input(c)
    _type_nodes([by_name[n] for n in order], path)
    for node in graph:
        try:
            verify_node(node)
        except CompileError as e:
            raise GraphDefImportError(f"{node.location}: node '{node.name}' ({node.op}): "
                                      f"{getattr(e, 'detail', None) or e}") from None
    graph.topo_sort()
    graph.version = 0
    return graph


def _graph_name(path: str) -> str:
    base = os.path.splitext(os.path.basename(path))[0] or "graphdef"
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in base)
    return ident if ident and not ident[0].isdigit() else "g_" + ident


def _add_node(graph: Graph, nd, index: int, path: str) -> Node:
    op = get_op(nd.op)
    where = f"{path}: node {index + 1} '{nd.name}' ({nd.op})"
    location = SourceLocation(path, index + 1, 0)
    attrs = {}
    assigned = None
    for key, value in nd.attr.items():
        if key == LOCATION_ATTR:
            loc = SourceLocation.parse(value.s.decode("utf-8", errors="replace"))
            location = loc or location
            continue
        if key == ASSIGNED_ATTR:
            assigned = value.s.decode("utf-8", errors="replace")
            continue
        if key not in op.attrs and (key in _IGNORABLE_ATTRS or tf_attr_default(nd.op, key)[0]):
            continue                             # (_check_nodes saw it holds the default)
        raw = _attr_from_proto(value, where)
        try:
            attrs[key] = coerce_attr(op, key, raw, None)
        except CompileError as e:
            raise GraphDefImportError(f"{where}: attr '{key}': {getattr(e, 'detail', None) or e}") from None
        except (ValueError, TypeError) as e:
            raise GraphDefImportError(f"{where}: attr '{key}' = {raw!r}: {e}") from None
    try:
        node = graph.add_node(nd.op, (), attrs, name=nd.name, exact_name=True,
                              device=nd.device, location=location)
    except CompileError as e:
        raise GraphDefImportError(f"{where}: {getattr(e, 'detail', None) or e}") from None
    if assigned:
        node.assigned_device = assigned
    return node


def _is_back_edge(out: Output) -> bool:
    return out.node.op == "NextIteration"


def _loop_merges(nodes: Sequence[Node]) -> List[Node]:
    return [n for n in nodes if n.op == "Merge" and any(_is_back_edge(i) for i in n.inputs)]


def _type_nodes(nodes: Sequence[Node], path: str) -> None:
    """Type ``nodes`` (in topological order, back edges left out). A while loop's ``Merge``
    comes before its ``NextIteration`` back edge, so it is typed first from its forward input
    (the ``Enter``: the types of iteration 0); once the body is typed, each such Merge takes the
    merge of its current type and all its inputs, and the nodes after it are typed again until
    no Merge changes (TensorFlow's shape refiner types back edges after the body, too). A Merge
    only ever becomes less specific (a dim unknown, then the rank), so this ends."""
    for node in nodes:
        _fill_types(node, path)
    merges = _loop_merges(nodes)
    loop_merges = set(merges)
    position = {n: k for k, n in enumerate(nodes)}
    while merges:
        first = None
        for m in merges:
            relaxed = _merge_type(m, [m.output_types[0]] + [i.type for i in m.inputs])
            if relaxed != m.output_types[0]:
                m.output_types[0] = relaxed
                first = position[m] if first is None else min(first, position[m])
        if first is None:
            return
        for node in nodes[first + 1:]:
            if node not in loop_merges:
                _fill_types(node, path)


def _merge_type(node: Node, types: Sequence[TensorType]) -> TensorType:
    """The type of ``node``'s output that holds values of all ``types`` (Merge's shape rule)."""
    try:
        return infer_types(node, input_types=types)[0]
    except CompileError as e:
        raise GraphDefImportError(f"{node.location}: node '{node.name}' ({node.op}): "
                                  f"{getattr(e, 'detail', None) or e}") from None


def _fill_types(node: Node, path: str) -> None:
    op = get_op(node.op)
    if node.op == "Merge" and any(_is_back_edge(i) and not i.node.output_types
                                  for i in node.inputs):
        typed = [i.type for i in node.inputs if i.node.output_types]
        if not typed:
            raise GraphDefImportError(f"{node.location}: node '{node.name}' (Merge): no input "
                                      "outside the loop's back edges")
        node.attrs.setdefault("T", typed[0].dtype)
        node.attrs.setdefault("N", len(node.inputs))
        node.output_types = [_merge_type(node, typed), TensorType(DType.i32, ())]
        return
    k = 0
    for arg in op.inputs:                      # type and length attrs TF leaves implied
        n = 1
        if arg.number_attr:
            n = node.attrs.get(arg.number_attr, 1)
        elif arg.type_list_attr:
            n = len(node.attrs.get(arg.type_list_attr) or ())
        if arg.type_attr and arg.type_attr not in node.attrs and k < len(node.inputs):
            node.attrs[arg.type_attr] = node.inputs[k].dtype
        k += n
    for name, a in op.attrs.items():
        if name not in node.attrs and a.has_default:
            node.attrs[name] = list(a.default) if isinstance(a.default, list) else a.default
    try:
        node.output_types = infer_types(node, op=op)
    except CompileError as e:
        raise GraphDefImportError(f"{node.location}: node '{node.name}' ({node.op}): "
                                  f"{getattr(e, 'detail', None) or e}") from None


def load_graphdef_model(path: str):
    """Model loader of ``.pb`` and ``.pbtxt`` files: feeds are the Placeholders, fetches the
    ``_Retval``s of an exported step graph or else the outputs nothing reads (select others
    with ``--fetch``)."""
    from compiler.model_loader import model_of_graph
    return model_of_graph(path, graphdef_to_graph(read_graphdef(path), path))
