"""Building a flowc graph from an ONNX ``ModelProto``: initializers become constants (or
variables), graph inputs placeholders (dims without a value unknown), and every node is lowered
to flowc ops by the function the lowering table names for its op type and opset."""
from __future__ import annotations

import os
import re
from collections import ChainMap
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, MutableMapping, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

import dsl as fl
from compiler.ir.location import SourceLocation, location_override
from dsl.context import Graph, name_scope
from dsl.onnx.context import LoweringContext
from dsl.onnx.dtypes import flowc_dtype, onnx_type_name
from dsl.onnx.errors import OnnxImportError, UnsupportedOpsError
from dsl.onnx.registry import DEFAULT_DOMAINS, find_lowering
from dsl.tensor import Tensor
from runtime.errors import FlowcError

_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/>]")


def node_name(name: str, fallback: str) -> str:
    """An ONNX name as a flowc node name (characters flowc refuses become '_')."""
    name = _BAD_NAME_CHARS.sub("_", name).strip("/") or fallback
    return name if re.match(r"^[A-Za-z0-9_.]", name) else "_" + name


@dataclass
class ImportedGraph:
    """What an ONNX graph became: flowc tensors by ONNX name."""
    graph: Graph
    inputs: Dict[str, Tensor]                     # fed graph inputs (placeholders)
    outputs: Dict[str, Tensor]                    # graph outputs, in the model's order
    variables: Dict[str, object] = field(default_factory=dict)   # initializers, when variables


def default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in DEFAULT_DOMAINS:
            return imp.version
    return 1


def domain_opset(model: onnx.ModelProto, domain: str, default: int) -> int:
    """The opset a node of ``domain`` was written for (``default``: the default domain's)."""
    if domain in DEFAULT_DOMAINS:
        return default
    for imp in model.opset_import:
        if imp.domain == domain:
            return imp.version
    return 1


def check_supported(model: onnx.ModelProto, path: str) -> None:
    """Raise ``UnsupportedOpsError`` naming every op the model uses that flowc cannot lower,
    in its graph and in the subgraphs of its nodes (an ``If``'s branches, a ``Loop``'s body:
    counted at the index of the top-level node that holds them)."""
    opset = default_opset(model)
    missing: Dict[Tuple[str, str], List[int]] = {}

    def check(node: onnx.NodeProto, index: int) -> None:
        fn, why = find_lowering(node.op_type, node.domain,
                                domain_opset(model, node.domain, opset))
        if fn is None:
            missing.setdefault((node.op_type, why), []).append(index)
        for sub in subgraphs(node):
            for inner in sub.node:
                check(inner, index)

    for i, node in enumerate(model.graph.node):
        check(node, i)
    if missing:
        raise UnsupportedOpsError(path, missing)


def subgraphs(node: onnx.NodeProto) -> List[onnx.GraphProto]:
    """The graphs among ``node``'s attributes (If's branches, Loop's and Scan's body)."""
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def _placeholder(vi: onnx.ValueInfoProto, path: str, scope: str) -> Tensor:
    if not vi.type.HasField("tensor_type"):
        raise OnnxImportError(f"{path}: graph input '{vi.name}' is not a tensor "
                              f"({vi.type.WhichOneof('value')}); flowc has dense tensors only")
    tt = vi.type.tensor_type
    dtype = flowc_dtype(tt.elem_type)
    if dtype is None:
        raise OnnxImportError(f"{path}: graph input '{vi.name}' has element type "
                              f"{onnx_type_name(tt.elem_type)}, which flowc does not have")
    shape = None
    if tt.HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    name = node_name(vi.name, "input")
    return fl.placeholder(dtype, shape, name=(f"{scope}/{name}" if scope else name) + "/")


def _constant(array: np.ndarray, name: str, path: str, what: str) -> Tensor:
    if array.dtype.name not in _FLOWC_NUMPY_TYPES:
        raise OnnxImportError(f"{path}: {what} '{name}' has element type {array.dtype}, which "
                              "flowc does not have")
    return fl.constant(array, dtype=fl.DType.from_numpy(array.dtype),
                       name=node_name(name, "initializer"))


_FLOWC_NUMPY_TYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32",
                      "int64", "uint8", "uint16", "uint32", "uint64", "bool")


def import_graph(model: onnx.ModelProto, path: str, graph: Optional[Graph] = None, *,
                 constant_inputs: Optional[Mapping[str, np.ndarray]] = None,
                 initializers_as_variables: bool = False, scope: str = "") -> ImportedGraph:
    """Lower ``model`` into ``graph`` (a new one named after the file when None).

    ``constant_inputs`` binds graph inputs to values (they become constants, as initializers):
    lowerings that need a value at compile time (a Reshape's shape fed as a graph input) ask
    for it by raising ``NotConstantError``. ``initializers_as_variables`` makes each
    initializer a variable initialized to its value (run ``fl.global_variables_initializer()``).
    ``scope`` prefixes every node name (several models in one graph).
    """
    check_supported(model, path)
    opset = default_opset(model)
    graph = graph if graph is not None else Graph(graph_name(path))
    constant_inputs = dict(constant_inputs or {})
    values: Dict[str, Tensor] = {}
    inputs: Dict[str, Tensor] = {}
    variables: Dict[str, object] = {}
    g = model.graph
    # The graph's initializers and inputs come before its nodes: they are at the file's
    # start (0:0), not at the Python line that imported it.
    with graph.as_default(), name_scope(f"{scope}/" if scope else None), \
            location_override(SourceLocation(path, 0, 0)):
        for init in g.initializer:
            array = numpy_helper.to_array(init)
            if initializers_as_variables:
                var = fl.Variable(array, name=node_name(init.name, "initializer"))
                variables[init.name] = var
                values[init.name] = var.value() if hasattr(var, "value") else var
            else:
                values[init.name] = _constant(array, init.name, path, "initializer")
        for vi in g.input:
            if vi.name in values:
                continue
            if vi.name in constant_inputs:
                values[vi.name] = _constant(np.asarray(constant_inputs[vi.name]), vi.name, path,
                                            "bound input")
            else:
                values[vi.name] = inputs[vi.name] = _placeholder(vi, path, scope)
        lowerer = _GraphLowerer(path, opset, {t.output.node: name for name, t in inputs.items()},
                                lambda domain: domain_opset(model, domain, opset))
        for i, node in enumerate(g.node):
            lowerer.lower_node(node, SourceLocation(path, i, 0), values)
    outputs = {}
    for vi in g.output:
        if vi.name not in values:
            raise OnnxImportError(f"{path}: graph output '{vi.name}' is produced by no node")
        outputs[vi.name] = values[vi.name]
    return ImportedGraph(graph, inputs, outputs, variables)


def graph_name(path: str) -> str:
    """The graph's name: the file's stem, with characters a graph name refuses replaced."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or "onnx"


class _GraphLowerer:
    """Lowers ONNX nodes into the default graph: those of the model's graph, and those of the
    subgraphs control-flow lowerings ask for (``LoweringContext.lower_subgraph``), which see
    the names of every enclosing scope."""

    def __init__(self, path: str, opset: int, graph_inputs: Dict[object, str],
                 opset_of=None):
        self.path = path
        self.opset = opset
        # the opset a node of another domain was written for (ai.onnx.ml, ...)
        self.opset_of = opset_of or (lambda domain: opset)
        self.graph_inputs = graph_inputs          # placeholder node -> ONNX graph input name

    def lower_node(self, node: onnx.NodeProto, location: SourceLocation,
                   values: MutableMapping[str, Tensor]) -> None:
        """Lower ``node``, reading its inputs from ``values`` and adding its outputs."""
        opset = self.opset_of(node.domain)
        fn, why = find_lowering(node.op_type, node.domain, opset)
        if fn is None:                   # check_supported ran first; kept for direct callers
            raise OnnxImportError(f"{node.op_type}: {why}", location)
        ins: List[Optional[Tensor]] = []
        for name in node.input:
            if name == "":
                ins.append(None)
            elif name in values:
                ins.append(values[name])
            else:
                raise OnnxImportError(f"{node.op_type} '{node.name}': input '{name}' is produced "
                                      "by no earlier node (the graph must be topologically "
                                      "sorted)", location)
        ctx = LoweringContext(node, location.line, opset, ins, location, self.graph_inputs,
                              subgraph_lowerer=lambda graph, bound: self.lower_subgraph(
                                  graph, bound, values, location))
        scope = node_name(node.name, f"{node.op_type}_{location.line}")
        with location_override(location), name_scope(scope):
            try:
                result = fn(ctx)
            except FlowcError:
                raise
            except (ValueError, TypeError, IndexError, KeyError) as e:
                raise ctx.error(f"{type(e).__name__}: {e}") from e
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
        for i, name in enumerate(node.output):
            if name == "":
                continue
            if i >= len(outs) or outs[i] is None:
                raise ctx.error(f"output {i} ('{name}') is not supported by flowc's lowering")
            values[name] = outs[i]

    def lower_subgraph(self, graph: onnx.GraphProto, bound: Sequence[Tensor],
                       outer: Mapping[str, Tensor], location: SourceLocation) -> List[Tensor]:
        """Lower ``graph`` (a node's graph attribute) into the default graph: its inputs are
        ``bound``, the names of ``outer`` (the enclosing scopes) are visible unless it shadows
        them, its initializers are constants made here. Returns its outputs."""
        where = f"{self.path}: subgraph '{graph.name}'"
        if len(bound) != len(graph.input):
            raise OnnxImportError(f"{where} has {len(graph.input)} input(s), given "
                                  f"{len(bound)}", location)
        values: MutableMapping[str, Tensor] = ChainMap({}, outer)
        for init in graph.initializer:
            values[init.name] = _constant(numpy_helper.to_array(init), init.name, self.path,
                                          "initializer")
        for vi, t in zip(graph.input, bound):
            _check_bound(vi, t, where, location)
            values[vi.name] = t
        for node in graph.node:
            self.lower_node(node, location, values)
        outs = []
        for vi in graph.output:
            if vi.name not in values:
                raise OnnxImportError(f"{where}: output '{vi.name}' is produced by no node",
                                      location)
            outs.append(values[vi.name])
        return outs


def _check_bound(vi: onnx.ValueInfoProto, t: Tensor, where: str, location) -> None:
    """A subgraph input bound to ``t`` must have the element type it declares (if any)."""
    kind = vi.type.WhichOneof("value")
    if kind is None:
        return                              # untyped: it takes what it is given
    if kind != "tensor_type":
        raise OnnxImportError(f"{where}: input '{vi.name}' is not a tensor ({kind}); flowc "
                              "has dense tensors only", location)
    elem = vi.type.tensor_type.elem_type
    if elem and flowc_dtype(elem) is not None and flowc_dtype(elem) != t.dtype:
        raise OnnxImportError(f"{where}: input '{vi.name}' is declared "
                              f"{onnx_type_name(elem)} but given {t.dtype}", location)
