"""TensorFlow-named array functions (``fl.reshape``, ``fl.concat``, ``fl.gather``, ...)."""
from __future__ import annotations

from typing import Optional

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor


def stack(values, axis: int = 0, name: Optional[str] = None) -> Tensor:
    values = [convert_to_tensor(v) for v in values]
    return apply_op("Pack", [values], {"axis": axis}, name=name or "stack")
