"""ext_ops: a package outside flowc that adds its own ops through flowc's public API.

Each op is one ``register_op`` call with its signature, shape function, numpy reference
kernel and a C kernel rendered from this package's own jinja2 templates (a template file in
``templates/`` for ``ScaledSoftsign``, a template string for ``MinMax``), plus a TensorFlow-style
Python wrapper built on ``fl.apply_op``.
"""
from __future__ import annotations

import os
from typing import List, Optional

import numpy as np

import dsl as fl
from compiler.ir.types import merge_shapes
from compiler.codegen.user_templates import c_template
from compiler.ir.op_registry import register_op

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def _softsign_kernel(ctx, x):
    scale = x.dtype.type(ctx.attrs["scale"])
    return scale * x / (x.dtype.type(1) + np.abs(x))


register_op(
    "ScaledSoftsign", inputs=["x: T"], outputs=["y: T"],
    attrs=["scale: float = 1.0", "T: {float}"],
    shape=lambda ctx: [ctx.input_shape(0)],
    kernel=_softsign_kernel,
    c_kernel=c_template(path=os.path.join(TEMPLATES, "scaled_softsign.c.j2")),
    c_output_dims=lambda kc: [kc.inputs[0].dims],
    group="elementwise", doc="scale * x / (1 + |x|)")


def _min_max_shape(ctx):
    try:
        shape = merge_shapes(ctx.input_shape(0), ctx.input_shape(1))
    except ValueError as e:
        raise ctx.error(f"MinMax needs inputs of one shape: {e}") from None
    return [shape, shape]


def _min_max_dims(kc):
    a, b = kc.inputs
    for k in range(a.rank):
        kc.check_dims_equal(a.dim(k), b.dim(k), f"MinMax inputs differ in dim {k}")
    return [a.dims, a.dims]


_MIN_MAX_C = """\
for (int64_t i = 0; i < {{ out.size }}; i++) {
    const {{ out.ctype }} x = {{ inputs[0].data }}[i], y = {{ inputs[1].data }}[i];
    {{ outputs[0].data }}[i] = x < y ? x : y;
    {{ outputs[1].data }}[i] = x < y ? y : x;
}
"""

register_op(
    "MinMax", inputs=["a: T", "b: T"], outputs=["lo: T", "hi: T"], attrs=["T: {numeric}"],
    shape=_min_max_shape,
    kernel=lambda ctx, a, b: (np.where(a < b, a, b), np.where(a < b, b, a)),
    c_kernel=c_template(_MIN_MAX_C), c_output_dims=_min_max_dims,
    group="other", doc="Elementwise (min, max) of two same-shaped tensors.")


def scaled_softsign(x, scale: float = 1.0, name: Optional[str] = None) -> fl.Tensor:
    """scale * x / (1 + |x|)."""
    return fl.apply_op("ScaledSoftsign", [fl.convert_to_tensor(x)], {"scale": scale},
                       name=name or "ScaledSoftsign")


def min_max(a, b, name: Optional[str] = None) -> List[fl.Tensor]:
    """[min(a, b), max(a, b)] elementwise."""
    a = fl.convert_to_tensor(a)
    return fl.apply_op("MinMax", [a, fl.convert_to_tensor(b, dtype=a.dtype)], name=name)
