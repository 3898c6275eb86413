"""Gradient functions, one module per op family; importing this package registers them."""
from dsl.grad import (array_grad, data_flow_grad, math_grad, nn_grad,  # noqa: F401
                      reduction_grad, state_grad, tensor_list_grad)
