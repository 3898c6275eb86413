"""``fl.metrics``: TensorFlow 1.x's streaming metrics.

A metric keeps running sums in local variables (``GraphKeys.LOCAL_VARIABLES`` and
``GraphKeys.METRIC_VARIABLES``; ``fl.local_variables_initializer()`` zeroes them) and returns
``(value, update_op)``: ``update_op`` adds a batch to the sums and gives the metric over every
batch so far, ``value`` reads it without changing anything. ``mean``: ``total / count``, both
float32, with ``weights`` (broadcast to the values) weighting each value; 0 while the count is
0. ``accuracy``: the mean of ``predictions == labels``.
"""
from __future__ import annotations

from typing import Optional, Tuple

from dsl.array_ops import expand_dims, size, squeeze, zeros
from dsl.context import control_dependencies, get_default_graph
from dsl.math_ops import abs as _abs, cast, div_no_nan, equal, maximum, sqrt, squared_difference
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor, static_shape
from dsl.variable_scope import variable_scope
from dsl.variables import GraphKeys, Variable
from runtime.dtypes import DType

__all__ = ["mean", "accuracy", "mean_absolute_error", "mean_squared_error",
           "root_mean_squared_error", "metric_variable"]


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
