"""``fl.contrib.legacy_seq2seq``: the sequence losses of TensorFlow 1.x's
``tf.contrib.legacy_seq2seq`` (the losses only, not the models), over Python lists with one
``[batch, classes]`` logits tensor, one ``[batch]`` targets tensor and one ``[batch]`` weights
tensor per time step (the shape of the PTB language-model tutorial)."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from dsl.array_ops import reshape, shape
from dsl.context import name_scope
from dsl.math_ops import add_n, cast
from dsl.nn_losses import sparse_softmax_cross_entropy_with_logits
from dsl.ops import convert_to_tensor
from dsl.reduction_ops import reduce_sum
from dsl.tensor import Tensor

__all__ = ["sequence_loss_by_example", "sequence_loss"]


def sequence_loss_by_example(logits: Sequence, targets: Sequence, weights: Sequence,
                             average_across_timesteps: bool = True,
                             softmax_loss_function: Optional[Callable] = None,
                             name: Optional[str] = None) -> Tensor:
    """``[batch]``: the sum over steps of each step's cross-entropy times its weight; with
    ``average_across_timesteps``, divided by the summed weights (plus 1e-12, so all-zero
    weights give 0)."""
    if len(targets) != len(logits) or len(weights) != len(logits):
        raise ValueError(f"Lengths of logits, weights, and targets must be the same "
                         f"{len(logits)}, {len(weights)}, {len(targets)}.")
    with name_scope(name or "sequence_loss_by_example"):
        per_step = []
        for logit, target, weight in zip(logits, targets, weights):
            if softmax_loss_function is None:
                target = reshape(convert_to_tensor(target), [-1])
                crossent = sparse_softmax_cross_entropy_with_logits(labels=target,
                                                                    logits=logit)
            else:
                crossent = softmax_loss_function(labels=target, logits=logit)
            per_step.append(crossent * weight)
        log_perps = add_n(per_step)
        if average_across_timesteps:
            total_size = add_n([convert_to_tensor(w) for w in weights]) + 1e-12
            log_perps = log_perps / total_size
    return log_perps


def sequence_loss(logits: Sequence, targets: Sequence, weights: Sequence,
                  average_across_timesteps: bool = True, average_across_batch: bool = True,
                  softmax_loss_function: Optional[Callable] = None,
                  name: Optional[str] = None) -> Tensor:
    """A scalar: ``sequence_loss_by_example`` summed over the batch, divided by the batch
    size with ``average_across_batch``."""
    with name_scope(name or "sequence_loss"):
        cost = reduce_sum(sequence_loss_by_example(
            logits, targets, weights, average_across_timesteps=average_across_timesteps,
            softmax_loss_function=softmax_loss_function))
        if average_across_batch:
            batch_size = shape(convert_to_tensor(targets[0]))[0]
            return cost / cast(batch_size, cost.dtype)
        return cost
