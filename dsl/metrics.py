"""``fl.metrics``: TensorFlow 1.x's streaming metrics.

A metric keeps running sums in local variables (``GraphKeys.LOCAL_VARIABLES`` and
``GraphKeys.METRIC_VARIABLES``; ``fl.local_variables_initializer()`` zeroes them) and returns
``(value, update_op)``: ``update_op`` adds a batch to the sums and gives the metric over every
batch so far, ``value`` reads it without changing anything. ``mean``: ``total / count``, both
float32, with ``weights`` (broadcast to the values) weighting each value; 0 while the count is
0. ``accuracy``: the mean of ``predictions == labels``. ``true_positives`` (and the other
three counts), ``precision``, ``recall``, ``auc``, ``mean_iou``, ``precision_at_k`` and
``recall_at_k`` (float64, as TensorFlow's) follow TensorFlow 1.x's formulas and variable names
(``precision/true_positives/count``, ``auc/true_positives``,
``mean_iou/total_confusion_matrix``, ``recall_at_2/true_positive_at_2``).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from dsl.array_ops import (expand_dims, gather, identity, one_hot, ones_like, reshape, size,
                           squeeze, zeros, zeros_like)
from dsl.context import control_dependencies, get_default_graph
from dsl.linalg_ops import matmul
from dsl.indexing_ops import top_k
from dsl.math_ops import (abs as _abs, cast, div_no_nan, divide, equal, greater, log, logical_and,
                          logical_not, maximum, minimum, not_equal, sqrt, squared_difference,
                          where)
from dsl.ops import constant, convert_to_tensor
from dsl.reduction_ops import reduce_any, reduce_sum
from dsl.tensor import Tensor, static_shape
from dsl.variable_scope import variable_scope
from dsl.variables import GraphKeys, Variable
from runtime.dtypes import DType

__all__ = ["mean", "accuracy", "mean_absolute_error", "mean_squared_error",
           "root_mean_squared_error", "metric_variable", "true_positives", "false_positives",
           "true_negatives", "false_negatives", "precision", "recall", "auc", "mean_iou",
           "precision_at_k", "recall_at_k"]


def metric_variable(shape, dtype, validate_shape: bool = True,
                    name: Optional[str] = None) -> Variable:
    """A zero-initialized local variable for a metric's running sums."""
    return Variable(lambda: zeros(shape, dtype), trainable=False,
                    collections=[GraphKeys.LOCAL_VARIABLES, GraphKeys.METRIC_VARIABLES],
                    validate_shape=validate_shape, name=name)


def _rank(t: Tensor) -> Optional[int]:
    return None if static_shape(t) is None else len(static_shape(t))


def _last_is_one(t: Tensor) -> bool:
    return static_shape(t)[-1] in (None, 1)


def _remove_squeezable_dimensions(predictions, labels, weights):
    """TensorFlow's rule: a trailing dim of 1 on predictions or labels (when its rank is one
    more than the other's) is squeezed; weights of one more dim squeezed, one less expanded."""
    predictions = convert_to_tensor(predictions)
    if labels is not None:
        labels = convert_to_tensor(labels)
        rp, rl = _rank(predictions), _rank(labels)
        if rp is not None and rl is not None:
            if rp - rl == 1 and _last_is_one(predictions):
                predictions = squeeze(predictions, [-1])
            elif rl - rp == 1 and _last_is_one(labels):
                labels = squeeze(labels, [-1])
    if weights is None:
        return predictions, labels, None
    weights = convert_to_tensor(weights)
    rw, rp = _rank(weights), _rank(predictions)
    if rw == 0:
        return predictions, labels, weights
    if rw is not None and rp is not None:
        if rw - rp == 1 and _last_is_one(weights):
            weights = squeeze(weights, [-1])
        elif rp - rw == 1:
            weights = expand_dims(weights, -1)
    return predictions, labels, weights


def _broadcast_weights(weights: Tensor, values: Tensor) -> Tensor:
    ws, vs = static_shape(weights), static_shape(values)
    if ws is not None and vs is not None and len(ws) > 0:
        if len(ws) != len(vs) or any(w is not None and v is not None and w not in (1, v)
                                     for w, v in zip(ws, vs)):
            raise ValueError(f"weights can not be broadcast to values. values.shape="
                             f"{tuple(vs)}. weights.shape={tuple(ws)}.")
    from dsl.array_ops import ones_like
    return weights * ones_like(values)


def _collect(collections, value) -> None:
    g = get_default_graph()
    for c in collections or ():
        g.add_to_collection(c, value)


def mean(values, weights=None, metrics_collections=None, updates_collections=None,
         name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """The (weighted) mean of ``values`` over every batch fed to ``update_op``."""
    with variable_scope(name, "mean", (values, weights)):
        values = cast(convert_to_tensor(values), DType.f32)
        total = metric_variable([], DType.f32, name="total")
        count = metric_variable([], DType.f32, name="count")
        if weights is None:
            num_values = cast(size(values), DType.f32)
        else:
            values, _, weights = _remove_squeezable_dimensions(values, None, weights)
            weights = _broadcast_weights(cast(weights, DType.f32), values)
            values = values * weights
            num_values = reduce_sum(weights)
        update_total = total.assign_add(reduce_sum(values))
        with control_dependencies([values]):
            update_count = count.assign_add(num_values)
        mean_t = div_no_nan(total.value(), maximum(count.value(), 0.0), name="value")
        _collect(metrics_collections, mean_t)
        update_op = div_no_nan(update_total, maximum(update_count, 0.0), name="update_op")
        _collect(updates_collections, update_op)
        return mean_t, update_op


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """How often ``predictions`` equal ``labels`` (weighted), over every batch so far."""
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    ps, ls = static_shape(predictions), static_shape(labels)
    if ps is not None and ls is not None and (len(ps) != len(ls) or any(
            a is not None and b is not None and a != b for a, b in zip(ps, ls))):
        raise ValueError(f"Shapes {tuple(ps)} and {tuple(ls)} are incompatible")
    if labels.dtype is not predictions.dtype:
        predictions = cast(predictions, labels.dtype)
    is_correct = cast(equal(predictions, labels), DType.f32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name or "accuracy")


def _error_metric(fn, default_name: str, labels, predictions, weights, metrics_collections,
                  updates_collections, name):
    predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
    errors = fn(cast(labels, DType.f32), cast(predictions, DType.f32))
    return mean(errors, weights, metrics_collections, updates_collections,
                name or default_name)


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None,
                        updates_collections=None, name: Optional[str] = None):
    """The mean of ``|predictions - labels|`` over every batch so far."""
    return _error_metric(lambda lab, pred: _abs(pred - lab), "mean_absolute_error", labels,
                         predictions, weights, metrics_collections, updates_collections, name)


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                       updates_collections=None, name: Optional[str] = None):
    """The mean of ``(predictions - labels)^2`` over every batch so far."""
    return _error_metric(lambda lab, pred: squared_difference(lab, pred), "mean_squared_error",
                         labels, predictions, weights, metrics_collections,
                         updates_collections, name)


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                            updates_collections=None, name: Optional[str] = None):
    """The square root of ``mean_squared_error``."""
    value, update = mean_squared_error(labels, predictions, weights, None, None,
                                       name or "root_mean_squared_error")
    rmse, update_rmse = sqrt(value), sqrt(update)
    _collect(metrics_collections, rmse)
    _collect(updates_collections, update_rmse)
    return rmse, update_rmse


# --- counts of a condition, precision, recall ---------------------------------------------------
def _count_condition(values: Tensor, weights, metrics_collections, updates_collections):
    """A float32 ``count`` variable summing ``values`` (bool, times ``weights``)."""
    count = metric_variable([], DType.f32, name="count")
    values = cast(values, DType.f32)
    if weights is not None:
        values = values * cast(convert_to_tensor(weights), DType.f32)
    value = identity(count.value(), name="value")
    _collect(metrics_collections, value)
    update_op = count.assign_add(reduce_sum(values))
    _collect(updates_collections, update_op)
    return value, update_op


def _bools(labels, predictions, weights):
    return _remove_squeezable_dimensions(cast(convert_to_tensor(predictions), DType.bool),
                                         cast(convert_to_tensor(labels), DType.bool), weights)


def _condition_metric(default_name: str, condition):
    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
        with variable_scope(name, default_name, (predictions, labels, weights)):
            predictions, labels, weights = _bools(labels, predictions, weights)
            return _count_condition(condition(labels, predictions), weights,
                                    metrics_collections, updates_collections)
    metric.__name__ = default_name
    metric.__doc__ = (f"The (weighted) number of {default_name.replace('_', ' ')} over every "
                      "batch so far (``labels`` and ``predictions`` cast to bool), as "
                      f"``tf.metrics.{default_name}``.")
    return metric


true_positives = _condition_metric("true_positives", lambda lab, pred: logical_and(lab, pred))
false_positives = _condition_metric(
    "false_positives", lambda lab, pred: logical_and(logical_not(lab), pred))
false_negatives = _condition_metric(
    "false_negatives", lambda lab, pred: logical_and(lab, logical_not(pred)))
true_negatives = _condition_metric(
    "true_negatives", lambda lab, pred: logical_and(logical_not(lab), logical_not(pred)))


def _ratio(num: Tensor, other: Tensor, name: str) -> Tensor:
    """``num / (num + other)`` where that sum is positive, else 0 (TF1's precision rule)."""
    total = num + other
    return where(greater(total, 0.0), div_no_nan(num, total), zeros_like(total), name=name)


def _ratio_metric(default_name: str, second, labels, predictions, weights,
                  metrics_collections, updates_collections, name):
    with variable_scope(name, default_name, (predictions, labels, weights)):
        predictions, labels, weights = _bools(labels, predictions, weights)
        tp, tp_update = true_positives(labels, predictions, weights)
        other, other_update = second(labels, predictions, weights)
        value = _ratio(tp, other, "value")
        _collect(metrics_collections, value)
        update_op = _ratio(tp_update, other_update, "update_op")
        _collect(updates_collections, update_op)
        return value, update_op


def precision(labels, predictions, weights=None, metrics_collections=None,
              updates_collections=None, name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """``true_positives / (true_positives + false_positives)`` over every batch so far (0 while
    nothing was predicted positive), as ``tf.metrics.precision``."""
    return _ratio_metric("precision", false_positives, labels, predictions, weights,
                         metrics_collections, updates_collections, name)


def recall(labels, predictions, weights=None, metrics_collections=None,
           updates_collections=None, name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """``true_positives / (true_positives + false_negatives)`` over every batch so far (0 while
    no label was positive), as ``tf.metrics.recall``."""
    return _ratio_metric("recall", false_negatives, labels, predictions, weights,
                         metrics_collections, updates_collections, name)


# --- auc ----------------------------------------------------------------------------------------
_AUC_EPSILON = 1e-7


def _auc_thresholds(num_thresholds: int, thresholds) -> list:
    if thresholds is not None:
        inner = [float(t) for t in thresholds]
    else:
        if num_thresholds < 2:
            raise ValueError("`num_thresholds` must be > 1.")
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - _AUC_EPSILON] + inner + [1.0 + _AUC_EPSILON]


def _confusion_at_thresholds(labels, predictions, thresholds, weights):
    """Per threshold t: the (weighted) counts of tp, fn, tn, fp with ``predictions > t``
    predicting positive; each a float32 ``[len(thresholds)]``."""
    preds = reshape(cast(predictions, DType.f32), [1, -1])
    labs = reshape(cast(labels, DType.bool), [1, -1])
    thresh = constant(np.asarray(thresholds, np.float32).reshape(-1, 1))
    pred_pos = greater(preds, thresh)                          # [T, N]
    label_pos = logical_and(labs, greater(thresh, -np.inf))    # [T, N]
    w = None
    if weights is not None:
        w = reshape(_broadcast_weights(cast(convert_to_tensor(weights), DType.f32),
                                       cast(predictions, DType.f32)), [1, -1])
    conditions = {"tp": logical_and(label_pos, pred_pos),
                  "fn": logical_and(label_pos, logical_not(pred_pos)),
                  "tn": logical_and(logical_not(label_pos), logical_not(pred_pos)),
                  "fp": logical_and(logical_not(label_pos), pred_pos)}
    values, updates = {}, {}
    for key, cond in conditions.items():
        var = metric_variable([len(thresholds)], DType.f32, name={
            "tp": "true_positives", "fn": "false_negatives", "tn": "true_negatives",
            "fp": "false_positives"}[key])
        c = cast(cond, DType.f32)
        if w is not None:
            c = c * w
        values[key] = var.value()
        updates[key] = var.assign_add(reduce_sum(c, 1))
    return values, updates


def _compute_auc(v: dict, num: int, curve: str, summation_method: str, name: str) -> Tensor:
    tp, fn, tn, fp = v["tp"], v["fn"], v["tn"], v["fp"]
    if curve == "PR" and summation_method == "careful_interpolation":
        dtp = tp[:num - 1] - tp[1:]
        p = tp + fp
        slope = div_no_nan(dtp, maximum(p[:num - 1] - p[1:], 0.0))
        intercept = tp[1:] - slope * p[1:]
        both = logical_and(greater(p[:num - 1], 0.0), greater(p[1:], 0.0))
        safe_ratio = where(both, div_no_nan(p[:num - 1], maximum(p[1:], 0.0)),
                           ones_like(p[1:]))
        return reduce_sum(div_no_nan(slope * (dtp + intercept * log(safe_ratio)),
                                     maximum(tp[1:] + fn[1:], 0.0)), name=name)
    epsilon = 1.0e-6
    rec = (tp + epsilon) / (tp + fn + epsilon)
    if curve == "ROC":
        x, y = fp / (fp + tn + epsilon), rec
    else:
        x, y = rec, (tp + epsilon) / (tp + fp + epsilon)
    if summation_method in ("trapezoidal", "careful_interpolation"):
        heights = (y[:num - 1] + y[1:]) / 2.0
    elif summation_method == "minoring":
        heights = minimum(y[:num - 1], y[1:])
    else:
        heights = maximum(y[:num - 1], y[1:])
    return reduce_sum((x[:num - 1] - x[1:]) * heights, name=name)


def auc(labels, predictions, weights=None, num_thresholds: int = 200,
        metrics_collections=None, updates_collections=None, curve: str = "ROC",
        name: Optional[str] = None, summation_method: str = "trapezoidal",
        thresholds=None) -> Tuple[Tensor, Tensor]:
    """The area under the ROC or PR curve over every batch so far, from confusion counts at
    ``num_thresholds`` thresholds evenly spaced in [0, 1] (or ``thresholds``), summed by
    ``summation_method`` (``trapezoidal``, ``careful_interpolation``, ``minoring``,
    ``majoring``), as ``tf.metrics.auc``. ``predictions`` are probabilities in [0, 1]."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
    if summation_method not in ("trapezoidal", "careful_interpolation", "minoring",
                                "majoring"):
        raise ValueError(f"Invalid summation_method: {summation_method}")
    with variable_scope(name, "auc", (labels, predictions, weights)):
        predictions, labels, weights = _remove_squeezable_dimensions(
            cast(convert_to_tensor(predictions), DType.f32), cast(labels, DType.bool),
            weights)
        cut = _auc_thresholds(int(num_thresholds), thresholds)
        values, updates = _confusion_at_thresholds(labels, predictions, cut, weights)
        value = _compute_auc(values, len(cut), curve, summation_method, "value")
        _collect(metrics_collections, value)
        update_op = _compute_auc(updates, len(cut), curve, summation_method, "update_op")
        _collect(updates_collections, update_op)
        return value, update_op


# --- mean_iou -----------------------------------------------------------------------------------
def _in_range(ids: Tensor, num_classes: int) -> Tensor:
    """``ids`` read through a gather from ``range(num_classes)``: an id out of range fails the
    step with the gather's index error (one_hot alone would drop it silently)."""
    return gather(constant(np.arange(num_classes, dtype=np.int64)), ids)


def mean_iou(labels, predictions, num_classes: int, weights=None, metrics_collections=None,
             updates_collections=None, name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """The mean over classes of ``tp / (tp + fp + fn)`` from a float64 confusion matrix
    (``total_confusion_matrix``, rows the labels) summed over every batch, classes that never
    occur left out, as ``tf.metrics.mean_iou``; ``update_op`` adds a batch to the matrix and
    returns it. Labels and predictions must be in [0, num_classes)."""
    num_classes = int(num_classes)
    with variable_scope(name, "mean_iou", (predictions, labels, weights)):
        predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels,
                                                                     weights)
        total_cm = metric_variable([num_classes, num_classes], DType.f64,
                                   name="total_confusion_matrix")
        labs = reshape(cast(labels, DType.i64), [-1])
        preds = reshape(cast(predictions, DType.i64), [-1])
        labs, preds = _in_range(labs, num_classes), _in_range(preds, num_classes)
        rows = one_hot(labs, num_classes, dtype=DType.f64)
        if weights is not None:
            w = _broadcast_weights(cast(convert_to_tensor(weights), DType.f64),
                                   cast(predictions, DType.f64))
            rows = rows * reshape(w, [-1, 1])
        current = matmul(rows, one_hot(preds, num_classes, dtype=DType.f64),
                         transpose_a=True)

        def compute(cm: Tensor, name: str) -> Tensor:
            cm = cast(cm, DType.f32)
            over_rows, over_cols = reduce_sum(cm, 0), reduce_sum(cm, 1)
            diag = reduce_sum(cm * constant(np.eye(num_classes, dtype=np.float32)), 1)
            denominator = over_rows + over_cols - diag
            valid = reduce_sum(cast(not_equal(denominator, 0.0), DType.f32))
            denominator = where(greater(denominator, 0.0), denominator,
                                ones_like(denominator))
            iou = diag / denominator
            return where(greater(valid, 0.0), div_no_nan(reduce_sum(iou), valid),
                         zeros_like(valid), name=name)

        value = compute(total_cm.value(), "mean_iou")
        _collect(metrics_collections, value)
        update_op = total_cm.assign_add(current)
        _collect(updates_collections, update_op)
        return value, update_op


# --- precision_at_k, recall_at_k ----------------------------------------------------------------
def _at_k_name(name: str, k: int, class_id: Optional[int]) -> str:
    name = f"{name}_at_{k}"
    return name if class_id is None else f"{name}_class{class_id}"


def _counts_at_k(labels: Tensor, top: Tensor, k: int, class_id: Optional[int]):
    """Per row, as TensorFlow's set operations count them: (tp, fp, fn), float64 ``[batch]``.
    ``labels`` ``[batch, num_labels]`` are sets (a repeated label counts once; a label outside
    the classes is never predicted, so it counts as a false negative); ``top`` ``[batch, k]``.
    With ``class_id``, only that class counts."""
    if class_id is not None:
        c = constant(np.int64(class_id))
        in_labels = reduce_any(equal(labels, c), axis=-1)
        in_top = reduce_any(equal(top, c), axis=-1)
        counts = (logical_and(in_top, in_labels), logical_and(in_top, logical_not(in_labels)),
                  logical_and(in_labels, logical_not(in_top)))
        return tuple(cast(t, DType.f64) for t in counts)
    n = static_shape(labels)[-1]
    if n is None:
        raise ValueError("precision_at_k and recall_at_k need the number of labels per row "
                         f"(the last dim of labels, {static_shape(labels)}) known")
    # a label's first occurrence in its row (earlier equal labels: strictly lower triangle)
    same = equal(expand_dims(labels, -1), expand_dims(labels, -2))          # [b, n, n]
    earlier = constant(np.tril(np.ones((n, n), bool), -1))
    first = logical_not(reduce_any(logical_and(same, earlier), axis=-1))   # [b, n]
    in_top = reduce_any(equal(expand_dims(labels, -1), expand_dims(top, -2)), axis=-1)
    tp = reduce_sum(cast(logical_and(first, in_top), DType.f64), -1)
    fn = reduce_sum(cast(logical_and(first, logical_not(in_top)), DType.f64), -1)
    return tp, float(k) - tp, fn


def _metric_at_k(kind: str, labels, predictions, k: int, class_id, weights,
                 metrics_collections, updates_collections, name):
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    with variable_scope(name, _at_k_name(kind, k, class_id), (predictions, labels, weights)):
        predictions = convert_to_tensor(predictions)
        labels = cast(convert_to_tensor(labels), DType.i64)
        rp, rl = _rank(predictions), _rank(labels)
        if rp is not None and rl is not None and rl == rp - 1:
            labels = expand_dims(labels, -1)
        _, top = top_k(predictions, k)
        tp, fp, fn = _counts_at_k(labels, cast(top, DType.i64), k, class_id)
        second, second_name = (fp, "false_positive") if kind == "precision" else \
            (fn, "false_negative")
        totals = []
        for counts, what in ((tp, "true_positive"), (second, second_name)):
            if weights is not None:
                counts = counts * cast(convert_to_tensor(weights), DType.f64)
            var = metric_variable([], DType.f64, name=_at_k_name(what, k, class_id))
            totals.append((var.value(), var.assign_add(reduce_sum(counts))))
        (tp_v, tp_u), (other_v, other_u) = totals
        value = divide(tp_v, tp_v + other_v, name="value")
        _collect(metrics_collections, value)
        update_op = divide(tp_u, tp_u + other_u, name="update")
        _collect(updates_collections, update_op)
        return value, update_op


def precision_at_k(labels, predictions, k: int, class_id: Optional[int] = None, weights=None,
                   metrics_collections=None, updates_collections=None,
                   name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """How many of each row's top ``k`` predicted classes are among its ``labels``, over every
    batch so far, a float64 (``tf.metrics.precision_at_k``); with ``class_id``, the precision
    of predicting that class in the top ``k``. NaN while nothing counted."""
    return _metric_at_k("precision", labels, predictions, k, class_id, weights,
                        metrics_collections, updates_collections, name)


def recall_at_k(labels, predictions, k: int, class_id: Optional[int] = None, weights=None,
                metrics_collections=None, updates_collections=None,
                name: Optional[str] = None) -> Tuple[Tensor, Tensor]:
    """How many of each row's ``labels`` are among its top ``k`` predicted classes, over every
    batch so far, a float64 (``tf.metrics.recall_at_k``); with ``class_id``, the recall of
    that class. NaN while nothing counted."""
    return _metric_at_k("recall", labels, predictions, k, class_id, weights,
                        metrics_collections, updates_collections, name)
