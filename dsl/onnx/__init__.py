"""The ONNX front end: ``.onnx`` files lowered to flowc graphs (see docs/onnx.md).

Importing this package registers the ``.onnx`` model loader with ``flowc``.
"""
from compiler.model_loader import register_model_loader
from dsl.onnx.errors import NotConstantError, OnnxImportError, UnsupportedOpsError
from dsl.onnx.importer import ImportedGraph, check_supported, import_graph
from dsl.onnx.loader import import_onnx, load_onnx_model, read_onnx
from dsl.onnx.registry import LOWERINGS, find_lowering, supported_ops

register_model_loader(".onnx", load_onnx_model)

__all__ = ["ImportedGraph", "LOWERINGS", "NotConstantError", "OnnxImportError",
           "UnsupportedOpsError", "check_supported", "find_lowering", "import_graph",
           "import_onnx", "load_onnx_model", "read_onnx", "supported_ops"]
