"""Gradient of IdentityN: each output's gradient is its input's (a missing one stays missing,
as TensorFlow's)."""
from __future__ import annotations

from typing import List, Optional

from dsl.gradients import RegisterGradient
from dsl.tensor import Operation, Tensor


@RegisterGradient("IdentityN")
def _identity_n_grad(op: Operation, *grads: Optional[Tensor]) -> List[Optional[Tensor]]:
    return list(grads)
