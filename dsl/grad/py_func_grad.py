"""PyFunc and PyFuncStateless (``compiler/ops/py_func.py``) call Python: no gradient, as in
TensorFlow (``tf.py_func`` has none unless one is registered for its op type)."""
from __future__ import annotations

from dsl.gradients import NotDifferentiable

NotDifferentiable("PyFunc")
NotDifferentiable("PyFuncStateless")
