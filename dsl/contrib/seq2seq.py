"""``fl.contrib.seq2seq.sequence_loss``: TensorFlow 1.x's weighted cross-entropy over a batch
of sequences (``tf.contrib.seq2seq.sequence_loss``; the losses only, not the decoders).

``logits`` ``[batch, steps, classes]``, ``targets`` ``[batch, steps]`` (int),
``weights`` ``[batch, steps]``. Each step's cross-entropy times its weight, then: averaged
(divided by the summed weights) or summed (divided by the number of non-zero weights, as
TF1's ``sum_over_*`` does) across time steps and/or the batch; a reduction left off keeps that
dimension. A zero divisor gives 0 (``div_no_nan``)."""
from __future__ import annotations

from typing import Callable, Optional

from dsl.array_ops import reshape, shape
from dsl.context import name_scope
from dsl.masking_ops import count_nonzero
from dsl.math_ops import cast, div_no_nan
from dsl.nn_losses import sparse_softmax_cross_entropy_with_logits
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor, static_shape

__all__ = ["sequence_loss"]


def _check_rank(t: Tensor, rank: int, message: str) -> None:
    dims = static_shape(t)
    if dims is None or len(dims) != rank:
        raise ValueError(message)


def sequence_loss(logits, targets, weights, average_across_timesteps: bool = True,
                  average_across_batch: bool = True, sum_over_timesteps: bool = False,
                  sum_over_batch: bool = False,
                  softmax_loss_function: Optional[Callable] = None,
                  name: Optional[str] = None) -> Tensor:
    """The weighted sequence cross-entropy: a scalar with both averages (the default),
    ``[steps]`` averaged across the batch only, ``[batch]`` across time steps only,
    ``[batch, steps]`` with neither. ``softmax_loss_function(labels=, logits=)`` replaces the
    sparse softmax cross-entropy (on ``[batch*steps, classes]`` logits)."""
    logits = convert_to_tensor(logits)
    targets = convert_to_tensor(targets)
    weights = convert_to_tensor(weights)
    _check_rank(logits, 3, "Logits must be a [batch_size x sequence_length x logits] tensor")
    _check_rank(targets, 2, "Targets must be a [batch_size x sequence_length] tensor")
    _check_rank(weights, 2, "Weights must be a [batch_size x sequence_length] tensor")
    if average_across_timesteps and sum_over_timesteps:
        raise ValueError("average_across_timesteps and sum_over_timesteps cannot be set to "
                         "True at same time.")
    if average_across_batch and sum_over_batch:
        raise ValueError("average_across_batch and sum_over_batch cannot be set to True at "
                         "same time.")
    with name_scope(name or "sequence_loss"):
        num_classes = shape(logits)[2]
        flat_logits = reshape(logits, [-1, num_classes])
        flat_targets = reshape(targets, [-1])
        if softmax_loss_function is None:
            crossent = sparse_softmax_cross_entropy_with_logits(labels=flat_targets,
                                                                logits=flat_logits)
        else:
            crossent = softmax_loss_function(labels=flat_targets, logits=flat_logits)
        crossent = crossent * reshape(weights, [-1])
        if average_across_timesteps and average_across_batch:
            return div_no_nan(reduce_sum(crossent), reduce_sum(weights))
        if sum_over_timesteps and sum_over_batch:
            count = cast(count_nonzero(weights), crossent.dtype)
            return div_no_nan(reduce_sum(crossent), count)
        crossent = reshape(crossent, shape(logits)[0:2])
        if average_across_timesteps or average_across_batch:
            axis = [0] if average_across_batch else [1]
            return div_no_nan(reduce_sum(crossent, axis=axis), reduce_sum(weights, axis=axis))
        if sum_over_timesteps or sum_over_batch:
            axis = [0] if sum_over_batch else [1]
            count = cast(count_nonzero(weights, axis=axis), crossent.dtype)
            return div_no_nan(reduce_sum(crossent, axis=axis), count)
        return crossent
