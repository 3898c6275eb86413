"""Multinomial (``compiler/ops/multinomial.py``) draws indices: no gradient, as in TensorFlow."""
from __future__ import annotations

from dsl.gradients import NotDifferentiable

NotDifferentiable("Multinomial")
