"""The text DSL: ``*.flow`` model files run through the Python builder (see docs/dsl.md).

Importing this package registers the ``.flow`` model loader with ``flowc``.
"""
from compiler.model_loader import register_model_loader
from dsl.flow.errors import FlowError
from dsl.flow.loader import FlowProgram, build_flow, load_flow, load_flow_model

register_model_loader(".flow", load_flow_model)

__all__ = ["FlowError", "FlowProgram", "build_flow", "load_flow", "load_flow_model"]
