"""The C lowering of the fused convolution and pooling ops (``compiler/ops/conv_fused.py``):
each runs the module helper of the op it extends (``c_ops/conv.py``, ``base_op``;
``c_ops/depthwise_conv.py``) with its epilogue switched on. ``_FusedConv2D`` adds the bias
(and the residual) and applies the activation to each chunk of output rows right after its
gemm, while it is in cache, ``_FusedDepthwiseConv2dNative`` to each output row it has just
written; ``_Conv2DBackpropFilterBias`` sums the bias gradient from each chunk of ``dy`` the
filter gradient has just read; ``_MaxPoolReluGrad`` masks the pooling gradient in its own
pass.
"""
from __future__ import annotations

from compiler.codegen.c_ops.conv import _out_dims, emit_conv
from compiler.codegen.c_ops.depthwise_conv import depthwise_out_dims, emit_depthwise
from compiler.ir.op_registry import set_c_kernel
from compiler.ops import conv_fused  # noqa: F401  (registers the ops this module lowers)

set_c_kernel("_FusedDepthwiseConv2dNative", emit_depthwise, depthwise_out_dims)
for _name in ("_FusedConv2D", "_MaxPoolReluGrad", "_Conv2DBackpropFilterBias", "_MaxPoolArgmax",
              "_MaxPoolGradArgmax", "_MaxPoolGradArgmaxBias"):
    set_c_kernel(_name, emit_conv, _out_dims)
