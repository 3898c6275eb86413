"""Gradient functions, one module per op family; importing this package registers them."""
from dsl.grad import (array_grad, data_flow_grad, depthwise_conv_grad, math_grad,  # noqa: F401
                      nn_grad, reduction_grad, state_grad)
