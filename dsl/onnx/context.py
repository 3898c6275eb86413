"""What a lowering function sees of one ONNX node: its attributes, its inputs as flowc
tensors, the opset it was written for, and errors that point at the node."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.ir.location import SourceLocation
from dsl.onnx.folding import fed_ancestors, static_value
from dsl.onnx.errors import NotConstantError, OnnxImportError
from dsl.tensor import Tensor

_REQUIRED = object()

# lowers a graph attribute with its inputs bound to the given tensors; returns its outputs
SubgraphLowerer = Callable[[onnx.GraphProto, List[Tensor]], List[Tensor]]


def attribute_value(attr: onnx.AttributeProto) -> Any:
    """An ONNX attribute as a Python value: ints, floats, strings, lists, numpy arrays."""
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8") for v in value]
    if isinstance(value, list) and value and isinstance(value[0], onnx.TensorProto):
        return [numpy_helper.to_array(v) for v in value]
    return value


class LoweringContext:
    """One ONNX node being lowered; lowering functions return its outputs as flowc tensors."""

    def __init__(self, node: onnx.NodeProto, index: int, opset: int,
                 inputs: List[Optional[Tensor]], location: SourceLocation,
                 graph_inputs: Optional[Dict[object, str]] = None,
                 subgraph_lowerer: Optional[SubgraphLowerer] = None):
        self.node = node
        self.graph_inputs = graph_inputs or {}     # placeholder node -> ONNX graph input name
        self._subgraph_lowerer = subgraph_lowerer
        self.index = index
        self.opset = opset
        self.inputs = inputs
        self.location = location
        self.attrs = {a.name: attribute_value(a) for a in node.attribute}

    @property
    def op_type(self) -> str:
        return self.node.op_type

    @property
    def num_outputs(self) -> int:
        """How many outputs the node declares (optional ones left out at the end don't count)."""
        return len(self.node.output)

    def output_wanted(self, i: int) -> bool:
        return i < len(self.node.output) and self.node.output[i] != ""

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"{self.op_type} '{self.node.name or self.node.output[0]}': "
                               f"{message}", self.location)

    def attr(self, name: str, default: Any = _REQUIRED) -> Any:
        if name in self.attrs:
            return self.attrs[name]
        if default is _REQUIRED:
            raise self.error(f"needs attribute '{name}'")
        return default

    def subgraph(self, name: str) -> onnx.GraphProto:
        """The graph attribute ``name`` (an ``If``'s branch, a ``Loop``'s body)."""
        graph = self.attr(name)
        if not isinstance(graph, onnx.GraphProto):
            raise self.error(f"attribute '{name}' is not a graph")
        return graph

    def lower_subgraph(self, name: str, inputs: Sequence[Tensor]) -> List[Tensor]:
        """Lower the graph attribute ``name`` into the default graph, here and now (inside a
        ``cond`` branch or a ``while_loop`` body, its ops belong to it): its inputs bound to
        ``inputs``, the names of the scopes around this node visible. Returns its outputs."""
        if self._subgraph_lowerer is None:
            raise self.error("subgraphs cannot be lowered here")
        return self._subgraph_lowerer(self.subgraph(name), list(inputs))

    def has_input(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def input(self, i: int) -> Tensor:
        if not self.has_input(i):
            raise self.error(f"needs input {i}")
        return self.inputs[i]

    def optional_input(self, i: int) -> Optional[Tensor]:
        return self.inputs[i] if self.has_input(i) else None

    def const(self, i: int, what: str) -> np.ndarray:
        """The value of input ``i`` at compile time (an initializer, a Constant node, a value
        computed from those only); a graph input raises ``NotConstantError``."""
        t = self.input(i)
        value = static_value(t.output)
        if value is None:
            raise self.not_constant(i, f"its {what} (input '{self.node.input[i]}') must be "
                                       "known at compile time (an initializer or a Constant)")
        return np.asarray(value)

    def graph_inputs_of(self, i: int, through_shapes: bool = True) -> List[str]:
        """The (fed) graph inputs the value of input ``i`` is computed from, in graph order:
        binding them with ``constant_inputs`` makes it known at compile time.
        ``through_shapes=False``: only those whose values it reads (not only their shapes)."""
        t = self.input(i)
        return [self.graph_inputs[n] for n in fed_ancestors(t.output, through_shapes)
                if n in self.graph_inputs]

    def not_constant(self, i: int, message: str) -> NotConstantError:
        """The error for input ``i`` not known at compile time: ``message``, and which graph
        input to bind with ``constant_inputs`` (the one it is computed from), if any."""
        name = self.node.input[i]
        fed = self.graph_inputs_of(i)
        if not fed:
            hint = "it is computed at run time (inside a loop, or from stateful ops)"
        elif fed[0] == name:
            hint = f"bind graph input '{name}' with constant_inputs"
        else:                                 # computed from a graph input: name that one
            name = fed[0]
            hint = f"bind graph input '{name}' it is computed from with constant_inputs"
        return NotConstantError(f"{self.op_type} '{self.node.name or self.node.output[0]}': "
                                f"{message}; {hint}", name, self.location)

    def optional_const(self, i: int, what: str) -> Optional[np.ndarray]:
        return self.const(i, what) if self.has_input(i) else None
