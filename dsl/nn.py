"""``fl.nn``: neural-network functions named as in ``tf.nn``."""
from __future__ import annotations

from typing import Optional

from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor


def relu(features, name: Optional[str] = None) -> Tensor:
    return apply_op("Relu", [convert_to_tensor(features)], name=name)
