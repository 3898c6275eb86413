"""What a name in a ``*.flow`` file can call besides user functions: the builder (``dsl``),
its ``nn`` and ``layers`` namespaces, the ``init`` initialisers, and every registered op by its TensorFlow name
(``MatMul(a, b, transpose_b=true)`` calls ``fl.raw_ops.MatMul``)."""
from __future__ import annotations

import types
from typing import Any, List, Optional, Sequence

from compiler.ir.op_registry import all_ops, has_op
from runtime.dtypes import DType

_NAMESPACES = ("nn", "init", "layers")
# Builder names that are not graph building: sessions, graphs and the scopes the DSL has
# statements for.
_HIDDEN = {"Graph", "Session", "Operation", "Tensor", "DType", "get_default_graph",
           "reset_default_graph", "register_op", "device", "name_scope", "control_dependencies",
           "colocate_with"}

DTYPES = {d.name: d for d in DType if d is not DType.resource}
DTYPES.update({"float16": DType.f16, "bfloat16": DType.bf16, "float32": DType.f32,
               "float64": DType.f64, "int8": DType.i8, "int16": DType.i16, "int32": DType.i32,
               "int64": DType.i64, "uint8": DType.u8, "uint16": DType.u16, "uint32": DType.u32,
               "uint64": DType.u64})


class Missing(Exception):
    """A dotted name that resolves to nothing; ``part`` is the first part that is missing."""

    def __init__(self, part: str):
        super().__init__(part)
        self.part = part


def _root(name: str) -> Any:
    import dsl
    from dsl.flow import initializers
    if name == "init":
        return initializers
    if name in DTYPES:
        return DTYPES[name]
    if name in _HIDDEN or name.startswith("_"):
        raise Missing(name)
    if name[:1].isupper() and has_op(name):
        return getattr(dsl.raw_ops, name)
    value = getattr(dsl, name, None)
    if value is None or (isinstance(value, types.ModuleType) and name not in _NAMESPACES):
        raise Missing(name)
    return value


def _exported(module: types.ModuleType) -> Optional[frozenset]:
    """The names a namespace module exports (None: no ``__all__``, every public name)."""
    names = getattr(module, "__all__", None)
    if names is None:
        return None
    return frozenset(names)


def resolve_builtin(parts: Sequence[str]) -> Any:
    """The builder value named by ``parts`` (``["nn", "relu"]``); raises ``Missing``."""
    value = _root(parts[0])
    for part in parts[1:]:
        if not isinstance(value, types.ModuleType) or part.startswith("_"):
            raise Missing(part)
        exported = _exported(value)
        if exported is not None and part not in exported:
            raise Missing(part)
        value = getattr(value, part, None)
        if value is None or isinstance(value, types.ModuleType):
            raise Missing(part)
    return value


def builtin_names() -> List[str]:
    """Every builtin name a user could mean (for "did you mean ...")."""
    import dsl
    from dsl.flow import initializers
    names = [n for n in dir(dsl) if not n.startswith("_") and n not in _HIDDEN
             and not isinstance(getattr(dsl, n), types.ModuleType)]
    names += [f"nn.{n}" for n in sorted(_exported(dsl.nn) or ())]
    names += [f"layers.{n}" for n in sorted(_exported(dsl.layers) or ())]
    names.append("training")                     # the built-in input (dsl/flow/evaluator.py)
    names += [f"init.{n}" for n in initializers.__all__]
    names += [n for n in all_ops() if n[:1].isupper() and not n.startswith("_")]
    return names + list(DTYPES)


def describe_value(value: Any) -> Optional[str]:
    """A few words for a value's kind, for error messages."""
    from dsl.tensor import Tensor
    if isinstance(value, Tensor):
        return f"a tensor {value.output.type}"
    if hasattr(value, "_as_graph_tensor"):
        return f"a variable {value._as_graph_tensor().output.type}"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, DType):
        return "a type"
    if callable(value):
        return "a function"
    return type(value).__name__
