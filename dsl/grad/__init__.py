"""Gradient functions, one module per op family; importing this package registers them."""
from dsl.grad import array_grad, math_grad, nn_grad, reduction_grad, state_grad  # noqa: F401
