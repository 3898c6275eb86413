"""Errors of the ONNX front end: each names the ONNX node (and its index in the file)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from compiler.ir.location import SourceLocation
from runtime.errors import FlowcError


class OnnxImportError(FlowcError):
    """An ONNX model cannot be turned into a flowc graph."""

    def __init__(self, message: str, location: Optional[SourceLocation] = None):
        self.location = location
        super().__init__(f"{location.file}: node #{location.line}: {message}"
                         if location is not None else message)


class NotConstantError(OnnxImportError):
    """A lowering needs the value of an input at compile time (a Reshape's shape, a Slice's
    starts, ...) and it is a graph input: bind it with ``constant_inputs``."""

    def __init__(self, message: str, input_name: str, location: Optional[SourceLocation] = None):
        self.input_name = input_name
        super().__init__(message, location)


class UnsupportedOpsError(OnnxImportError):
    """The model uses ops (or op versions) that flowc cannot lower; lists all of them at once."""

    def __init__(self, path: str, missing: Dict[Tuple[str, str], List[int]]):
        self.missing = missing
        lines = [f"  {op} ({why}): {len(idx)} node(s), first #{idx[0]}"
                 for (op, why), idx in sorted(missing.items())]
        total = sum(len(v) for v in missing.values())
        super().__init__(f"{path}: {len(missing)} ONNX op(s) flowc cannot lower "
                         f"({total} node(s)):\n" + "\n".join(lines))
