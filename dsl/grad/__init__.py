"""Gradient functions, one module per op family; importing this package registers them."""
from dsl.grad import (array_grad, data_flow_grad, indexing_grad, inplace_grad,  # noqa: F401
                      linalg_grad, math_grad, nn_grad, reduction_grad, state_grad)
from dsl.grad import (activations_grad, bitwise_grad, math_special_grad,  # noqa: F401
                      scan_grad)
