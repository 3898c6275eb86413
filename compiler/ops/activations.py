"""Activation functions beyond Relu/Elu/Softplus (``compiler/ops/math.py``): Softsign, Selu,
LeakyRelu, and their gradient ops SoftsignGrad, SeluGrad, LeakyReluGrad. Their C lowering is
``compiler/codegen/c_ops/activations.py``.

TensorFlow's formulas (its CPU functors), in the input's precision:
- Softsign ``features / (|features| + 1)`` (so +-inf gives NaN, as in TF);
  SoftsignGrad ``gradients / (|features| + 1)^2``.
- Selu ``features < 0 ? scale * alpha * (exp(features) - 1) : scale * features`` with
  scale = 1.0507009873554804934193349852946 and scale * alpha =
  1.7580993408473768599402175208123; ``exp(x) - 1`` is computed as ``expm1`` (as flowc's Elu).
  SeluGrad ``outputs < 0 ? gradients * (outputs + scale * alpha) : gradients * scale``.
- LeakyRelu ``features > 0 ? features : features * alpha`` (attr ``alpha``, default 0.2; any
  value, also > 1 or < 0); LeakyReluGrad ``features > 0 ? gradients : gradients * alpha``.
The gradient ops take two tensors of one shape, like ReluGrad.
"""
from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.ops.math import unary
from compiler.ops.nn_grad import _grad_op, _same_shape2
from compiler.ir.op_registry import register_op

SELU_SCALE = 1.0507009873554804934193349852946
SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


def _np_softsign(x: np.ndarray) -> np.ndarray:
    return x / (np.abs(x) + x.dtype.type(1))


def _np_selu(x: np.ndarray) -> np.ndarray:
    t = x.dtype.type
    return np.where(x < 0, t(SELU_SCALE_ALPHA) * np.expm1(x), t(SELU_SCALE) * x)


unary("Softsign", _np_softsign, types="float", arg="features", result="activations",
      doc="features / (|features| + 1).")
unary("Selu", _np_selu, types="float", arg="features", result="activations",
      doc="Scaled exponential linear unit: scale * (features < 0 ? alpha * (exp(features) - 1)"
          " : features).")

_grad_op("SoftsignGrad", ["gradients", "features"],
         lambda g, f: g / np.square(np.abs(f) + f.dtype.type(1)),
         doc="gradients / (|features| + 1)^2.")
_grad_op("SeluGrad", ["gradients", "outputs"],
         lambda g, y: np.where(y < 0, g * (y + y.dtype.type(SELU_SCALE_ALPHA)),
                               g * g.dtype.type(SELU_SCALE)),
         doc="outputs < 0 ? gradients * (outputs + scale * alpha) : gradients * scale.")


# --- LeakyRelu (attr alpha) -----------------------------------------------------------------
def _leaky_relu_kernel(ctx, x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, x * x.dtype.type(ctx.attrs["alpha"]))


def _leaky_relu_grad_kernel(ctx, g: np.ndarray, f: np.ndarray) -> np.ndarray:
    if g.shape != f.shape:
        raise ExecutionError(f"inputs must have the same shape, got {list(g.shape)} and "
                             f"{list(f.shape)}", ctx.node)
    return np.where(f > 0, g, g * g.dtype.type(ctx.attrs["alpha"]))


register_op("LeakyRelu", inputs=["features: T"], outputs=["activations: T"],
            attrs=["alpha: float = 0.2", "T: {float}"], shape=lambda ctx: [ctx.input_shape(0)],
            kernel=_leaky_relu_kernel, group="elementwise", data_error=None,
            fused_attrs=("alpha",), doc="features > 0 ? features : features * alpha.")
register_op("LeakyReluGrad", inputs=["gradients: T", "features: T"], outputs=["backprops: T"],
            attrs=["alpha: float = 0.2", "T: {float}"], shape=_same_shape2,
            kernel=_leaky_relu_grad_kernel, group="elementwise", data_error=None,
            doc="features > 0 ? gradients : gradients * alpha (features: LeakyRelu's input or "
                "output, which are positive at the same places when alpha >= 0).")
