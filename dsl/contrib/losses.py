"""``slim.losses`` (TensorFlow 1.x's ``tf.contrib.losses``): ``fl.losses``' functions with
contrib's argument order (predictions or logits first, labels second), so a slim program's
positional calls mean what they meant there. Each loss is weighted, averaged over the
elements of nonzero weight, and added to ``GraphKeys.LOSSES``; ``hinge_loss`` returns the
unreduced losses, as contrib's does."""
from __future__ import annotations

from typing import Optional

from dsl import losses as _losses
from dsl.losses import (add_loss, compute_weighted_loss, get_losses,  # noqa: F401
                        get_regularization_losses, get_total_loss)
from dsl.tensor import Tensor

__all__ = ["absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance",
           "get_losses", "get_regularization_losses", "get_total_loss", "hinge_loss",
           "log_loss", "mean_pairwise_squared_error", "mean_squared_error",
           "sigmoid_cross_entropy", "softmax_cross_entropy", "sparse_softmax_cross_entropy"]


def absolute_difference(predictions, labels=None, weights=1.0, scope=None) -> Tensor:
    return _losses.absolute_difference(labels, predictions, weights=weights, scope=scope)


def mean_squared_error(predictions, labels=None, weights=1.0, scope=None) -> Tensor:
    return _losses.mean_squared_error(labels, predictions, weights=weights, scope=scope)


def mean_pairwise_squared_error(predictions, labels=None, weights=1.0, scope=None) -> Tensor:
    return _losses.mean_pairwise_squared_error(labels, predictions, weights=weights,
                                               scope=scope)


def log_loss(predictions, labels=None, weights=1.0, epsilon: float = 1e-7,
             scope=None) -> Tensor:
    return _losses.log_loss(labels, predictions, weights=weights, epsilon=epsilon, scope=scope)


def cosine_distance(predictions, labels=None, axis: Optional[int] = None, weights=1.0,
                    scope=None, dim=None) -> Tensor:
    return _losses.cosine_distance(labels, predictions, axis=axis, weights=weights,
                                   scope=scope, dim=dim)


def sigmoid_cross_entropy(logits, multi_class_labels, weights=1.0, label_smoothing: float = 0,
                          scope=None) -> Tensor:
    return _losses.sigmoid_cross_entropy(multi_class_labels, logits, weights=weights,
                                         label_smoothing=label_smoothing, scope=scope)


def softmax_cross_entropy(logits, onehot_labels, weights=1.0, label_smoothing: float = 0,
                          scope=None) -> Tensor:
    return _losses.softmax_cross_entropy(onehot_labels, logits, weights=weights,
                                         label_smoothing=label_smoothing, scope=scope)


def sparse_softmax_cross_entropy(logits, labels, weights=1.0, scope=None) -> Tensor:
    return _losses.sparse_softmax_cross_entropy(labels, logits, weights=weights, scope=scope)


def hinge_loss(logits, labels=None, scope=None) -> Tensor:
    """``relu(1 - (2 * labels - 1) * logits)`` elementwise (not reduced, not collected)."""
    return _losses.hinge_loss(labels, logits, scope=scope, loss_collection=None,
                              reduction=_losses.Reduction.NONE)
