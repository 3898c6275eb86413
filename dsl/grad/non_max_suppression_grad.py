"""NonMaxSuppressionV5 selects boxes: no gradient, as in TensorFlow."""
from __future__ import annotations

from dsl.gradients import NotDifferentiable

NotDifferentiable("NonMaxSuppressionV5")
