"""``fl.nn``: neural-network functions named as in ``tf.nn``: softmax, log_softmax, bias_add,
and the activations (relu, relu6, elu, softplus, sigmoid, tanh) from ``dsl.math_ops``."""
from __future__ import annotations

from typing import Optional

from compiler.ir.op_registry import has_op
from dsl.indexing_ops import top_k
from dsl.math_ops import elu, relu, relu6, sigmoid, softplus, tanh
from dsl.context import name_scope
from dsl.ops import apply_op, convert_to_tensor
from dsl.tensor import Tensor, static_shape

__all__ = ["softmax", "log_softmax", "bias_add", "xw_plus_b", "relu", "relu6", "elu", "softplus",
           "sigmoid", "tanh", "top_k"]


def _softmax(op: str, logits, axis, name: Optional[str], dim) -> Tensor:
    if axis is not None and dim is not None:
        raise ValueError("cannot specify both 'axis' and 'dim'")
    if axis is None:
        axis = -1 if dim is None else dim
    x = convert_to_tensor(logits)
    rank = None if static_shape(x) is None else len(static_shape(x))
    if axis == -1 or (rank is not None and axis == rank - 1):
        return apply_op(op, [x], name=name or op)
    if rank is None:
        raise ValueError(f"{op} over axis {axis} needs the rank of {x.name} to be known")
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for {x.name} of rank {rank}")
    if not has_op("Transpose"):
        raise NotImplementedError(f"{op} over a non-last axis needs the Transpose op")
    axis %= rank
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    moved = apply_op("Transpose", [x, perm])
    return apply_op("Transpose", [apply_op(op, [moved]), perm], name=name or op)


def softmax(logits, axis: Optional[int] = None, name: Optional[str] = None,
            dim: Optional[int] = None) -> Tensor:
    """exp(logits) / sum(exp(logits)) along ``axis`` (default the last), as ``tf.nn.softmax``."""
    return _softmax("Softmax", logits, axis, name, dim)


def log_softmax(logits, axis: Optional[int] = None, name: Optional[str] = None,
                dim: Optional[int] = None) -> Tensor:
    """logits - log(sum(exp(logits))) along ``axis`` (default the last)."""
    return _softmax("LogSoftmax", logits, axis, name, dim)


def bias_add(value, bias, data_format: Optional[str] = None, name: Optional[str] = None) -> Tensor:
    """value + bias along the channel dim (last for NHWC, the default; 1 for NCHW)."""
    value = convert_to_tensor(value)
    bias = convert_to_tensor(bias, dtype=value.dtype)
    fmt = data_format or "NHWC"
    if fmt.startswith("NC"):
        fmt = "NCHW"
    elif fmt.startswith("N") and fmt.endswith("C"):
        fmt = "NHWC"
    return apply_op("BiasAdd", [value, bias], {"data_format": fmt}, name=name or "BiasAdd")

def xw_plus_b(x, weights, biases, name: Optional[str] = None) -> Tensor:
    """``matmul(x, weights) + biases`` (``tf.nn.xw_plus_b``)."""
    from dsl.linalg_ops import matmul
    with name_scope(name or "xw_plus_b"):
        return bias_add(matmul(x, weights), biases)


from dsl import nn_conv as _nn_conv, nn_losses as _nn_losses  # noqa: E402
from dsl.embedding_ops import embedding_lookup  # noqa: E402,F401
from dsl.sparse_ops import embedding_lookup_sparse  # noqa: E402,F401
from dsl.nn_conv import *  # noqa: E402,F401,F403  (conv2d, max_pool, ...)
from dsl.nn_losses import *  # noqa: E402,F401,F403  (softmax_cross_entropy_with_logits, ...)
from dsl.candidate_sampling import (log_uniform_candidate_sampler,  # noqa: E402,F401
                                    uniform_candidate_sampler)
from dsl.nn_sampled import compute_sampled_logits, nce_loss, sampled_softmax_loss  # noqa: E402,F401
from dsl.masking_ops import in_top_k  # noqa: E402,F401
from dsl import nn_norm as _nn_norm  # noqa: E402
from dsl.nn_norm import (batch_normalization, fused_batch_norm, l2_normalize,  # noqa: E402,F401
                         moments)
from dsl import nn_activations as _nn_activations  # noqa: E402
from dsl.nn_activations import gelu, leaky_relu, selu, softsign  # noqa: E402,F401
from dsl import nn_tf1_extra as _nn_tf1_extra  # noqa: E402
from dsl.nn_tf1_extra import *  # noqa: E402,F401,F403  (lrn, conv1d, separable_conv2d, ...)

from dsl import rnn_cell  # noqa: E402,F401  (fl.nn.rnn_cell.BasicLSTMCell, ...)
from dsl import rnn as _rnn  # noqa: E402
from dsl.rnn import *  # noqa: E402,F401,F403  (dynamic_rnn, static_rnn, ...)

__all__ += _rnn.__all__ + ["rnn_cell"]
__all__ += _nn_conv.__all__ + _nn_losses.__all__ + ["embedding_lookup", "embedding_lookup_sparse"]
__all__ += _nn_activations.__all__
__all__ += _nn_norm.__all__
__all__ += _nn_tf1_extra.__all__
__all__ += ["uniform_candidate_sampler", "log_uniform_candidate_sampler", "sampled_softmax_loss",
            "compute_sampled_logits", "nce_loss", "in_top_k"]
