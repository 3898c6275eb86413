"""A graph as a JSON document, for ``flowc ir --format json`` (schema in docs/internals.md)."""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Dict, List, Optional

import numpy as np

from compiler.ir.attr_text import INLINE_ELEMENTS
from compiler.ir.graph import Graph, Node, Output
from compiler.ir.types import Shape, TensorType
from compiler.ir.op_registry import get_op, has_op
from runtime.dtypes import DType

FORMAT = "flowc-graph"
VERSION = 1


def _tensor_name(out: Output) -> str:
    return out.node.name if out.index == 0 else f"{out.node.name}:{out.index}"


def _shape(shape: Shape) -> Optional[List[Optional[int]]]:
    """A shape as a list (``null`` for an unknown dim); ``null`` for an unknown rank."""
    return None if shape is None else [None if d is None else int(d) for d in shape]


def _number(v: float) -> Any:
    """A float, or ``"nan"``/``"inf"``/``"-inf"``, which JSON cannot hold as numbers."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _tensor(arr: np.ndarray) -> Dict[str, Any]:
    """A constant: dtype and shape, its values when small, else its size and a digest."""
    out: Dict[str, Any] = {"dtype": DType.from_numpy(arr.dtype).ir_name,
                           "shape": [int(d) for d in arr.shape]}
    if arr.size <= INLINE_ELEMENTS:
        flat = arr.reshape(-1).tolist()
        out["values"] = [_number(v) if isinstance(v, float) else v for v in flat]
    else:
        out["bytes"] = int(arr.nbytes)
        out["sha256"] = hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()
    return out


def attr_json(value: Any, kind: str = "any") -> Any:
    """An attribute value as JSON: dtypes by IR name, shapes as lists, tensors summarized."""
    if kind == "shape":
        return _shape(value)
    if kind == "list(shape)":
        return [_shape(s) for s in value]
    if isinstance(value, DType):
        return value.ir_name
    if isinstance(value, np.ndarray):
        return _tensor(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return [attr_json(v) for v in value]
    if value is None or isinstance(value, str):
        return value
    return str(value)


def type_json(t: TensorType) -> Dict[str, Any]:
    """An output type: its text (``f32[?,4]``), dtype and shape."""
    return {"type": str(t), "dtype": t.dtype.ir_name, "shape": _shape(t.shape)}


def node_json(node: Node) -> Dict[str, Any]:
    """One node with every field the IR text shows."""
    op = get_op(node.op) if has_op(node.op) else None
    attrs = {}
    for key in sorted(node.attrs):
        spec = op.attrs.get(key) if op else None
        attrs[key] = attr_json(node.attrs[key], spec.kind if spec else "any")
    loc = node.location
    return {
        "name": node.name,
        "op": node.op,
        "inputs": [_tensor_name(i) for i in node.inputs],
        "control_inputs": [c.name for c in node.control_inputs],
        "attrs": attrs,
        "outputs": [type_json(t) for t in node.output_types],
        "device": node.device or "",
        "assigned_device": node.assigned_device or "",
        "location": None if loc is None else {"file": loc.file, "line": loc.line, "col": loc.col},
    }


def graph_to_json(graph: Graph) -> str:
    """The graph as an indented JSON document (keys in a fixed order, nodes in graph order)."""
    doc = {"format": FORMAT, "version": VERSION, "graph": graph.name,
           "nodes": [node_json(n) for n in graph]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
