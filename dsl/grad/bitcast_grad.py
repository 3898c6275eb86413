"""Bitcast (``compiler/ops/bitcast.py``) reinterprets bytes: no gradient, as in TensorFlow."""
from __future__ import annotations

from dsl.gradients import NotDifferentiable

NotDifferentiable("Bitcast")
