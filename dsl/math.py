"""``fl.math``: TensorFlow's ``tf.math`` namespace (TF 1.13+), the aliases of the functions
flowc has under the same names at the top level (``fl.math.reduce_sum is fl.reduce_sum``)
or in ``fl.nn`` (``fl.math.softplus is fl.nn.softplus``). tf.math names flowc lacks are
absent: using one is an AttributeError, not a silent stand-in."""
from __future__ import annotations

import dsl as _fl
from dsl import nn as _nn

_FROM_TOP = (
    "abs", "acos", "acosh", "add", "add_n", "argmax", "argmin", "asin", "asinh", "atan",
    "atan2", "atanh", "ceil", "cos", "cosh", "count_nonzero", "cumprod", "cumsum", "divide",
    "divide_no_nan", "equal", "erf", "erfc", "exp", "expm1", "floor", "floordiv", "floormod",
    "greater", "greater_equal", "is_finite", "is_inf", "is_nan", "less", "less_equal", "log",
    "log1p", "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum",
    "mod", "multiply", "negative", "not_equal", "pow", "reciprocal", "reduce_all", "reduce_any",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "round", "rsqrt",
    "sigmoid", "sign", "sin", "sinh", "sqrt", "square", "squared_difference", "subtract", "tan",
    "tanh", "top_k", "truediv", "unsorted_segment_sum", "reduce_logsumexp", "log_sigmoid",
    "reduce_variance", "reduce_std", "reduce_euclidean_norm", "scalar_mul", "accumulate_n",
    "xlogy", "xdivy", "confusion_matrix", "segment_sum", "segment_mean", "segment_max",
    "segment_min", "segment_prod", "unsorted_segment_max", "unsorted_segment_min",
    "unsorted_segment_prod", "unsorted_segment_mean", "unsorted_segment_sqrt_n", "bincount",
    "invert_permutation", "lgamma", "digamma", "polygamma", "zeta", "igamma", "igammac",
    "betainc", "erfinv", "ndtri", "bessel_i0e", "bessel_i1e", "bessel_i0", "bessel_i1", "lbeta",
)
_FROM_NN = (
    "in_top_k", "l2_normalize", "log_softmax", "softmax", "softplus", "softsign",
)

for _name in _FROM_TOP:
    globals()[_name] = getattr(_fl, _name)
for _name in _FROM_NN:
    globals()[_name] = getattr(_nn, _name)

__all__ = list(_FROM_TOP + _FROM_NN)
