"""The optimizer ops (``compiler/ops/training.py``) update variables: no gradient."""
from compiler.ops.training import TRAINING_OPS
from dsl.gradients import NotDifferentiable

for _name in TRAINING_OPS:
    NotDifferentiable(f"Apply{_name}")
    NotDifferentiable(f"ResourceApply{_name}")
