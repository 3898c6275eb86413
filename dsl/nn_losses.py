"""`fl.nn` losses and dropout: softmax cross-entropy, l2_loss, dropout."""
from __future__ import annotations

import numbers
from typing import Optional

from dsl.array_ops import reshape, shape
from dsl.math_ops import cast, greater_equal, multiply, where
from dsl.ops import apply_op, convert_to_tensor
from dsl.random_ops import op_seeds
from dsl.tensor import Tensor, static_shape
from runtime.dtypes import DType

__all__ = ["sparse_softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits",
           "softmax_cross_entropy_with_logits_v2", "sigmoid_cross_entropy_with_logits",
           "l2_loss", "dropout"]


def _rank(t: Tensor) -> Optional[int]:
    return None if static_shape(t) is None else len(static_shape(t))


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None,
                                             name: Optional[str] = None) -> Tensor:
    """Per-example cross-entropy of softmax(logits) against class indices ``labels``.

    ``logits`` is [..., classes] and ``labels`` [...] (int32/int64); a label outside
    [0, classes) is a run-time error naming the node.
    """
    if labels is None or logits is None:
        raise ValueError("sparse_softmax_cross_entropy_with_logits needs labels= and logits=")
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels)
    if labels.dtype not in (DType.i32, DType.i64):
        raise TypeError(f"labels must be int32 or int64, got {labels.dtype}")
    rl, rb = _rank(logits), _rank(labels)
    if rl is not None and rb is not None and rb != rl - 1:
        raise ValueError(f"labels must have rank {rl - 1} for logits of rank {rl}, got {rb}")
    op = "SparseSoftmaxCrossEntropyWithLogits"
    if rl == 2 or rl is None:
        return apply_op(op, [logits, labels], name=name or op)[0]
    classes = static_shape(logits)[-1] if static_shape(logits)[-1] is not None else shape(logits)[-1]
    loss = apply_op(op, [reshape(logits, [-1, classes]), reshape(labels, [-1])])[0]
    return reshape(loss, shape(labels), name=name or op)


def softmax_cross_entropy_with_logits(labels=None, logits=None, axis: int = -1,
                                      name: Optional[str] = None) -> Tensor:
    """Cross-entropy of softmax(logits) against distributions ``labels`` over the last axis
    (gradients flow into both, as tf.nn.softmax_cross_entropy_with_logits_v2). Rank-2 logits
    and labels broadcast as TF's op allows; higher ranks need labels of the logits' shape."""
    if labels is None or logits is None:
        raise ValueError("softmax_cross_entropy_with_logits needs labels= and logits=")
    logits = convert_to_tensor(logits)
    labels = cast(convert_to_tensor(labels), logits.dtype)
    r = _rank(logits)
    if axis not in (-1, None) and not (r is not None and axis == r - 1):
        raise ValueError("softmax_cross_entropy_with_logits supports only the last axis, "
                         f"got {axis}")
    if r is not None and r < 2:
        raise ValueError(f"softmax_cross_entropy_with_logits needs logits of rank >= 2, got {r}")
    op = "SoftmaxCrossEntropyWithLogits"
    if r is None or r == 2:
        return apply_op(op, [logits, labels], name=name or op)[0]
    classes = static_shape(logits)[-1] if static_shape(logits)[-1] is not None else shape(logits)[-1]
    loss = apply_op(op, [reshape(logits, [-1, classes]), reshape(labels, [-1, classes])])[0]
    return reshape(loss, shape(logits)[:-1], name=name or op)


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                      name: Optional[str] = None) -> Tensor:
    """Elementwise cross-entropy of sigmoid(logits) against probabilities ``labels``, in
    TensorFlow's stable form ``max(x, 0) - x * z + log1p(exp(-|x|))``."""
    if _sentinel is not None:
        raise ValueError("sigmoid_cross_entropy_with_logits takes labels= and logits= by name")
    if labels is None or logits is None:
        raise ValueError("sigmoid_cross_entropy_with_logits needs labels= and logits=")
    from dsl.array_ops import zeros_like
    from dsl.context import name_scope
    from dsl.math_ops import exp, log1p
    with name_scope(name or "logistic_loss"):
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels, dtype=logits.dtype)
        if static_shape(logits) is not None and static_shape(labels) is not None and (
                len(static_shape(logits)) != len(static_shape(labels)) or any(
                    a is not None and b is not None and a != b
                    for a, b in zip(static_shape(logits), static_shape(labels)))):
            raise ValueError(f"logits and labels must have the same shape "
                             f"({list(static_shape(logits))} vs {list(static_shape(labels))})")
        zeros = zeros_like(logits)
        positive = greater_equal(logits, zeros)
        relu_logits = where(positive, logits, zeros)
        neg_abs_logits = where(positive, -logits, logits)
        return relu_logits - logits * labels + log1p(exp(neg_abs_logits))


def l2_loss(t, name: Optional[str] = None) -> Tensor:
    """sum(t ** 2) / 2."""
    return apply_op("L2Loss", [convert_to_tensor(t)], name=name or "L2Loss")


def dropout(x, keep_prob=None, rate=None, noise_shape=None, seed: Optional[int] = None,
            name: Optional[str] = None) -> Tensor:
    """Zero elements with probability ``rate`` (= 1 - keep_prob), scale the rest by 1/(1-rate)."""
    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout needs exactly one of keep_prob and rate")
    x = convert_to_tensor(x)
    if x.dtype not in (DType.f32, DType.f64):
        raise TypeError(f"dropout needs a float tensor, got {x.dtype}")
    if rate is None:
        rate = 1 - keep_prob if isinstance(keep_prob, numbers.Real) else \
            1 - convert_to_tensor(keep_prob, dtype=x.dtype)
    if isinstance(rate, numbers.Real):
        if not 0 <= rate < 1:
            raise ValueError(f"rate must be in [0, 1), got {rate}")
        if rate == 0:
            return x
        scale = convert_to_tensor(1.0 / (1.0 - rate), dtype=x.dtype)
        rate_t = convert_to_tensor(rate, dtype=x.dtype)
    else:
        rate_t = convert_to_tensor(rate, dtype=x.dtype)
        scale = 1 / (1 - rate_t)
    s, s2 = op_seeds(seed)
    dims = shape(x) if noise_shape is None else noise_shape
    if not isinstance(dims, Tensor):
        dims = convert_to_tensor(dims, dtype=DType.i32)
    rnd = apply_op("RandomUniform", [dims], {"dtype": x.dtype, "seed": s, "seed2": s2})
    keep = greater_equal(rnd, rate_t)
    return where(keep, multiply(x, scale), convert_to_tensor(0, dtype=x.dtype),
                 name=name or "dropout")
