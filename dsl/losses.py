"""``fl.losses``: TensorFlow 1.x's ``tf.losses``, with its formulas, weights and reductions.

Every loss computes per-element losses (in float32, as TensorFlow casts them), multiplies them
by ``weights`` (a scalar, or a tensor broadcastable to the losses: same rank, each dim 1 or
equal) and reduces them by ``reduction``: ``NONE`` (the weighted losses), ``SUM``, ``MEAN``
(sum / sum of the broadcast weights), ``SUM_OVER_BATCH_SIZE`` (sum / number of elements) or
``SUM_BY_NONZERO_WEIGHTS`` (the default: sum / number of elements whose weight is not 0; 0
when there are none). The result is added to ``GraphKeys.LOSSES`` (``loss_collection``), where
``get_losses`` and ``get_total_loss`` find it; ``get_regularization_loss`` sums
``GraphKeys.REGULARIZATION_LOSSES`` (the regularizers of ``get_variable`` and ``fl.layers``).
"""
from __future__ import annotations

from typing import List, Optional

from dsl.array_ops import ones_like, shape, size, squeeze, stop_gradient, zeros_like
from dsl.context import get_default_graph, name_scope
from dsl.math_ops import (abs as _abs, add_n, cast, div_no_nan, equal, log, minimum,
                          squared_difference, where)
from dsl.nn_losses import (sigmoid_cross_entropy_with_logits,
                           softmax_cross_entropy_with_logits,
                           sparse_softmax_cross_entropy_with_logits)
from dsl.nn import relu
from dsl.ops import constant, convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor, static_shape
from dsl.variables import GraphKeys
from runtime.dtypes import DType

__all__ = ["Reduction", "compute_weighted_loss", "absolute_difference", "cosine_distance",
           "hinge_loss", "huber_loss", "log_loss", "mean_squared_error",
           "mean_pairwise_squared_error", "sigmoid_cross_entropy", "softmax_cross_entropy",
           "sparse_softmax_cross_entropy", "add_loss", "get_losses",
           "get_regularization_loss", "get_regularization_losses", "get_total_loss"]


class Reduction:
    """How a weighted loss is reduced (``tf.losses.Reduction``)."""
    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_OVER_NONZERO_WEIGHTS, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key) -> None:
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}. Key should be one of "
                             f"{cls.all()}.")


def _rank(t: Tensor) -> Optional[int]:
    return None if static_shape(t) is None else len(static_shape(t))


def _check_broadcastable(weights: Tensor, values: Tensor) -> None:
    """TensorFlow's rule for weights: a scalar, or the rank of ``values`` with each dim 1 or
    equal (checked where the shapes are known while building)."""
    ws, vs = static_shape(weights), static_shape(values)
    if ws is None or vs is None or len(ws) == 0:
        return
    if len(ws) != len(vs):
        raise ValueError(f"weights can not be broadcast to values. values.rank={len(vs)}. "
                         f"weights.rank={len(ws)}. values.shape={tuple(vs)}. "
                         f"weights.shape={tuple(ws)}.")
    for w, v in zip(ws, vs):
        if w is not None and v is not None and w != 1 and w != v:
            raise ValueError(f"weights can not be broadcast to values. values.shape="
                             f"{tuple(vs)}. weights.shape={tuple(ws)}.")


def _check_compatible(a: Tensor, b: Tensor) -> None:
    sa, sb = static_shape(a), static_shape(b)
    if sa is None or sb is None:
        return
    if len(sa) != len(sb) or any(x is not None and y is not None and x != y
                                 for x, y in zip(sa, sb)):
        raise ValueError(f"Shapes {_shape(sa)} and {_shape(sb)} are incompatible")


def _shape(s) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in s) + (
        ",)" if len(s) == 1 else ")")


def _num_present(losses: Tensor, weights, weights_t: Tensor) -> Tensor:
    if isinstance(weights, float) and weights != 0.0:
        return _num_elements(losses)
    with name_scope("num_present"):
        present = where(equal(weights_t, 0.0), zeros_like(weights_t), ones_like(weights_t))
        present = present * ones_like(losses)           # broadcast to the losses
        return reduce_sum(present)


def _num_elements(losses: Tensor) -> Tensor:
    with name_scope("num_elements"):
        return cast(size(losses), losses.dtype)


def add_loss(loss, loss_collection=GraphKeys.LOSSES) -> None:
    """Add ``loss`` to ``loss_collection`` (nothing when that is None)."""
    if loss_collection:
        get_default_graph().add_to_collection(loss_collection, loss)


def compute_weighted_loss(losses, weights=1.0, scope: Optional[str] = None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``losses * weights``, reduced by ``reduction`` (see the module docstring)."""
    Reduction.validate(reduction)
    with name_scope(scope or "weighted_loss"):
        losses = convert_to_tensor(losses)
        input_dtype = losses.dtype
        losses = cast(losses, DType.f32)
        weights_t = cast(convert_to_tensor(weights), DType.f32)
        _check_broadcastable(weights_t, losses)
        weighted = losses * weights_t
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = div_no_nan(loss, reduce_sum(ones_like(losses) * weights_t),
                                  name="value")
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = div_no_nan(loss, _num_present(losses, weights, weights_t),
                                  name="value")
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = div_no_nan(loss, _num_elements(losses), name="value")
        loss = cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def _pair(labels, predictions, what=("labels", "predictions")):
    if labels is None:
        raise ValueError(f"Argument `{what[0]}` must not be None.")
    if predictions is None:
        raise ValueError(f"Argument `{what[1]}` must not be None.")
    predictions = cast(convert_to_tensor(predictions), DType.f32)
    labels = cast(convert_to_tensor(labels), DType.f32)
    _check_compatible(predictions, labels)
    return labels, predictions


def absolute_difference(labels, predictions, weights=1.0, scope=None,
                        loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``|predictions - labels|``, weighted and reduced."""
    with name_scope(scope or "absolute_difference") as s:
        labels, predictions = _pair(labels, predictions)
        losses = _abs(predictions - labels)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None,
                       loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``(predictions - labels)^2``, weighted and reduced."""
    with name_scope(scope or "mean_squared_error") as s:
        labels, predictions = _pair(labels, predictions)
        losses = squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def huber_loss(labels, predictions, weights=1.0, delta: float = 1.0, scope=None,
               loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``0.5 * e^2`` where ``|e| <= delta``, else ``delta * (|e| - 0.5 * delta)``, with
    ``e = predictions - labels`` (TensorFlow's form, whose gradient at ``|e| == delta`` is
    counted once)."""
    with name_scope(scope or "huber_loss") as s:
        labels, predictions = _pair(labels, predictions)
        abs_error = _abs(predictions - labels)
        quadratic = minimum(abs_error, delta)
        linear = abs_error - quadratic
        losses = 0.5 * (quadratic * quadratic) + delta * linear
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def log_loss(labels, predictions, weights=1.0, epsilon: float = 1e-7, scope=None,
             loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``-labels * log(predictions + eps) - (1 - labels) * log(1 - predictions + eps)``."""
    with name_scope(scope or "log_loss") as s:
        labels, predictions = _pair(labels, predictions)
        losses = -(labels * log(predictions + epsilon)) - (1 - labels) * log(
            1 - predictions + epsilon)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``relu(1 - (2 * labels - 1) * logits)`` for 0/1 ``labels``."""
    with name_scope(scope or "hinge_loss") as s:
        labels, logits = _pair(labels, logits, ("labels", "logits"))
        all_ones = ones_like(labels)
        signs = 2 * labels - all_ones
        losses = relu(all_ones - signs * logits)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def cosine_distance(labels, predictions, axis: Optional[int] = None, weights=1.0, scope=None,
                    loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None) -> Tensor:
    """``1 - sum(labels * predictions, axis)`` (both unit-normalized by the caller)."""
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("You must specify argument `axis`.")
    with name_scope(scope or "cosine_distance_loss") as s:
        labels, predictions = _pair(labels, predictions)
        losses = 1 - reduce_sum(predictions * labels, axis=[axis], keepdims=True)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def mean_pairwise_squared_error(labels, predictions, weights=1.0, scope=None,
                                loss_collection=GraphKeys.LOSSES) -> Tensor:
    """Per example, the mean over pairs of elements (i, j) of ``((p_i - p_j) - (l_i -
    l_j))^2``, weighted per example and summed (TensorFlow's formula, by sums)."""
    from dsl.array_ops import range as _range, rank
    from dsl.math_ops import maximum, square
    with name_scope(scope or "mean_pairwise_squared_error"):
        labels, predictions = _pair(labels, predictions)
        weights_t = cast(convert_to_tensor(weights), DType.f32)
        _check_broadcastable(weights_t, labels)
        diffs = predictions - labels
        axis = _range(1, rank(diffs))
        sum_sq = reduce_sum(square(diffs), axis=axis, keepdims=True)
        if isinstance(weights, float) and weights != 0.0:
            count = reduce_sum(ones_like(diffs), axis=axis, keepdims=True)
        else:
            present = where(equal(weights_t, 0.0), zeros_like(weights_t), ones_like(weights_t))
            count = reduce_sum(present * ones_like(diffs), axis=axis, keepdims=True)
        term1 = 2.0 * div_no_nan(sum_sq, maximum(count - 1, 0.0))
        sum_diff = reduce_sum(diffs, axis=axis, keepdims=True)
        term2 = 2.0 * div_no_nan(square(sum_diff), maximum(count * (count - 1), 0.0))
        loss = reduce_sum((term1 - term2) * weights_t)
        mean_loss = where(reduce_sum(count) > 0, loss, zeros_like(loss), name="value")
        add_loss(mean_loss, loss_collection)
        return mean_loss


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing: float = 0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """``sigmoid_cross_entropy_with_logits`` per element; ``label_smoothing`` moves the labels
    toward 1/2: ``labels * (1 - ls) + 0.5 * ls``."""
    if multi_class_labels is None:
        raise ValueError("Argument `multi_class_labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with name_scope(scope or "sigmoid_cross_entropy_loss") as s:
        logits = convert_to_tensor(logits)
        labels = cast(convert_to_tensor(multi_class_labels), logits.dtype)
        _check_compatible(logits, labels)
        if label_smoothing > 0:
            labels = labels * (1 - label_smoothing) + 0.5 * label_smoothing
        losses = sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                   name="xentropy")
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing: float = 0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """Per example, the cross-entropy of softmax(logits) against ``onehot_labels`` (no
    gradient into the labels); ``label_smoothing`` mixes the labels with the uniform
    distribution: ``labels * (1 - ls) + ls / num_classes``."""
    if onehot_labels is None:
        raise ValueError("Argument `onehot_labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with name_scope(scope or "softmax_cross_entropy_loss") as s:
        logits = convert_to_tensor(logits)
        labels = cast(convert_to_tensor(onehot_labels), logits.dtype)
        _check_compatible(logits, labels)
        if label_smoothing > 0:
            num_classes = cast(shape(labels)[-1], logits.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / num_classes
        labels = stop_gradient(labels, name="labels_stop_gradient")
        losses = softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                   name="xentropy")
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def _squeeze_last(t: Tensor) -> Tensor:
    return squeeze(t, [-1])


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS) -> Tensor:
    """Per example, the cross-entropy of softmax(logits) against class indices ``labels``
    (``[batch]``, or ``[batch, 1]``, which is squeezed, as are weights of one more dim)."""
    if labels is None:
        raise ValueError("Argument `labels` must not be None.")
    if logits is None:
        raise ValueError("Argument `logits` must not be None.")
    with name_scope(scope or "sparse_softmax_cross_entropy_loss") as s:
        labels, logits = convert_to_tensor(labels), convert_to_tensor(logits)
        rl, rp = _rank(labels), _rank(logits)
        if rl is not None and rp is not None:
            diff = rp - rl
            if diff == 0 and static_shape(logits)[-1] in (None, 1):
                logits = _squeeze_last(logits)
            elif diff == 2 and static_shape(labels)[-1] in (None, 1):
                labels = _squeeze_last(labels)
        w = weights
        if not isinstance(weights, (int, float)):
            w = convert_to_tensor(weights)
            rw, rl = _rank(w), _rank(labels)
            if rw is not None and rl is not None and rw - rl == 1:
                w = _squeeze_last(w)
        losses = sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                          name="xentropy")
        return compute_weighted_loss(losses, w, s, loss_collection, reduction)


# --- collections -----------------------------------------------------------------------------
def get_losses(scope: Optional[str] = None, loss_collection=GraphKeys.LOSSES) -> List[Tensor]:
    """The losses in ``loss_collection`` (those whose name ``scope`` matches)."""
    return get_default_graph().get_collection(loss_collection, scope)


def get_regularization_losses(scope: Optional[str] = None) -> List[Tensor]:
    return get_default_graph().get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope: Optional[str] = None,
                            name: str = "total_regularization_loss") -> Tensor:
    """The sum of the regularization losses (0.0 when there are none)."""
    losses = get_regularization_losses(scope)
    if losses:
        return add_n(losses, name=name)
    return constant(0.0)


def get_total_loss(add_regularization_losses: bool = True, name: str = "total_loss",
                   scope: Optional[str] = None) -> Tensor:
    """The sum of the losses in ``GraphKeys.LOSSES`` and, unless told otherwise, the
    regularization losses."""
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses += get_regularization_losses(scope=scope)
    if not losses:
        raise ValueError("No losses to sum: the loss collection is empty")
    return add_n(losses, name=name)
