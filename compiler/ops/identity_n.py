"""IdentityN: its inputs, unchanged, as its outputs (TensorFlow writes one for every
``tf.custom_gradient``, e.g. Keras' swish and gelu activations, and grappler keeps it)."""
from __future__ import annotations

from compiler.ir.op_registry import register_op

register_op("IdentityN", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: list(type) >= 1"], shape=lambda ctx: list(
                ctx.input_shape(i) for i in range(len(ctx.input_types))),
            kernel=lambda ctx, *xs: list(xs), group="movement", half_native=True,
            doc="Returns its inputs: output k is input k.")
