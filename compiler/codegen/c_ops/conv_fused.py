"""The C lowering of the fused convolution and pooling ops (``compiler/ops/conv_fused.py``):
each runs the module helper of the op it extends (``c_ops/conv.py``, ``base_op``) with its
epilogue switched on. ``_FusedConv2D`` adds the bias and applies the ReLU to each chunk of
output rows right after its gemm, while it is in cache; ``_Conv2DBackpropFilterBias`` sums the
bias gradient from each chunk of ``dy`` the filter gradient has just read; ``_MaxPoolReluGrad``
masks the pooling gradient in its own pass.
"""
from __future__ import annotations

from compiler.codegen.c_ops.conv import _out_dims, emit_conv
from compiler.ir.op_registry import set_c_kernel
from compiler.ops import conv_fused  # noqa: F401  (registers the ops this module lowers)

for _name in ("_FusedConv2D", "_MaxPoolReluGrad", "_Conv2DBackpropFilterBias", "_MaxPoolArgmax",
              "_MaxPoolGradArgmax"):
    set_c_kernel(_name, emit_conv, _out_dims)
