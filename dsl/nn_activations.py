"""The activations of ``tf.nn`` beyond relu/elu/softplus, re-exported by ``fl.nn``:
``leaky_relu``, ``selu``, ``softsign`` (one op each) and ``gelu`` (built from elementwise ops,
as TensorFlow builds it, so the fuse pass makes it one kernel)."""
from __future__ import annotations

import math
from typing import Optional

from dsl.math_ops import _unary, multiply, add, tanh
from dsl.math_special import erf
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor

__all__ = ["leaky_relu", "selu", "softsign", "gelu"]


def leaky_relu(features, alpha: float = 0.2, name: Optional[str] = None) -> Tensor:
    """features where > 0, else features * alpha (LeakyRelu)."""
    return apply_op("LeakyRelu", [convert_to_tensor(features)], {"alpha": float(alpha)},
                    name=name)


def selu(features, name: Optional[str] = None) -> Tensor:
    """Scaled exponential linear unit (Selu): scale * features for features > 0, else
    scale * alpha * (exp(features) - 1), with the self-normalizing constants."""
    return _unary("Selu", features, name)


def softsign(features, name: Optional[str] = None) -> Tensor:
    """features / (|features| + 1) (Softsign)."""
    return _unary("Softsign", features, name)


def gelu(features, approximate: bool = False, name: Optional[str] = None) -> Tensor:
    """Gaussian error linear unit: ``0.5 * x * (1 + erf(x / sqrt(2)))``, or with
    ``approximate`` the tanh form ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))``
    (``tf.nn.gelu``)."""
    x = convert_to_tensor(features)
    if approximate:
        cube = multiply(multiply(x, x), x)
        inner = multiply(add(x, multiply(cube, 0.044715)), math.sqrt(2.0 / math.pi))
        cdf = add(tanh(inner), 1.0)
    else:
        cdf = add(erf(multiply(x, 1.0 / math.sqrt(2.0))), 1.0)
    return multiply(multiply(x, 0.5), cdf, name=name or "Gelu")
