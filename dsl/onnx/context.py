"""What a lowering function sees of one ONNX node: its attributes, its inputs as flowc
tensors, the opset it was written for, and errors that point at the node."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.ir.location import SourceLocation
from dsl.onnx.folding import fed_ancestors, static_value
from dsl.onnx.errors import NotConstantError, OnnxImportError
from dsl.tensor import Tensor

_REQUIRED = object()


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
                 graph_inputs: Optional[Dict[object, str]] = None):
        self.node = node
        self.graph_inputs = graph_inputs or {}     # placeholder node -> ONNX graph input name
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
            name = self.node.input[i]
            fed = [self.graph_inputs[n] for n in fed_ancestors(t.output) if n in self.graph_inputs]
            source = f"graph input '{name}'"
            if fed and fed[0] != name:        # computed from a graph input: name that one
                source = f"graph input '{fed[0]}' it is computed from"
                name = fed[0]
            raise NotConstantError(
                f"{self.op_type} '{self.node.name or self.node.output[0]}': its {what} (input "
                f"'{self.node.input[i]}') must be known at compile time (an initializer or a "
                f"Constant); bind {source} with constant_inputs", name, self.location)
        return np.asarray(value)

    def optional_const(self, i: int, what: str) -> Optional[np.ndarray]:
        return self.const(i, what) if self.has_input(i) else None
