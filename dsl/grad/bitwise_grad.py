"""The bitwise ops (``compiler/ops/bitwise.py``) work on integers: they have no gradient."""
from __future__ import annotations

from dsl.gradients import NotDifferentiable

for _name in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert", "LeftShift", "RightShift"):
    NotDifferentiable(_name)
