"""The ``.onnx`` model loader of ``flowc``: a file in, a ``Model`` (graph, feeds, fetches) out."""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import onnx

from compiler.model_loader import Model, ModelError
from dsl.onnx.importer import ImportedGraph, import_graph


def read_onnx(path: str) -> onnx.ModelProto:
    """Parse an ``.onnx`` file (external data next to it is loaded too)."""
    try:
        return onnx.load(path)
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except Exception as e:              # protobuf's DecodeError and friends
        raise ModelError(f"{path}: not a readable ONNX model: {type(e).__name__}: {e}") from None


def import_onnx(path: str, constant_inputs: Optional[Mapping[str, np.ndarray]] = None,
                initializers_as_variables: bool = False) -> ImportedGraph:
    """Read ``path`` and lower it to a new flowc graph."""
    return import_graph(read_onnx(path), path, constant_inputs=constant_inputs,
                        initializers_as_variables=initializers_as_variables)


def load_onnx_model(path: str, constant_inputs: Optional[Mapping[str, np.ndarray]] = None) -> Model:
    """The ``Model`` of an ``.onnx`` file: its graph outputs are the fetches (by their ONNX
    names), its graph inputs that are not initializers the feeds."""
    imported = import_onnx(path, constant_inputs)
    fetches = [t.output for t in imported.outputs.values()]
    feeds = [t.output for t in imported.inputs.values()]
    return Model(path, imported.graph, imported.graph, fetches, list(imported.outputs), feeds)
