"""Gradient functions, one module per op family; importing this package registers them."""
from dsl.grad import (array_grad, data_flow_grad, indexing_grad, linalg_grad,  # noqa: F401
                      math_grad, nn_grad, reduction_grad, state_grad)
